"""The supported way to use the runner from Python: load a task file's runs, run them as
a batch, read the report. The CLI adds its own wiring (flags, `--json` on stdout, the
progress display, taking secrets out of its own environment) around the same batch."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.batch import BatchResult
from runner.batch import run_batch as _run_batch
from runner.config import Run, load_runs
from runner.config.preflight import mcp_secrets
from runner.errors import ConfigError, Problem
from runner.progress import QuietProgress

__all__ = ["EventHandler", "load_runs", "run_batch"]

EventHandler = Callable[[dict[str, Any]], None]


class _Events(QuietProgress):
    """Hands each event of each run, as its log has it, to the caller's `on_event`."""

    def __init__(self, on_event: EventHandler) -> None:
        self._on_event = on_event

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        self._on_event(dict(event))


async def run_batch(
    runs: Sequence[Run],
    out_dir: str | Path,
    *,
    concurrency: int = 4,
    on_event: EventHandler | None = None,
    env: Mapping[str, str] | None = None,
    resume: bool = False,
    force: bool = False,
    retry_errored: bool = False,
) -> BatchResult:
    """Run `runs` (from `load_runs`) and write report.json and the other reports in
    `out_dir`. `on_event` gets every event of every run as it comes, tagged with its run
    (`task`) and time (`ts`). `env` is the environment the runs see (default this
    process's). The result lists every run's report entry and the exit code the CLI
    would give.

    As the CLI's flags: `resume` (`--resume`) keeps the runs an earlier session of the
    batch in `out_dir` finished; `retry_errored` (`--retry-errored`, with `resume` only)
    runs its errored ones again too; `force` (`--force`) lets a new batch replace a
    finished one in `out_dir` (else refused)."""
    if not runs:
        raise ConfigError([Problem("(api)", None, "runs", "no run to start")])
    if retry_errored and not resume:
        raise ConfigError(
            [
                Problem(
                    "(api)",
                    None,
                    "retry_errored",
                    "goes with resume=True (it reruns a batch's errored runs)",
                )
            ]
        )
    if concurrency < 1:
        raise ConfigError([Problem("(api)", None, "concurrency", "must be at least 1")])
    if concurrency > 1:
        # `load_runs` checked them as runs that never overlap: what a full-access command
        # could read of another run's MCP secrets depends on the concurrency chosen here.
        import os

        found = mcp_secrets(runs, os.environ if env is None else env, concurrency, ())
        if found:
            raise ConfigError(found)
    return await _run_batch(
        runs,
        out_dir=Path(out_dir),
        concurrency=concurrency,
        resume=resume,
        force=force,
        retry_errored=retry_errored,
        env=env,
        events=_Events(on_event) if on_event is not None else None,
    )
