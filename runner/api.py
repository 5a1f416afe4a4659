"""The supported way to use the runner from Python: load a task file's runs, run them as
a batch, read the report. The CLI adds its own wiring (flags, `--json` on stdout, the
progress display, taking secrets out of its own environment) around the same batch."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.batch import BatchResult
from runner.batch import run_batch as _run_batch
from runner.config import Run, expand, load_task_file
from runner.errors import ConfigError, Problem

EventHandler = Callable[[dict[str, Any]], None]


def load_runs(path: str | Path, *, models: Sequence[str] = ()) -> tuple[Run, ...]:
    """Every run of the task file at `path` (task x model x variant x repeat), each value
    resolved once and remembering where it was chosen. `models` replaces the file's
    models as `--model` does. Raises ConfigError, located, for any problem."""
    path = Path(path)
    tf = load_task_file(path)
    return tuple(expand(tf, path.resolve().parent, file=str(path), models=list(models)))


class _Events:
    """A text sink that hands each JSON line the batch writes to `on_event` as a dict:
    the batch's event stream stays one code path for the CLI and for callers."""

    def __init__(self, on_event: EventHandler) -> None:
        self._on_event = on_event
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            if line:
                self._on_event(json.loads(line))
        return len(text)

    def flush(self) -> None:
        pass


async def run_batch(
    runs: Sequence[Run],
    out_dir: str | Path,
    *,
    concurrency: int = 4,
    on_event: EventHandler | None = None,
    env: Mapping[str, str] | None = None,
    resume: bool = False,
) -> BatchResult:
    """Run `runs` (from `load_runs`) and write report.json and the other reports in
    `out_dir`. `on_event` gets every event of every run as it comes, tagged with its run
    (`task`) and time (`ts`). `env` is the environment the runs see (default this
    process's). The result lists every run's report entry and the exit code the CLI
    would give."""
    if not runs:
        raise ConfigError([Problem("(api)", None, "runs", "no run to start")])
    if concurrency < 1:
        raise ConfigError([Problem("(api)", None, "concurrency", "must be at least 1")])
    sink = _Events(on_event) if on_event is not None else None
    return await _run_batch(
        runs,
        out_dir=Path(out_dir),
        task_file=runs[0].origins[""].file,
        concurrency=concurrency,
        json_out=sink,  # type: ignore[arg-type]
        json_extra=True,
        resume=resume,
        env=env,
    )
