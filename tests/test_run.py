"""Tests for runner/run.py: the steps of one run's life (its branch name, its output
check, its sink, its notes, keeping its work, forgetting a killed attempt), and `live`
driven whole through `run_batch` against the loopback server. The status rule the steps
feed is tested in tests/test_record.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runner
from runner import workspace
from runner.budget import BatchSpend
from runner.config import Run
from runner.journal import Entry
from runner.models import Price
from runner.record import RunRecord, error_of, status_of
from runner.redact import Redactor
from runner.reports.events import EventLog
from runner.run import RunSink, _failed, _forget_attempt, _noted, branch_for, keep, with_output
from runner.vocabulary import RunStatus
from tests.support.fixtures import LoopbackFactory, git, make_git_repo
from tests.support.loopback import Reply, per_conversation, reply_function_call, reply_message
from tests.support.records import a_task, outcome

BATCH = "20260314-101500-ab12"
SECRET = "sk-test-0123456789abcdef"


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _log(tmp_path: Path, redact: Redactor | None = None) -> tuple[EventLog, Path]:
    path = tmp_path / "out" / "threads" / "t.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    return EventLog(path, task="t", redact=redact or Redactor()), path


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


def test_branch_for_names_a_branch_only_when_the_run_keeps_one(tmp_path: Path) -> None:
    t = a_task(tmp_path)
    assert branch_for(t, BATCH) == f"runner/{BATCH}/t"
    (tmp_path / "p").mkdir()
    patch_only = a_task(tmp_path / "p", ", git: {keep: patch}")
    assert branch_for(patch_only, BATCH) is None
    (tmp_path / "q").mkdir()
    named = a_task(tmp_path / "q", ", git: {branch: 'agent/{task}-{repeat}'}")
    assert branch_for(named, BATCH) == "agent/t-1"
    # A template the config pass would refuse names no branch, rather than raising.
    odd = t.model_copy(update={"git": t.git.model_copy(update={"branch": "x/{nope}"})})
    assert branch_for(odd, BATCH) is None


def test_the_sink_prices_each_request_and_feeds_the_batch_spend(tmp_path: Path) -> None:
    log, path = _log(tmp_path)
    spend = BatchSpend(None)
    sink = RunSink(log, Price(input=2.0, cached_input=1.0, output=10.0), spend)
    usage = {"input_tokens": 1000, "cached_tokens": 400, "output_tokens": 100}
    sink.emit({"type": "request.completed", "usage": usage})
    assert spend.cost == pytest.approx(0.0026)
    sink.emit({"type": "request.completed", "usage": None, "error": "503"})
    assert spend.cost == pytest.approx(0.0026) and spend.usage.unreported == 0
    sink.emit({"type": "request.completed", "usage": None})  # an answer without usage
    assert spend.usage.unreported == 1 and spend.cost is None, "its cost is unknown"
    sink.emit({"type": "item.completed", "item": {"type": "x"}})
    log.close()
    got = _events(path)
    assert [e.get("cost_usd", "-") for e in got] == [0.0026, 0.0, None, "-"]
    assert (spend.usage.input_tokens, spend.usage.output_tokens) == (1000, 100)
    unpriced = BatchSpend(None)
    other, _ = _log(tmp_path / "u")
    RunSink(other, None, unpriced).emit({"type": "request.completed", "usage": usage})
    other.close()
    assert unpriced.cost is None, "no price: the batch's cost is unknown"


def test_notes_pile_up_in_the_record_and_the_events_file(tmp_path: Path) -> None:
    log, path = _log(tmp_path, Redactor([SECRET]))
    rec = RunRecord(a_task(tmp_path), "threads/t.jsonl")
    rec = _noted(rec, log, "skills: one left out")
    rec = _failed(rec, log, f"mcp server failed with {SECRET}")
    log.close()
    assert rec.notes == ("skills: one left out", f"mcp server failed with {SECRET}")
    got = _events(path)
    assert got[0] == {**got[0], "type": "note", "message": "skills: one left out"}
    kinds = [e["type"] for e in got[1:]]
    assert kinds[0] == "thread.started" and kinds[-1] == "turn.failed", kinds
    assert SECRET not in path.read_text()


async def _workspace(tmp_path: Path, extra: str = "") -> tuple[Run, workspace.Workspace]:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n", "src/a.py": "A = 1\n"})
    t = a_task(repo, extra)
    ws = await workspace.prepare(t.repo, root=tmp_path / "work", name=t.name)
    return t, ws


@pytest.mark.anyio
async def test_keep_commits_writes_the_patch_and_makes_the_branch(tmp_path: Path) -> None:
    t, ws = await _workspace(tmp_path)
    (ws.path / "src" / "a.py").write_text("A = 2\n")
    log, path = _log(tmp_path)
    rec = RunRecord(t, "threads/t.jsonl", outcome=outcome(RunStatus.COMPLETED, final=SECRET))
    out = tmp_path / "out"
    kept = await keep(rec, ws, out, BATCH, Redactor([SECRET]), {}, log)
    log.close()
    assert kept.result is not None and kept.result.branch is not None
    assert kept.result.branch == branch_for(t, BATCH)
    assert git(t.repo, "rev-parse", kept.result.branch).strip() == kept.result.commit
    message = git(t.repo, "log", "-1", "--format=%B", kept.result.commit)
    assert f"Runner-Run: {BATCH}\nRunner-Status: completed" in message
    assert SECRET not in message
    assert (out / "patches" / "t.patch").read_text().count("+A = 2") == 1
    (committed,) = [e for e in _events(path) if e["type"] == "result.committed"]
    assert committed["branch"] == kept.result.branch and committed["files_changed"] == 1
    await workspace.cleanup(ws)


@pytest.mark.anyio
async def test_keep_makes_no_branch_for_a_patch_or_a_scope_violation(tmp_path: Path) -> None:
    for name, extra in (
        ("patch", ", git: {keep: patch}"),
        ("scope", ", git: {forbidden_paths: ['src/**']}"),
    ):
        t, ws = await _workspace(tmp_path / name, extra)
        (ws.path / "src" / "a.py").write_text("A = 3\n")
        log, _ = _log(tmp_path / name)
        rec = RunRecord(t, "threads/t.jsonl", outcome=outcome(RunStatus.COMPLETED))
        kept = await keep(rec, ws, tmp_path / name / "out", BATCH, Redactor(), {}, log)
        log.close()
        assert kept.result is not None and kept.result.branch is None, name
        assert kept.result.patch_path.is_file()
        assert git(t.repo, "branch", "--list", "runner/*") == ""
        assert bool(kept.result.violations) == (name == "scope")
        await workspace.cleanup(ws)


@pytest.mark.anyio
async def test_keep_pushes_the_branch_and_notes_a_failed_push(tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    for remote, pushed in ((str(bare), True), (str(tmp_path / "nowhere.git"), False)):
        where = tmp_path / ("ok" if pushed else "bad")
        t, ws = await _workspace(where, f", git: {{push: {{remote: '{remote}'}}}}")
        (ws.path / "new.txt").write_text("n\n")
        log, _ = _log(where)
        rec = RunRecord(t, "threads/t.jsonl", outcome=outcome(RunStatus.COMPLETED))
        kept = await keep(rec, ws, where / "out", BATCH, Redactor(), {}, log)
        log.close()
        assert kept.result is not None and kept.result.branch is not None
        if pushed:
            assert kept.pushed is not None and kept.notes == ()
            assert git(bare, "rev-parse", kept.result.branch).strip() == kept.result.commit
        else:
            assert kept.pushed is None
            assert [n.split(":")[0] for n in kept.notes] == ["push failed"]
        await workspace.cleanup(ws)


@pytest.mark.anyio
async def test_a_resumed_run_deletes_only_the_branch_its_attempt_recorded(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "branch", "runner/b/t", head)
    git(repo, "branch", "runner/b/moved", head)
    await _forget_attempt(Entry("started", "t", "runner/b/moved", None, commit="0" * 40), repo)
    # An attempt that recorded no commit made no branch: a ref lock on its name (another
    # git's, mid-update) is not its to remove.
    lock = repo / ".git" / "refs" / "heads" / "runner" / "b" / "t.lock"
    lock.write_text("")
    await _forget_attempt(Entry("started", "t", "runner/b/t", None, commit=None), repo)
    assert lock.exists()
    lock.unlink()
    await _forget_attempt(None, repo)
    listed = git(repo, "branch", "--list", "runner/*").split()
    assert listed == ["runner/b/moved", "runner/b/t"], "not at the recorded commit: kept"
    await _forget_attempt(Entry("started", "t", "runner/b/t", None, commit=head), repo)
    assert git(repo, "branch", "--list", "runner/*").split() == ["runner/b/moved"]


def _tasks(tmp_path: Path, base_url: str, task_lines: str) -> list[Run]:
    make_git_repo(tmp_path / "repo")
    (tmp_path / "s.json").write_text('{"type": "object", "required": ["ok"]}')
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{base_url}', request_max_retries: 0}}\n"
        "defaults: {model: fake/m, sandbox: danger-full-access}\n"
        f"tasks:\n{task_lines}"
    )
    return list(runner.load_runs(path))


def _write_then_answer(answer: str) -> Any:
    def script(req: Any, i: int) -> Reply:
        if i == 0:
            cmd = ["bash", "-c", "echo work > work.txt"]
            return reply_function_call("shell", {"command": cmd}, call_id="c0")
        return reply_message(answer)

    return per_conversation(script)


@pytest.mark.anyio
async def test_live_keeps_a_runs_work_on_the_branch_branch_for_names(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    srv = await loopback(_write_then_answer('{"ok": true}'))
    runs = _tasks(
        tmp_path,
        srv.base_url,
        "  - {id: b, prompt: go, repo: repo, output_schema: s.json}\n"
        "  - {id: p, prompt: go, repo: repo, git: {keep: patch}}\n",
    )
    out = tmp_path / "out"
    result = await runner.run_batch(runs, out, concurrency=1)
    report = runner.Report.model_validate_json((out / "report.json").read_text())
    assert [r.status for r in result.runs] == [RunStatus.COMPLETED] * 2
    b, p = report.runs
    assert b.result is not None and p.result is not None
    assert b.result.branch == branch_for(runs[0], report.batch_id) is not None
    assert p.result.branch is None and branch_for(runs[1], report.batch_id) is None
    assert git(tmp_path / "repo", "show", f"{b.result.branch}:work.txt") == "work\n"
    assert b.output == {"ok": True}
    assert (out / p.result.patch).read_text().count("+work") == 1


@pytest.mark.anyio
async def test_live_fails_a_completed_run_whose_answer_breaks_its_schema(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    srv = await loopback(per_conversation(lambda req, i: reply_message("[1, 2]")))
    runs = _tasks(
        tmp_path, srv.base_url, "  - {id: s, prompt: go, repo: repo, output_schema: s.json}\n"
    )
    out = tmp_path / "out"
    result = await runner.run_batch(runs, out, concurrency=1)
    assert [r.status for r in result.runs] == [RunStatus.FAILED]
    (entry,) = runner.Report.model_validate_json((out / "report.json").read_text()).runs
    assert entry.output is None
    assert entry.error == (
        "the final answer does not match the output schema at (top level): "
        "[1, 2] is not of type 'object'"
    )
