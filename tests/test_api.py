"""The public API: its names, importing it without side effects, and a batch run
in-process through it against the loopback server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import runner
from tests.support.fixtures import LoopbackFactory, make_git_repo
from tests.support.loopback import reply_http_error, reply_message

pytestmark = pytest.mark.anyio

EXPECTED = [
    "BatchResult",
    "ConfigError",
    "Report",
    "Run",
    "RunReport",
    "RunStatus",
    "RunnerError",
    "Verdict",
    "load_runs",
    "run_batch",
]


def test_all_is_the_pinned_list_and_each_name_resolves() -> None:
    assert runner.__all__ == EXPECTED
    for name in EXPECTED:
        assert getattr(runner, name).__name__ == name
    with pytest.raises(AttributeError):
        runner.no_such_name  # noqa: B018


def test_import_changes_nothing_global() -> None:
    """A fresh interpreter: importing runner (and touching its API) neither loads httpx
    nor edits sys.modules for it; only the CLI's entry point does."""
    code = (
        "import sys, runner\n"
        "runner.RunStatus; runner.RunnerError\n"
        "print('httpx' in sys.modules, 'httpx._main' in sys.modules)\n"
        "import httpx\n"
        "print(sys.modules.get('httpx._main', 'absent') is None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False", "False"]


def test_cli_entry_point_keeps_httpx_cli_unloaded() -> None:
    code = (
        "import sys\nfrom runner.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sys.modules.get('httpx._main', 'absent') is None)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.split()[-1] == "True", out.stderr


async def test_load_and_run_a_batch_in_process(loopback: LoopbackFactory, tmp_path: Path) -> None:
    srv = await loopback([reply_message("done")])
    make_git_repo(tmp_path / "repo")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{srv.base_url}'}}\n"
        "tasks:\n  - {id: a, prompt: hi, model: fake/m, repo: repo, limits: {max_requests: 3}}\n"
    )
    runs = runner.load_runs(tasks)
    assert [r.name for r in runs] == ["a"]
    events: list[dict[str, Any]] = []
    result = await runner.run_batch(runs, tmp_path / "out", concurrency=1, on_event=events.append)
    assert result.exit_code == 0
    assert [r.status for r in result.runs] == [runner.RunStatus.COMPLETED]
    report = runner.Report.model_validate_json((tmp_path / "out" / "report.json").read_text())
    assert report.runs[0].final_message == "done" and report.batch_id
    kinds = [e["type"] for e in events]
    assert kinds[0] == "thread.started" and "turn.completed" in kinds
    assert all(e.get("task") == "a" for e in events)
    assert json.dumps(events)  # plain JSON values, as --json prints them


async def test_run_batch_refuses_nothing_to_run(tmp_path: Path) -> None:
    with pytest.raises(runner.ConfigError, match="runs: no run to start"):
        await runner.run_batch((), tmp_path / "out")


def _flaky_tasks(tmp_path: Path, base_url: str) -> Path:
    make_git_repo(tmp_path / "repo")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{base_url}', request_max_retries: 0}}\n"
        "defaults: {model: fake/m}\n"
        "tasks:\n"
        "  - {id: steady, prompt: say steady, repo: repo}\n"
        "  - {id: flaky, prompt: say flaky, repo: repo}\n"
    )
    return tasks


async def test_force_and_retry_errored_match_the_cli_flags(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """`retry_errored` (with `resume`) reruns the errored run and keeps the other;
    `force` lets a new batch replace a finished one, which is refused without it."""
    outage = {"on": True}

    def script(req: Any, i: int) -> Any:
        if outage["on"] and "flaky" in json.dumps(req.input):
            return reply_http_error(503)
        return reply_message("done")

    srv = await loopback(script)
    runs = runner.load_runs(_flaky_tasks(tmp_path, srv.base_url))
    out = tmp_path / "out"
    first = await runner.run_batch(runs, out, concurrency=1)
    assert [r.status for r in first.runs] == [runner.RunStatus.COMPLETED, runner.RunStatus.ERROR]
    assert first.exit_code == 3
    asked = len(srv.requests)

    with pytest.raises(runner.ConfigError, match="retry_errored: goes with resume=True"):
        await runner.run_batch(runs, out, retry_errored=True)
    kept = await runner.run_batch(runs, out, resume=True)
    assert [r.status for r in kept.runs] == [runner.RunStatus.COMPLETED, runner.RunStatus.ERROR]
    assert len(srv.requests) == asked  # plain resume keeps the errored run

    outage["on"] = False
    again = await runner.run_batch(runs, out, resume=True, retry_errored=True)
    assert [r.status for r in again.runs] == [runner.RunStatus.COMPLETED] * 2
    new = srv.requests[asked:]
    assert len(new) == 1 and "flaky" in json.dumps(new[0].input)
    report = runner.Report.model_validate_json((out / "report.json").read_text())
    assert report.totals.errored == 0
    assert report.runs[1].redone is not None and report.runs[1].redone.attempts == 1

    with pytest.raises(runner.ConfigError, match="--force"):
        await runner.run_batch(runs, out)
    fresh = await runner.run_batch(runs, out, force=True)
    assert fresh.exit_code == 0
    replaced = runner.Report.model_validate_json((out / "report.json").read_text())
    assert replaced.batch_id != report.batch_id and replaced.totals.redone is None
