"""What a step writes to the job (annotations, outputs, the summary) and the report and
token most steps start from."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.errors import RunnerError
from runner.github.workflow_io import (
    annotate,
    append_summary,
    github_token,
    load_report,
    write_outputs,
)
from tests.support.gha import parse_output_file
from tests.support.threads import report_file


def test_annotations_escape_what_would_start_a_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GitHub's workflow-command rules: `%`, CR and LF in a message are escaped, so a
    runner error cannot end its annotation and start a command of its own."""
    annotate("error", "runner", "100% broken\r\n::add-mask::x\nnext")
    assert capsys.readouterr().out == (
        "::error title=runner::100%25 broken%0D%0A::add-mask::x%0Anext\n"
    )


def test_outputs_append_to_the_output_file_or_go_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "output"
    out.write_text("earlier<<x\nkept\nx\n")
    write_outputs({"a": "one\ntwo"}, {"GITHUB_OUTPUT": str(out)})
    assert parse_output_file(out.read_text()) == {"earlier": "kept", "a": "one\ntwo"}
    write_outputs({"b": "2"}, {})
    assert parse_output_file(capsys.readouterr().out) == {"b": "2"}


def test_the_summary_gets_inert_text_and_nothing_without_a_summary_file(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    append_summary("hi @octocat\n::error::x\n", {"GITHUB_STEP_SUMMARY": str(summary)})
    text = summary.read_text()
    assert "octocat" in text and "@octocat" not in text
    assert not any(line.lstrip().startswith("::") for line in text.splitlines())
    append_summary("more\n", {})  # no file named: nothing written anywhere
    assert summary.read_text() == text


def test_load_report_reads_a_report_of_its_batch(tmp_path: Path) -> None:
    path = report_file(tmp_path / "report.json")
    for batch in (None, "r1", " r1\n"):
        report = load_report(path, batch)
        assert report is not None and report.batch_id == "r1"


def test_no_report_is_a_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load_report(tmp_path / "missing.json") is None
    assert load_report(report_file(tmp_path / "report.json"), " ") is None
    assert capsys.readouterr().out.splitlines() == [
        f"::warning title=runner::no report at {tmp_path / 'missing.json'}",
        f"::warning title=runner::no report: the run step wrote none to {tmp_path / 'report.json'}",
    ]


@pytest.mark.parametrize(
    "data", [b"{not json", b"\xff\xfe\x00", b'{"batch_id": 1}', b"[]"], ids=str
)
def test_what_is_not_a_report_is_named(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(data)
    with pytest.raises(RunnerError, match=rf"^{re.escape(str(path))} is not a runner report: "):
        load_report(path)


def test_a_directory_where_the_report_should_be_is_no_report(tmp_path: Path) -> None:
    (tmp_path / "report.json").mkdir()
    assert load_report(tmp_path / "report.json") is None


def test_an_empty_token_names_its_variable_and_the_permission() -> None:
    assert github_token({"GH": "ghs_x"}, "GH") == "ghs_x"
    with pytest.raises(RunnerError, match=r"^GH is empty: pass github-token \(needs pull-requests"):
        github_token({"GH": ""}, "GH")
