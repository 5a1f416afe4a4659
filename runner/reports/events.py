"""Event sinks: every event of a thread goes to `threads/<task>.jsonl`, flushed per line so a
crash leaves everything up to the crash; with `--json` the `codex exec --json` stream goes
to stdout (see docs/json-events.md)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

from runner import exec_events as ev
from runner.fsutil import open_private
from runner.redact import Redactor
from runner.reports.fmt import safe_text

CODEX_TYPES = frozenset(
    {
        "thread.started",
        "turn.started",
        "turn.completed",
        "turn.failed",
        "item.started",
        "item.updated",
        "item.completed",
        "error",
    }
)
"""The event types `codex exec --json` prints; the runner's own (request.completed,
compaction.completed, check.completed, ...) are added only with `--json-extra`."""


def dumps(obj: Any) -> str:
    """Compact, as Codex prints: `grep '"type":"turn.completed"'` must find the line."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class JsonStream:
    """stdout under `--json`: one run's events at a time.

    Plain mode prints exactly Codex's events (no extra fields), so a consumer written
    for `codex exec --json` can read it; with several runs at once, each run's lines
    stay together (the first run streams live, the others are held until it ends), and
    each run starts with its own `thread.started`. Extra mode prints every event as it
    comes, tagged with `task` and `ts`, so interleaved runs can be told apart.
    """

    def __init__(self, out: IO[str], *, extra: bool = False) -> None:
        self.out = out
        self.extra = extra
        self._owner: str | None = None
        self._held: dict[str, list[str]] = {}
        self._finished: set[str] = set()

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        """One event of `run`, redacted and tagged (`task`, `ts`) as its log has it:
        printed as it is in extra mode; else only Codex's own types, without the tags."""
        if self.extra:
            self.write(run, dumps(event))
        elif event.get("type") in CODEX_TYPES:
            self.write(run, dumps({k: v for k, v in event.items() if k not in TAGS}))

    def write(self, run: str, line: str) -> None:
        if self.extra or self._owner in (None, run):
            self._owner = None if self.extra else run
            self._print([line])
        else:
            self._held.setdefault(run, []).append(line)

    def finish(self, run: str) -> None:
        """`run` wrote its last line: hand stdout to the next run that has lines."""
        self._finished.add(run)
        if self._owner not in (None, run):
            return
        self._owner = None
        while self._held:
            nxt = next(iter(self._held))
            self._print(self._held.pop(nxt))
            if nxt not in self._finished:
                self._owner = nxt
                return

    def close(self) -> None:
        """Whatever is still held (a run whose end was missed) goes out at the end."""
        for lines in self._held.values():
            self._print(lines)
        self._held.clear()

    def _print(self, lines: list[str]) -> None:
        """Through `safe_text`, which keeps each line the same JSON: a string in an event
        cannot be a workflow command (`##[add-mask]`) in a log."""
        self.out.write("".join(f"{safe_text(line, one_line=True)}\n" for line in lines))
        self.out.flush()


def failed_thread(message: str) -> list[dict[str, Any]]:
    """A whole thread that failed before it began, in `codex exec --json` events."""
    return [
        ev.thread_started(str(uuid.uuid4())),
        ev.turn_started(),
        ev.error(message),
        ev.turn_failed(message),
    ]


TAGS = ("task", "ts")
"""What the log adds to each event: the run's name and the time."""

EventHandler = Callable[[dict[str, Any]], None]


class EventLog:
    """A run's `threads/<name>.jsonl`: each event tagged, redacted value by value, written
    and flushed, then handed on (the batch's event sink) as the same dict."""

    def __init__(
        self, path: Path, *, task: str, redact: Redactor, then: EventHandler | None = None
    ) -> None:
        self._file = open_private(path)
        self._task = task
        self._redact = redact
        self._then = then
        self._thread_started = False
        self._turn_open = False

    def emit(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        self._thread_started |= kind == "thread.started"
        if kind in ("turn.started", "turn.completed", "turn.failed"):
            self._turn_open = kind == "turn.started"
        tagged = {**event, "task": self._task, "ts": round(time.time(), 3)}
        clean: dict[str, Any] = self._redact.data(tagged)
        self._file.write(dumps(clean) + "\n")
        self._file.flush()
        if self._then is not None:
            self._then(clean)

    def failed(self, message: str) -> None:
        """The run failed outside the agent loop (workspace, sandbox, MCP server, a bug):
        a consumer of the Codex stream still sees a thread whose turn failed."""
        if not self._thread_started:
            for event in failed_thread(message):
                self.emit(event)
            return
        self.emit(ev.error(message))
        if self._turn_open:
            self.emit(ev.turn_failed(message))

    def close(self) -> None:
        self._file.close()
