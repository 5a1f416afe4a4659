"""The batch journal (runner/journal.py): what `--resume` reads back from report entries
made by runner/report_entry.py, and what it refuses or ignores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import ConfigError
from runner.journal import Journal, done
from runner.record import RunRecord
from runner.redact import Redactor
from runner.report_entry import run_report
from runner.reports.model import RunReport
from runner.vocabulary import RunStatus
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import reply_message
from tests.support.records import a_task, outcome


def entry(tmp_path: Path, status: RunStatus, note: str = "") -> tuple[str, RunReport]:
    task = a_task(tmp_path)
    rec = RunRecord(task, "threads/t.jsonl", outcome=outcome(status, note or None))
    return task.fingerprint, run_report(rec.noted(note) if note else rec, tmp_path, Redactor(), {})


def test_a_finished_run_is_read_back_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    j = Journal(out)
    assert j.start_batch(batch_id="b1", task_file="t.yaml", resume=False) == "b1"
    fp, report = entry(tmp_path, RunStatus.MAX_REQUESTS, "push failed: rejected")
    j.started(fp, "t", "runner/b1/t")
    assert done(j.entries()[fp]) is None  # started only: redone
    j.finished(fp, report)
    back = j.entries()[fp]
    assert back.state == "finished" and back.report == report
    assert done(back) == report
    assert back.report is not None and back.report.error == "push failed: rejected"


def test_an_interrupted_run_is_redone(tmp_path: Path) -> None:
    j = Journal(tmp_path / "out")
    fp, report = entry(tmp_path, RunStatus.INTERRUPTED)
    j.finished(fp, report)
    assert done(j.entries()[fp]) is None


def test_the_branch_and_commit_are_recorded_before_the_branch(tmp_path: Path) -> None:
    j = Journal(tmp_path / "out")
    j.branching("fp1", "t", "runner/x/t", "abc123")
    e = j.entries()["fp1"]
    assert (e.state, e.branch, e.commit, e.report) == ("started", "runner/x/t", "abc123", None)


def test_an_unreadable_record_counts_as_absent(tmp_path: Path) -> None:
    j = Journal(tmp_path / "out")
    j.started("good", "t", None)
    (j.runs / "bad.json").write_text("{not json")
    (j.runs / "half.json").write_text('{"state": "finished"}')
    assert set(j.entries()) == {"good"}


def test_resume_keeps_the_run_id_and_refuses_another_batch(tmp_path: Path) -> None:
    out = tmp_path / "out"
    ours = {"task_file_sha256": "a", "run_set": "r", "shard": 1, "shards": 1}
    Journal(out).start_batch(batch_id="first", task_file="t.yaml", resume=False, batch=ours)
    again = Journal(out).start_batch(batch_id="second", task_file="t.yaml", resume=True, batch=ours)
    assert again == "first"
    other = {**ours, "task_file_sha256": "b"}
    with pytest.raises(ConfigError, match="another task file"):
        Journal(out).start_batch(batch_id="x", task_file="t.yaml", resume=True, batch=other)


def test_nothing_is_synced_before_the_first_request_and_the_batch_before_its_first_result(
    loopback_thread: ThreadFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """batch.json and a run's `started` record are written atomically but not synced
    (fsync costs a batch's start 2-30 ms): a machine crash that loses them loses no
    branch. The first durable record syncs batch.json before itself, so no result is
    ever on the disk without its batch."""
    synced: list[tuple[str, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), len(srv.requests)))
        real(fd)

    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = write_tasks(tmp_path / "repo", srv.base_url, "  - {id: a, prompt: p, repo: .}\n")
    out = tmp_path / "out"
    monkeypatch.setattr(os, "fsync", fsync)
    assert run_cli("run", tasks, "--out", out).returncode == 0
    journal = [(p, seen) for p, seen in synced if p.startswith(str(out / "journal"))]
    assert all(seen > 0 for _, seen in journal), journal  # none before the first request
    paths = [p for p, _ in journal]
    meta = str(out / "journal" / "batch.json")
    assert meta in paths
    first_record = next(
        i for i, p in enumerate(paths) if p.startswith(str(out / "journal" / "runs"))
    )
    assert paths.index(meta) < first_record
    # A resume reads it all back: the run is finished, nothing is redone.
    again = run_cli("run", tasks, "--out", out, "--resume")
    assert again.returncode == 0 and len(srv.requests) == 1, again.stderr


def test_resume_refuses_an_unreadable_batch_record_that_would_drop_finished_runs(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    body = "  - {id: a, prompt: p, repo: .}\n  - {id: b, prompt: p, repo: .}\n"
    tasks = write_tasks(tmp_path / "repo", srv.base_url, body)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    meta = out / "journal" / "batch.json"
    records = sorted(p.read_bytes() for p in (out / "journal" / "runs").iterdir())
    for damage in (b"", b'{"batch_id": "x"', b"\0" * 40):
        meta.write_bytes(damage)
        refused = run_cli("run", tasks, "--out", out, "--resume")
        assert refused.returncode == 2, refused.stderr
        assert f"{meta}: --resume: cannot be read" in refused.stderr
        assert sorted(p.read_bytes() for p in (out / "journal" / "runs").iterdir()) == records
    assert len(srv.requests) == 2  # nothing was run again


def test_resume_after_a_crash_before_any_result_starts_afresh(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """batch.json is not synced until a result is (a machine crash can leave it empty);
    with no finished run there is nothing to lose, so --resume starts the batch anew."""
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = write_tasks(tmp_path / "repo", srv.base_url, "  - {id: a, prompt: p, repo: .}\n")
    out = tmp_path / "out"
    (out / "journal" / "runs").mkdir(parents=True)
    (out / "journal" / "batch.json").write_bytes(b"")
    (out / "journal" / "runs" / "0123456789abcdef.json").write_text(
        '{"state": "started", "run": "a", "branch": null, "report": null}\n'
    )
    done = run_cli("run", tasks, "--out", out, "--resume")
    assert done.returncode == 0, done.stderr
    assert len(srv.requests) == 1
