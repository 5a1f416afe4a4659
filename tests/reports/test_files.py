"""Tests for runner.reports.files: the files of a report directory, each written whole
and redacted, and the summary appended to GitHub's step summary file."""

from __future__ import annotations

import json
from pathlib import Path

from runner.redact import Redactor
from runner.reports.files import write_reports
from runner.reports.model import Report
from tests.support.reports import report, task

SECRET = "sk-files-test-0123456789abcdef"


def leaky() -> Report:
    return report(
        [
            task("a", "p/m", "completed", run="a.r1", final_message=f"used {SECRET}"),
            task("b", "p/m", "failed", run="b.r1", error=f"401 for key {SECRET}"),
        ]
    )


def test_without_a_page_three_files_are_written_and_no_secret_in_any(tmp_path: Path) -> None:
    path = write_reports(leaky(), tmp_path, redact=Redactor([SECRET]), page=False)
    assert path == tmp_path / "report.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "report.json", "summary.md"]
    for f in tmp_path.iterdir():
        text = f.read_text()
        assert SECRET not in text and text.strip(), f.name
    back = Report.model_validate_json(path.read_text())
    assert back.runs[1].error == "401 for key [REDACTED]"
    assert json.loads(path.read_text())["batch_id"] == "20260314-101500-ab12"


def test_with_the_page_report_html_is_written_too(tmp_path: Path) -> None:
    write_reports(leaky(), tmp_path, redact=Redactor([SECRET]))
    page = (tmp_path / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and SECRET not in page
    assert "[REDACTED]" in page


def test_the_step_summary_is_appended_redacted(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    step = tmp_path / "step_summary.md"
    step.write_text("# earlier step\n")
    for _ in range(2):
        write_reports(leaky(), out, redact=Redactor([SECRET]), step_summary=str(step), page=False)
    summary = (out / "summary.md").read_text()
    assert step.read_text() == "# earlier step\n" + 2 * (summary + "\n")
    assert SECRET not in step.read_text()


def test_a_second_write_replaces_the_files_whole(tmp_path: Path) -> None:
    write_reports(leaky(), tmp_path, redact=Redactor([]), page=False)
    write_reports(
        report([task("c", "p/m", "completed")]), tmp_path, redact=Redactor([]), page=False
    )
    back = Report.model_validate_json((tmp_path / "report.json").read_text())
    assert [r.id for r in back.runs] == ["c"]
    assert "b.r1" not in (tmp_path / "junit.xml").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "report.json", "summary.md"]
