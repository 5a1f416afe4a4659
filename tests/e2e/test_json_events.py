"""`runner run --json` prints what `codex exec --json` prints.

The golden file is a real recording of Codex CLI 0.169.0 (tests/golden/codex_exec/
record.py) driven by the same scripted model answers as the runner here: a failing
command, a patch adding a file, a passing command, then reasoning and an answer. The
runner's stream must match it event for event in types, field names, value types and
the values that carry meaning (status, exit code, kind, item ids), printed compactly.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.support import paths
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    message_item,
    per_conversation,
    reply_function_call,
    reply_items,
)
from tests.support.scenarios import scenario

GOLDEN = paths.GOLDEN / "codex_exec" / "codex-0.169.0.jsonl"
KEPT = {"type", "status", "kind", "exit_code", "id"}
"""Fields compared by value; every other value is compared by its JSON type."""


def shape(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    if key in KEPT or value is None or isinstance(value, bool):
        return value
    return type(value).__name__


def run_json(
    srv: Any, tmp_path: Path, *flags: str, tasks: str = "", defaults: str = "", exit_code: int = 0
) -> list[str]:
    path = write_tasks(
        tmp_path,
        srv.base_url,
        tasks or "  - {id: one, prompt: go, repo: .}\n",
        defaults="  sandbox: danger-full-access\n" + defaults,
    )
    res = run_cli("run", path, "--out", tmp_path / "o", "--force", *flags)
    assert res.returncode == exit_code, res.stderr
    return res.stdout.splitlines()


def test_stream_matches_codex_exec_recording(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(scenario()))
    lines = run_json(srv, tmp_path, "--json")
    golden = GOLDEN.read_text().splitlines()
    ours = [json.loads(line) for line in lines]
    theirs = [json.loads(line) for line in golden]
    assert [shape(e) for e in ours] == [shape(e) for e in theirs]
    # Compact like Codex: `grep '"type":"turn.completed"'` finds the line.
    assert all(
        line == json.dumps(e, ensure_ascii=False, separators=(",", ":"))
        for line, e in zip(lines, ours, strict=True)
    )
    assert sum('"type":"turn.completed"' in line for line in lines) == 1
    changes = [e["item"]["changes"] for e in ours if e.get("item", {}).get("type") == "file_change"]
    assert len(changes) == 2  # started and completed
    for c in changes:  # absolute, in the run's workspace (removed once the run is kept)
        assert c == [{"path": c[0]["path"], "kind": "add"}]
        assert c[0]["path"].startswith("/") and c[0]["path"].endswith("/one/new.txt")
    commands = [
        e["item"]["command"]
        for e in ours
        if e["type"] == "item.started" and e["item"]["type"] == "command_execution"
    ]
    assert commands == ["bash -lc 'echo hi; exit 3'", "bash -lc 'echo ok'"]


def test_extra_events_are_opt_in(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(scenario()))
    plain = [json.loads(line) for line in run_json(srv, tmp_path, "--json")]
    codex_types = {
        "thread.started",
        "turn.started",
        "item.started",
        "item.updated",
        "item.completed",
        "turn.completed",
        "turn.failed",
        "error",
    }
    assert {e["type"] for e in plain} <= codex_types
    assert not any("task" in e or "ts" in e for e in plain)
    extra = [json.loads(line) for line in run_json(srv, tmp_path, "--json-extra")]
    assert {"request.completed", "result.committed"} <= {e["type"] for e in extra}
    assert all(e["task"] == "one" and isinstance(e["ts"], float) for e in extra)
    # The events file keeps everything, whichever stream stdout got.
    events = (tmp_path / "o" / "threads" / "one.jsonl").read_text().splitlines()
    assert [json.loads(line)["type"] for line in events] == [e["type"] for e in extra]


def test_concurrent_runs_do_not_interleave(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(scenario()))
    tasks = "".join(f"  - {{id: t{n}, prompt: go, repo: .}}\n" for n in range(3))
    path = write_tasks(tmp_path, srv.base_url, tasks, defaults="  sandbox: danger-full-access\n")
    res = run_cli("run", path, "--out", tmp_path / "o", "--json", "--concurrency", "3")
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    starts = [n for n, e in enumerate(events) if e["type"] == "thread.started"]
    assert len(starts) == 3 and starts[0] == 0
    golden_len = len(GOLDEN.read_text().splitlines())
    for begin, end in zip(starts, [*starts[1:], len(events)], strict=True):
        block = [e["type"] for e in events[begin:end]]
        assert len(block) == golden_len
        assert block[-1] == "turn.completed" and block.count("thread.started") == 1


def test_startup_failure_still_opens_and_fails_a_thread(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """An MCP server that cannot start fails the run before the agent loop begins."""
    srv = loopback_thread(per_conversation(scenario()))
    lines = run_json(
        srv,
        tmp_path,
        "--json",
        defaults=(
            "  mcp_servers:\n    broken: {command: [/nonexistent/server], startup_timeout_s: 5}\n"
        ),
        exit_code=3,
    )
    events = [json.loads(line) for line in lines]
    assert [e["type"] for e in events] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert re.fullmatch(r"[0-9a-f-]{36}", events[0]["thread_id"])
    assert events[3]["error"]["message"] == events[2]["message"]
    assert "broken" in events[2]["message"]
    assert srv.requests == []


def _pairs_close(events: list[dict[str, Any]]) -> None:
    started = [e["item"]["id"] for e in events if e["type"] == "item.started"]
    completed = {e["item"]["id"] for e in events if e["type"] == "item.completed"}
    assert started and set(started) <= completed, events


def test_every_started_item_completes_even_with_broken_arguments(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return reply_function_call("shell", '{"command": ["echo", ', "c0")
        return reply_items([message_item("done")])

    srv = loopback_thread(per_conversation(script))
    events = [json.loads(line) for line in run_json(srv, tmp_path, "--json")]
    _pairs_close(events)
    done = next(
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    )
    assert done["status"] == "failed" and done["exit_code"] is None
    assert done["aggregated_output"]  # says what was wrong with the arguments


def test_a_command_cut_by_the_timeout_still_completes_its_item(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    def script(req: RecordedRequest, i: int) -> Reply:
        return reply_function_call("shell", {"command": ["sleep", "30"]}, "c0")

    srv = loopback_thread(per_conversation(script))
    tasks = "  - {id: one, prompt: go, repo: ., limits: {timeout_s: 2}}\n"
    lines = run_json(srv, tmp_path, "--json", tasks=tasks, exit_code=1)
    events = [json.loads(line) for line in lines]
    _pairs_close(events)
    assert [e["type"] for e in events][-1] == "turn.failed"


def test_a_refused_agents_md_still_opens_and_fails_a_thread(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    import subprocess

    srv = loopback_thread(per_conversation(scenario()))
    (tmp_path / "AGENTS.md").symlink_to("/etc/hostname")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "add", "AGENTS.md"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(tmp_path),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "link",
        ],
        check=True,
    )
    path = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: one, prompt: go, repo: .}\n",
        defaults="  sandbox: danger-full-access\n",
    )
    res = run_cli("run", path, "--out", tmp_path / "o", "--json")
    types = [json.loads(line)["type"] for line in res.stdout.splitlines()]
    assert types[:2] == ["thread.started", "turn.started"], (types, res.stderr)
    assert types[-1] in ("turn.completed", "turn.failed")


def test_a_batch_that_cannot_start_still_prints_a_failed_thread(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A missing API key stops the batch before any run (exit 2); under `--json` the
    stream still holds one thread that fails, saying why."""
    srv = loopback_thread(per_conversation(scenario()))
    path = write_tasks(tmp_path, srv.base_url, "  - {id: one, prompt: go, repo: .}\n")
    res = run_cli("run", path, "--out", tmp_path / "o", "--json", env={"FAKE_API_KEY": ""})
    assert res.returncode == 2, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["type"] for e in events] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert "FAKE_API_KEY" in events[2]["message"]
    assert events[3]["error"]["message"] == events[2]["message"]
    assert srv.requests == []
