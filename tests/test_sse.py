"""The pure Responses stream decoder, event by event."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.errors import (
    AnswerTruncated,
    ContextWindowExceeded,
    ModelError,
    QuotaExhausted,
    StreamFailure,
)
from runner.providers.refusals import stream_error
from runner.sse import Assembler, Framer


def feed(asm: Assembler, kind: str, **payload: object) -> None:
    asm.feed(kind, json.dumps({"type": kind, **payload}))


def test_full_stream() -> None:
    asm = Assembler(stream_error)
    feed(asm, "response.created", response={"id": "resp_1"})
    feed(asm, "response.output_item.added", item={"type": "message", "id": "m"})
    feed(asm, "response.output_text.delta", delta="he")
    feed(asm, "response.reasoning_summary_text.delta", delta="r")
    feed(asm, "response.reasoning_text.delta", delta="r")
    assert asm.items == [] and asm.text == ["he"]  # deltas are not items
    item = {
        "type": "message",
        "id": "m",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hello", "annotations": []}],
    }
    feed(asm, "response.output_item.done", item=item)
    feed(asm, "response.some_future_event", x=1)
    feed(
        asm,
        "response.completed",
        response={
            "id": "resp_1",
            "usage": {
                "input_tokens": 100,
                "input_tokens_details": {"cached_tokens": 60},
                "output_tokens": 7,
                "output_tokens_details": {"reasoning_tokens": 3},
                "total_tokens": 107,
            },
        },
    )
    assert asm.done and asm.response_id == "resp_1"
    assert asm.items[0].data == item  # kept exactly as sent
    assert json.loads(asm.items[0].wire) == item  # sent back with its id, as Codex 0.169
    u = asm.usage
    assert u is not None
    assert (
        u.input_tokens,
        u.cached_tokens,
        u.output_tokens,
        u.reasoning_tokens,
        u.total_tokens,
    ) == (100, 60, 7, 3, 107)


def test_missing_usage_details_are_zero() -> None:
    asm = Assembler(stream_error)
    feed(
        asm,
        "response.completed",
        response={"usage": {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": None}},
    )
    assert asm.usage is not None and asm.usage.cached_tokens == 0
    assert asm.usage.total_tokens == 7


@pytest.mark.parametrize(
    ("code", "cls", "retryable"),
    [
        ("context_length_exceeded", ContextWindowExceeded, False),
        ("insufficient_quota", QuotaExhausted, False),
        ("invalid_prompt", StreamFailure, False),
        ("server_is_overloaded", StreamFailure, True),
        ("slow_down", StreamFailure, True),
        ("rate_limit_exceeded", StreamFailure, True),
        ("server_error", StreamFailure, True),
    ],
)
def test_failed(code: str, cls: type[Exception], retryable: bool) -> None:
    with pytest.raises(cls) as info:
        feed(
            Assembler(stream_error),
            "response.failed",
            response={"error": {"code": code, "message": "nope"}},
        )
    assert code in str(info.value)
    assert getattr(info.value, "retryable", False) is retryable


def test_incomplete_is_retryable() -> None:
    with pytest.raises(StreamFailure) as info:
        feed(
            Assembler(stream_error),
            "response.incomplete",
            response={"incomplete_details": {"reason": "content_filter"}},
        )
    assert info.value.retryable and "content_filter" in str(info.value)


def test_an_answer_cut_at_max_output_tokens_is_final_and_keeps_its_text() -> None:
    """Resent, the same request would be cut at the same cap and billed again."""
    asm = Assembler(stream_error)
    feed(asm, "response.output_text.delta", delta="Half an ")
    feed(asm, "response.output_text.delta", delta="answer")
    with pytest.raises(AnswerTruncated) as info:
        feed(
            asm,
            "response.incomplete",
            response={"incomplete_details": {"reason": "max_output_tokens"}},
        )
    assert not info.value.retryable and info.value.code == "max_output_tokens"
    assert info.value.partial_output == "Half an answer"


def test_bare_error_event() -> None:
    with pytest.raises(StreamFailure):
        feed(Assembler(stream_error), "error", error={"code": "server_error", "message": "boom"})


def test_invalid_json_is_a_stream_error() -> None:
    with pytest.raises(StreamFailure):
        Assembler(stream_error).feed("response.output_item.done", "{not json")
    with pytest.raises(StreamFailure):
        Assembler(stream_error).feed("response.output_item.done", "[1, 2]")
    with pytest.raises(StreamFailure):
        feed(Assembler(stream_error), "response.output_item.done", item="nope")


@given(st.text(max_size=50), st.text(max_size=200))
def test_never_raises_anything_else(event: str, data: str) -> None:
    with contextlib.suppress(ModelError):
        Assembler(stream_error).feed(event, data)


def test_framing_line_ends_and_comments() -> None:
    f = Framer()
    assert f.feed(b": keepalive\n\nevent: a\r") == []
    assert f.feed(b"\ndata: 1\r\ndata:2\r\r") == [("a", "1\n2")]  # CRLF split, CR, no space
    assert f.feed(b"data: x") == []
    assert f.feed(b"y\n") == []
    assert f.feed(b"\n") == [("", "xy")]
    assert f.feed(b"event: no-data\n\nid: 3\nretry: 10\nbogus\ndata\n\n") == [("", "")]


def test_rate_limit_message_sets_the_wait() -> None:
    with pytest.raises(StreamFailure) as info:
        feed(
            Assembler(stream_error),
            "response.failed",
            response={
                "error": {"code": "rate_limit_exceeded", "message": "Please try again in 1.5s."}
            },
        )
    assert info.value.retry_after_s == 1.5 and info.value.rate_limit
    with pytest.raises(StreamFailure) as info:
        feed(
            Assembler(stream_error),
            "response.failed",
            response={"error": {"code": "rate_limit_exceeded", "message": "try again in 250ms"}},
        )
    assert info.value.retry_after_s == 0.25
