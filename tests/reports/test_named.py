"""Counts are named for what they count, and the Action's `failed` output is failures only."""

from __future__ import annotations

import json
from pathlib import Path

import xmlschema

from runner.github import outputs_for
from runner.reports.junit import render_junit
from runner.reports.model import Report
from tests.support.cli import run_cli
from tests.support.reports import report, task

GOLDEN_XSD = Path(__file__).resolve().parent.parent / "golden" / "reports" / "junit.xsd"


def _mixed() -> Report:
    return report(
        [
            task("a", "p/m", "completed"),
            task("a", "p/m", "check_failed"),
            task("b", "p/m", "error"),
            task("b", "p/m", "skipped", requests=0, skip_reason="budget"),
            task("c", "p/m", "skipped", requests=0, skip_reason="interrupted"),
        ]
    )


def test_totals_count_runs_under_their_name_and_old_reports_still_load() -> None:
    rep = _mixed()
    data = json.loads(rep.model_dump_json())
    assert data["totals"]["runs"] == 5 and "tasks" not in data["totals"]
    data["totals"]["runs"] = data["totals"].pop("runs")  # as older runners wrote it
    assert Report.model_validate(data).totals.runs == 5


def test_action_failed_output_leaves_out_skipped_runs() -> None:
    out = outputs_for(_mixed(), "runner-out/report.json")
    assert (out["runs"], out["passed"], out["failed"]) == ("5", "1", "2")


def test_junit_root_has_no_skipped_attribute_because_the_schema_forbids_it() -> None:
    schema = xmlschema.XMLSchema(str(GOLDEN_XSD))
    xml = render_junit(_mixed())
    schema.validate(xml)
    assert 'skipped="2"' in xml  # on the suite, where the schema allows it
    rooted = xml.replace("<testsuites ", '<testsuites skipped="2" ', 1)
    assert not schema.is_valid(rooted)


def test_reports_of_schema_1_are_still_read(tmp_path: Path) -> None:
    data = json.loads(_mixed().model_dump_json())
    data["schema_version"] = "runner.report/1"
    data["totals"]["runs"] = data["totals"].pop("runs")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.json").write_text(json.dumps(data))
    res = run_cli("report", "compare", tmp_path / "old", tmp_path / "old", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["overall"]["base"]["runs"] == 5
