"""A run's entry in report.json (runner/report_entry.py): made from a `RunRecord` in one
pass, redacted value by value, and readable back as the journal reads it."""

from __future__ import annotations

from pathlib import Path

from runner.record import RunRecord
from runner.redact import MASK, Redactor
from runner.report_entry import redacted, run_report
from runner.reports.model import RunReport
from runner.vocabulary import RunStatus
from tests.support.records import a_task, outcome


def test_every_string_is_redacted_keys_and_lists_included() -> None:
    r = Redactor(["sk-live-0123456789"])
    data = {"sk-live-0123456789": ["a sk-live-0123456789 b", 3, None, {"x": "sk-live-0123456789"}]}
    assert redacted(data, r) == {MASK: [f"a {MASK} b", 3, None, {"x": MASK}]}


def test_a_secret_json_would_escape_is_still_found(tmp_path: Path) -> None:
    """Redacting the JSON text missed a secret holding a quote or a backslash: there it
    is escaped. The values are redacted before any JSON is written."""
    secret = 'pa"ss\\word-0123456789'
    task = a_task(tmp_path)
    o = outcome(RunStatus.COMPLETED, final=f"the key is {secret}")
    rec = RunRecord(task, "threads/t.jsonl", outcome=o).noted(f"note with {secret}")
    entry = run_report(rec, tmp_path, Redactor([secret]), {task.fingerprint: 4})
    text = entry.model_dump_json()
    assert entry.final_message == f"the key is {MASK}"
    assert "word-0123456789" not in text
    assert entry.error == f"note with {MASK}"
    assert RunReport.model_validate_json(text) == entry  # what the journal reads back


def test_lone_surrogates_from_the_model_are_replaced(tmp_path: Path) -> None:
    task = a_task(tmp_path)
    rec = RunRecord(task, "f", outcome=outcome(RunStatus.COMPLETED, final="half \ud800 pair"))
    entry = run_report(rec, tmp_path, Redactor(), {})
    assert entry.final_message == "half ? pair"
    entry.model_dump_json().encode("utf-8")


def test_one_pass_fills_identity_cost_order_and_skip_reason(tmp_path: Path) -> None:
    task = a_task(tmp_path)
    skipped = RunRecord(task, "f", skipped="budget", notes=("not started: $2 spent",))
    entry = run_report(skipped, tmp_path, Redactor(), {task.fingerprint: 7})
    assert (entry.status, entry.skip_reason, entry.index) == (RunStatus.SKIPPED, "budget", 7)
    assert entry.error == "not started: $2 spent"
    assert entry.fingerprint == task.fingerprint and entry.cost_usd is None  # no price
    assert entry.turns_completed == 0 and entry.requests == []
    errored = RunRecord(task, "f", skipped="budget", outcome=outcome(RunStatus.FAILED, "no"))
    assert run_report(errored, tmp_path, Redactor(), {}).skip_reason is None
