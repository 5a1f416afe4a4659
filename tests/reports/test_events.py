"""Tests for runner.reports.events: a run's event log (tagged, redacted, flushed, private)
and the `--json` stream, which keeps each run's lines together and prints nothing a
workflow log would obey."""

from __future__ import annotations

import io
import json
import stat
from pathlib import Path
from typing import Any

from runner.redact import Redactor
from runner.reports.events import CODEX_TYPES, EventLog, JsonStream, dumps, failed_thread


def lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def ev(kind: str, **more: Any) -> dict[str, Any]:
    return {"type": kind, **more, "task": more.pop("task", "a"), "ts": 1.5}


def test_dumps_is_compact_and_keeps_text_as_written() -> None:
    assert (
        dumps({"type": "turn.completed", "text": "é ✓"}) == '{"type":"turn.completed","text":"é ✓"}'
    )


def test_plain_mode_prints_only_codexs_events_without_the_tags() -> None:
    out = io.StringIO()
    stream = JsonStream(out)
    stream.event("a", ev("turn.started"))
    stream.event("a", ev("request.completed", index=1))
    stream.event("a", ev("item.completed", item={"id": "i"}))
    assert lines(out) == [{"type": "turn.started"}, {"type": "item.completed", "item": {"id": "i"}}]
    assert "request.completed" not in CODEX_TYPES


def test_a_second_runs_lines_wait_until_the_first_run_ends() -> None:
    out = io.StringIO()
    stream = JsonStream(out)
    stream.event("a", ev("thread.started", thread_id="A"))
    stream.event("b", ev("thread.started", thread_id="B"))
    stream.event("c", ev("thread.started", thread_id="C"))
    stream.event("a", ev("turn.completed"))
    stream.event("b", ev("turn.completed"))
    assert [e.get("thread_id") for e in lines(out)] == ["A", None]
    stream.finish("c")  # c ended while held: it does not take stdout over
    stream.finish("a")
    # b's held lines go out and b streams live; c's wait until b ends, then all come out.
    stream.event("b", ev("turn.started"))
    assert [(e["type"], e.get("thread_id")) for e in lines(out)][2:] == [
        ("thread.started", "B"),
        ("turn.completed", None),
        ("turn.started", None),
    ]
    stream.finish("b")
    assert lines(out)[5:] == [{"type": "thread.started", "thread_id": "C"}]
    stream.event("d", ev("turn.started"))  # c had ended: nobody owns stdout now
    assert len(lines(out)) == 7


def test_close_prints_what_a_run_that_never_finished_held() -> None:
    out = io.StringIO()
    stream = JsonStream(out)
    stream.event("a", ev("turn.started"))
    stream.event("b", ev("error", message="held"))
    assert len(lines(out)) == 1
    stream.close()
    assert lines(out)[1] == {"type": "error", "message": "held"}


def test_extra_mode_prints_every_event_at_once_with_its_tags() -> None:
    out = io.StringIO()
    stream = JsonStream(out, extra=True)
    stream.event("a", ev("turn.started", task="a"))
    stream.event("b", ev("request.completed", task="b"))
    assert [(e["type"], e["task"], e["ts"]) for e in lines(out)] == [
        ("turn.started", "a", 1.5),
        ("request.completed", "b", 1.5),
    ]


def test_no_line_of_the_stream_is_a_workflow_command() -> None:
    out = io.StringIO()
    stream = JsonStream(out)
    text = "::add-mask::x\r\n##[error]boom\n::stop-commands::t"
    stream.event("a", ev("error", message=text))
    raw = out.getvalue()
    assert raw.count("\n") == 1 and "##[" not in raw and "\r" not in raw
    assert not raw.lstrip().startswith("::")
    assert lines(out) == [{"type": "error", "message": text}]  # the same JSON value


def test_failed_thread_is_a_whole_codex_thread() -> None:
    events = failed_thread("no sandbox")
    assert [e["type"] for e in events] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert events[3]["error"] == {"message": "no sandbox"}
    assert failed_thread("x")[0]["thread_id"] != events[0]["thread_id"]


def test_the_log_is_private_tagged_redacted_and_hands_on_the_same_event(tmp_path: Path) -> None:
    handed: list[dict[str, Any]] = []
    path = tmp_path / "threads" / "a.jsonl"
    log = EventLog(path, task="a.r1", redact=Redactor(["sk-log-secret-123456"]), then=handed.append)
    log.emit({"type": "item.completed", "item": {"text": "key sk-log-secret-123456"}})
    # Flushed per line: the file holds the event before the log is closed.
    (written,) = [json.loads(line) for line in path.read_text().splitlines()]
    log.close()
    assert written == handed[0]
    assert written["item"]["text"] == "key [REDACTED]" and written["task"] == "a.r1"
    assert isinstance(written["ts"], float)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def read_types(path: Path) -> list[str]:
    return [json.loads(line)["type"] for line in path.read_text().splitlines()]


def test_a_failure_ends_whatever_thread_the_stream_had_begun(tmp_path: Path) -> None:
    before, mid, after = (tmp_path / f"{n}.jsonl" for n in ("before", "mid", "after"))
    log = EventLog(before, task="t", redact=Redactor([]))
    log.failed("no workspace")
    log.close()
    assert read_types(before) == ["thread.started", "turn.started", "error", "turn.failed"]
    log = EventLog(mid, task="t", redact=Redactor([]))
    for kind in ("thread.started", "turn.started"):
        log.emit({"type": kind})
    log.failed("bug")
    log.close()
    assert read_types(mid) == ["thread.started", "turn.started", "error", "turn.failed"]
    log = EventLog(after, task="t", redact=Redactor([]))
    for kind in ("thread.started", "turn.started", "turn.completed"):
        log.emit({"type": kind})
    log.failed("push failed")
    log.close()
    assert read_types(after) == ["thread.started", "turn.started", "turn.completed", "error"]
