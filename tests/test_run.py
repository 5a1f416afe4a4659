"""The pure steps of runner/run.py, with no run executed (the status rule they feed is
tested in tests/test_record.py)."""

from __future__ import annotations

from pathlib import Path

from runner.record import RunRecord, error_of, status_of
from runner.run import with_output
from runner.vocabulary import RunStatus
from tests.support.records import a_task, outcome


def test_the_final_answer_is_checked_against_the_output_schema(tmp_path: Path) -> None:
    schema = tmp_path / "s.json"
    schema.write_text('{"type": "object", "required": ["ok"]}')
    task = a_task(tmp_path, ", output_schema: s.json")
    good = with_output(RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED, final='{"ok":1}')))
    assert good.output == {"ok": 1} and status_of(good) is RunStatus.COMPLETED
    bad = with_output(RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED, final="[]")))
    assert bad.output is None and status_of(bad) is RunStatus.FAILED
    assert bad.output_error and error_of(bad) == bad.output_error
    cut = RunRecord(task, "f", outcome=outcome(RunStatus.MAX_REQUESTS, "max_requests", final="[]"))
    assert with_output(cut) == cut  # only a completed run's answer is checked
