"""How a server's refusal is read: which statuses and error codes may be resent, which
mean "send less", which are final, and which exception of the tree each one becomes.

One reading for every wire (an HTTP status with its body, or an error inside a stream)
and for every HTTP caller (the GitHub REST steps use `retryable_status`), so the retry
policy (`retry.decide`) only reads the fields set here."""

from __future__ import annotations

import json
import re

from runner.errors import (
    AuthFailed,
    ContextWindowExceeded,
    ModelError,
    QuotaExhausted,
    StatusRefusal,
    StreamFailure,
)

RETRYABLE_STATUSES = frozenset({408, 409, 429})
"""Besides 5xx: what resending may fix (the statuses OpenAI's own SDK resends)."""

OVERLOAD_CODES = frozenset({"rate_limit_exceeded", "server_is_overloaded", "slow_down"})
"""Codes that mean "send less": the wait they cause holds every run of the provider."""

FINAL_CODES = frozenset(
    {
        "insufficient_quota",
        "usage_not_included",
        "invalid_prompt",
        "cyber_policy",
        "invalid_request_error",
        "context_length_exceeded",
    }
)
"""Codes of an error inside a stream that resending cannot fix (Codex's list); any other
(overload included) is resent. An HTTP error is resent by its status instead."""

_OVERFLOW_WORDS = (
    "context_length_exceeded",
    "exceed_context_size",
    "exceeds the available context",
    "context length",
    "maximum context",
)
"""How servers say a request does not fit the context window: OpenAI's code, llama.cpp's
and vLLM's wordings."""

_TRY_AGAIN = re.compile(r"(?i)try again in\s*(\d+(?:\.\d+)?)\s*(s|ms|seconds?)")


def retryable_status(status: int) -> bool:
    """Resending a request answered with `status` may help: one rule for every HTTP caller."""
    return status >= 500 or status in RETRYABLE_STATUSES


def says_context_overflow(text: str) -> bool:
    """The one test for "the request does not fit the context window", for every wire:
    an HTTP error body (400 or 413) or an error inside a stream."""
    low = text.lower()
    return any(w in low for w in _OVERFLOW_WORDS)


def error_fields(error: object) -> tuple[str | None, str | None]:
    """`(code, message)` of an error as servers send it: `{"code" or "type", "message"}`,
    or a bare string (the message). Nones for anything else."""
    if isinstance(error, str):
        return None, error[:1000]
    if not isinstance(error, dict):
        return None, None
    code, message = error.get("code") or error.get("type"), error.get("message")
    return (str(code)[:100] if code else None), (str(message)[:1000] if message else None)


def body_error_fields(body: str) -> tuple[str | None, str | None]:
    """`(code, message)` of an OpenAI-style `{"error": ...}` body; Nones otherwise."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    return error_fields(obj.get("error") if isinstance(obj, dict) else None)


def model_error(
    code: str | None,
    message: str | None,
    *,
    status: int | None = None,
    body: str = "",
    retry_after_s: float | None = None,
) -> ModelError:
    """The one classification of a model server's refusal, whatever the wire: an HTTP
    answer (`status` and its `body`) or an error inside a stream (`status` None, `body`
    the error as sent). Quota and authentication failures are final and say so; a full
    context window is for compaction; the rest is the wire's own error, resent by the
    status (HTTP) or the code (a stream), after the wait the server asked for."""
    if retry_after_s is None and code == "rate_limit_exceeded" and message:
        m = _TRY_AGAIN.search(message)
        if m:
            retry_after_s = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    err: ModelError
    if status is None:
        err = StreamFailure(
            f"{code or 'error'}: {message or 'response failed'}",
            code=code,
            retryable=code not in FINAL_CODES,
            rate_limit=code in OVERLOAD_CODES,
            retry_after_s=retry_after_s,
        )
    else:
        shown = f" {code}" if code else ""
        err = StatusRefusal(
            f"HTTP {status}{shown}: {(message or body)[:500]}",
            status=status,
            body=body,
            code=code,
            retryable=retryable_status(status),
            rate_limit=status == 429 or code in OVERLOAD_CODES,
            retry_after_s=retry_after_s,
        )
    if code == "insufficient_quota":
        return QuotaExhausted(f"quota exhausted: {err}")
    if code == "context_length_exceeded" or (
        status in (None, 400, 413) and says_context_overflow(body or str(err))
    ):
        return ContextWindowExceeded(str(err))
    if status in (401, 403):
        return AuthFailed(str(err))
    return err


def http_error(status: int, body: str, *, retry_after_s: float | None = None) -> ModelError:
    """The error for a non-2xx answer of a model server (see `model_error`)."""
    code, message = body_error_fields(body)
    return model_error(code, message, status=status, body=body, retry_after_s=retry_after_s)


def stream_error(error: object) -> ModelError:
    """The error for an error inside a model's stream: a Responses `response.failed` or
    `error` event, or a Chat Completions error chunk (see `model_error`)."""
    code, message = error_fields(error)
    return model_error(code, message, body=json.dumps(error, ensure_ascii=False)[:2000])
