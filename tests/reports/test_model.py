"""Tests for runner.reports.model: what report.json may hold (nothing unknown, input files
named by their hash), and older reports read under today's names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.reports.model import (
    READS,
    SCHEMA_VERSION,
    Report,
    RunInputs,
    RunReport,
    Totals,
)
from runner.vocabulary import RunStatus
from tests.support.cli import run_cli
from tests.support.reports import mixed_report, report, task


def test_a_report_before_3_reads_under_todays_names_and_writes_them() -> None:
    old = json.loads(report([task("a", "p/m", "completed", run="a.r1")]).model_dump_json())
    old["run_id"] = old.pop("batch_id")
    old["tasks"] = old.pop("runs")
    old["totals"]["tasks"] = old["totals"].pop("runs")
    old["schema_version"] = "runner.report/2"
    back = Report.model_validate(old)
    assert (back.batch_id, back.totals.runs, back.runs[0].run) == (
        "20260314-101500-ab12",
        1,
        "a.r1",
    )
    written = json.loads(back.model_dump_json())
    assert not {"run_id", "tasks"} & set(written) and "tasks" not in written["totals"]
    assert back.schema_version in READS and SCHEMA_VERSION in READS


def test_an_old_name_beside_the_new_one_is_refused_not_dropped() -> None:
    data = json.loads(report([]).model_dump_json())
    data["run_id"] = "other"
    with pytest.raises(ValidationError, match="run_id"):
        Report.model_validate(data)
    totals = {"runs": 1, "tasks": 2, "completed": 0, "not_completed": 1}
    with pytest.raises(ValidationError, match="tasks"):
        Totals.model_validate({**totals, "requests": 0, "tool_calls": 0, "usage": {}})


def test_an_unknown_field_is_refused_wherever_it_is() -> None:
    data = json.loads(report([task("a", "p/m", "completed")]).model_dump_json())
    data["runs"][0]["usage"]["bonus_tokens"] = 1
    with pytest.raises(ValidationError, match=r"runs\.0\.usage\.bonus_tokens"):
        Report.model_validate(data)


@pytest.mark.parametrize(
    "name",
    [
        "inputs/../../etc/passwd",
        f"inputs/{'A' * 64}.json",
        f"inputs/{'a' * 63}.json",
        f"/inputs/{'a' * 64}.json",
        f"inputs/{'a' * 64}.json\n",
    ],
)
def test_an_input_file_is_only_ever_a_hash_under_inputs(name: str) -> None:
    good = f"inputs/{'a' * 64}.json"
    RunInputs(prompt=good, instructions=good, tools=good)
    with pytest.raises(ValidationError, match="prompt"):
        RunInputs(prompt=name, instructions=good, tools=good)


def test_user_turns_count_the_turn_a_run_was_stopped_in() -> None:
    run = task("a", "p/m", "max_requests", requests=3)
    later = [r.model_copy(update={"turn": t}) for r, t in zip(run.requests, (0, 1, 2), strict=True)]
    stopped = run.model_copy(update={"requests": later, "turns_completed": 2})
    assert stopped.user_turns == 3
    assert run.model_copy(update={"requests": [], "turns_completed": 0}).user_turns == 0
    # Older reports without requests still count what they finished.
    assert run.model_copy(update={"requests": [], "turns_completed": 2}).user_turns == 2


def test_the_old_status_name_is_read_as_the_new_one() -> None:
    data = json.loads(task("a", "p/m", "completed").model_dump_json())
    data["status"] = "max_turns"
    assert RunReport.model_validate(data).status is RunStatus.MAX_REQUESTS


def test_reports_of_schema_1_are_still_read(tmp_path: Path) -> None:
    data = json.loads(mixed_report().model_dump_json())
    data["schema_version"] = "runner.report/1"
    data["totals"]["runs"] = data["totals"].pop("runs")
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "report.json").write_text(json.dumps(data))
    res = run_cli("report", "compare", tmp_path / "old", tmp_path / "old", "--format", "json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["overall"]["base"]["runs"] == 5
