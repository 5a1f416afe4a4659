"""How a server's refusal is read (runner/providers/refusals.py): which class of the tree
it becomes, whether it may be resent, whether it holds every run of the provider, and the
wait it asks for, the same for an HTTP answer and an error inside a stream."""

from __future__ import annotations

import json

import pytest

from runner.errors import (
    AuthFailed,
    ContextWindowExceeded,
    QuotaExhausted,
    StatusRefusal,
    StreamFailure,
)
from runner.providers.refusals import (
    body_error_fields,
    error_fields,
    http_error,
    retryable_status,
    says_context_overflow,
    stream_error,
)


def body(code: str | None, message: str = "m", kind: str = "x") -> str:
    return json.dumps({"error": {"message": message, "type": kind, "code": code}})


def test_http_errors_become_the_right_class() -> None:
    quota = http_error(429, body("insufficient_quota", "You exceeded your current quota"))
    assert isinstance(quota, QuotaExhausted)
    assert str(quota).startswith("quota exhausted: HTTP 429 insufficient_quota: You exceeded")
    assert isinstance(http_error(403, ""), AuthFailed)
    assert isinstance(http_error(400, body("context_length_exceeded")), ContextWindowExceeded)
    bad = http_error(400, body(None, "Unknown parameter: 'foo'.", "invalid_request_error"))
    assert isinstance(bad, StatusRefusal)
    assert str(bad) == "HTTP 400 invalid_request_error: Unknown parameter: 'foo'."
    assert str(http_error(502, "<html>" + "x" * 5000)).startswith("HTTP 502: <html>xxx")
    assert len(str(http_error(502, "x" * 5000))) < 520


def test_which_statuses_may_be_resent() -> None:
    assert [
        s for s in (400, 401, 404, 408, 409, 413, 429, 500, 503, 599) if retryable_status(s)
    ] == [
        408,
        409,
        429,
        500,
        503,
        599,
    ]


def test_an_overflow_is_read_from_the_words_only_where_it_can_mean_one() -> None:
    llama = body("exceed_context_size_error", "the request exceeds the available context size")
    assert isinstance(http_error(400, llama), ContextWindowExceeded)
    assert isinstance(http_error(413, "Maximum context length is 8192"), ContextWindowExceeded)
    # A 500 that mentions the context is the server's trouble, resent as such.
    err = http_error(500, "maximum context exceeded while paging")
    assert type(err) is StatusRefusal and err.retryable
    assert says_context_overflow("This model's MAXIMUM CONTEXT length is 4096")
    assert not says_context_overflow("context switch")


def test_stream_errors_are_resent_by_code_and_overload_holds_the_provider() -> None:
    overload = stream_error({"code": "server_is_overloaded", "message": "busy"})
    assert type(overload) is StreamFailure and overload.retryable and overload.rate_limit
    final = stream_error({"code": "invalid_prompt", "message": "no"})
    assert not final.retryable and not final.rate_limit
    assert str(final) == "invalid_prompt: no"
    plain = stream_error("something broke")
    assert plain.retryable and plain.code is None and str(plain) == "error: something broke"
    assert isinstance(stream_error({"code": "insufficient_quota"}), QuotaExhausted)


@pytest.mark.parametrize(
    ("message", "wait"),
    [("Try again in 20ms.", 0.02), ("try again in 1.5 seconds", 1.5), ("Try again later.", None)],
)
def test_try_again_in_sets_the_wait_of_a_rate_limit(message: str, wait: float | None) -> None:
    err = http_error(429, body("rate_limit_exceeded", message))
    assert err.retry_after_s == wait and err.rate_limit and err.retryable
    told = http_error(429, body("rate_limit_exceeded", message), retry_after_s=9.0)
    assert told.retry_after_s == 9.0  # the header wins over the words


def test_odd_error_bodies_give_no_fields_and_long_ones_are_cut() -> None:
    assert body_error_fields("<html>502</html>") == (None, None)
    assert body_error_fields("[1, 2]") == (None, None)
    assert body_error_fields("[" * 100_000 + "]" * 100_000) == (None, None)
    assert error_fields(42) == (None, None)
    code, message = error_fields({"type": "t" * 500, "message": "m" * 5000})
    assert code == "t" * 100 and message == "m" * 1000
    assert error_fields({"code": "", "message": ""}) == (None, None)
    assert isinstance(http_error(401, body("invalid_api_key")), AuthFailed)
