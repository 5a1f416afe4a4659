"""Event sinks: every event of a thread goes to `threads/<task>.jsonl`, flushed per line so a
crash leaves everything up to the crash; with `--json` the same lines go to stdout."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from runner.redact import Redactor


class EventLog:
    def __init__(self, path: Path, *, task: str, redact: Redactor,
                 stdout: IO[str] | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("w", encoding="utf-8")
        self._task = task
        self._redact = redact
        self._stdout = stdout

    def emit(self, event: dict[str, Any]) -> None:
        line = json.dumps({**event, "task": self._task, "ts": round(time.time(), 3)},
                          ensure_ascii=False)
        if self._redact:
            line = self._redact(line)
        self._file.write(line + "\n")
        self._file.flush()
        if self._stdout is not None:
            self._stdout.write(line + "\n")
            self._stdout.flush()

    def close(self) -> None:
        self._file.close()
