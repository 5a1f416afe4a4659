"""Every event of a thread's events file and the `--json` stream is built in one place.

Why: `codex exec --json` consumers parse these shapes; two literals of one event drift
apart (a field renamed in one), and a consumer then breaks on only one path.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from runner import exec_events as ev

PACKAGE = Path(__file__).resolve().parent.parent / "runner"


def event_literals(source: str) -> list[tuple[str, int]]:
    """(event type, line) of each dict literal `{"type": "<event>", ...}` in `source`;
    events are the dotted types (`turn.failed`) and `error`, not conversation items."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values, strict=True):
            if (
                isinstance(key, ast.Constant)
                and key.value == "type"
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
                and ("." in value.value or value.value == "error")
            ):
                found.append((value.value, node.lineno))
    return found


def test_event_literals_are_found() -> None:
    src = 'a = {"type": "turn.failed", "error": {}}\nb = {"type": "message"}\n'
    assert event_literals(src) == [("turn.failed", 1)]


def test_each_event_has_one_constructor() -> None:
    places: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for kind, line in event_literals(path.read_text(encoding="utf-8")):
            places[kind].append(f"{path.relative_to(PACKAGE)}:{line}")
    assert {"thread.started", "turn.failed", "error", "request.completed"} <= places.keys()
    repeated = {kind: where for kind, where in places.items() if len(where) > 1}
    assert not repeated, f"build each in one function (runner/exec_events.py): {repeated}"


def test_the_shared_shapes() -> None:
    """The shapes `codex exec --json` prints, as its consumers read them."""
    assert ev.thread_started("t") == {"type": "thread.started", "thread_id": "t"}
    assert ev.turn_started() == {"type": "turn.started"}
    assert ev.turn_failed("boom") == {"type": "turn.failed", "error": {"message": "boom"}}
    assert ev.error("boom") == {"type": "error", "message": "boom"}
