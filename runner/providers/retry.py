"""Resending a request that failed in a way resending can fix (transport errors, 5xx,
429, a stream cut before `response.completed`, `response.incomplete`): backoff of
0.2 s · 2^n ± 10 %, and never sooner than a `Retry-After` / `retry-after-ms` asks.

A retry resends the very same prompt: tools already run are never run again, because
the agent loop only sees the response that finally completed.
"""

from __future__ import annotations

import random

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)

from runner.errors import HTTPStatusError, ModelError
from runner.providers import ModelClient, ModelResponse, OnEvent, Prompt

BASE_DELAY_S = 0.2
MAX_DELAY_S = 10.0
MAX_WAIT_S = 120.0
"""A server asking for a longer wait than this fails the run at once as rate-limited,
rather than holding a batch slot for an hour."""


def _asked_wait(exc: BaseException | None) -> float:
    return (exc.retry_after_s or 0.0) if isinstance(exc, HTTPStatusError) else 0.0


class RateLimited(ModelError):
    """The server asked for a wait longer than the configured cap."""

    code = "rate_limited"


class RetryingClient:
    def __init__(self, inner: ModelClient, *, max_retries: int = 4,
                 max_wait_s: float = MAX_WAIT_S) -> None:
        self.inner = inner
        self.max_retries = max_retries
        self.max_wait_s = max_wait_s
        self.retries = 0

    def _retryable(self, exc: BaseException) -> bool:
        return (isinstance(exc, ModelError) and exc.retryable
                and _asked_wait(exc) <= self.max_wait_s)

    def _wait(self, state: RetryCallState) -> float:
        """Exponential backoff, but never sooner than the server asked."""
        exc = state.outcome.exception() if state.outcome else None
        backoff: float = min(MAX_DELAY_S, BASE_DELAY_S * 2.0 ** (state.attempt_number - 1))
        return max(backoff * random.uniform(0.9, 1.1), _asked_wait(exc))

    async def generate(self, prompt: Prompt, *, on_event: OnEvent | None = None) -> ModelResponse:
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(self._retryable),
                stop=stop_after_attempt(self.max_retries + 1),
                wait=self._wait,
                reraise=True,
            ):
                with attempt:
                    if attempt.retry_state.attempt_number > 1:
                        self.retries += 1
                    return await self.inner.generate(prompt, on_event=on_event)
        except HTTPStatusError as exc:
            if _asked_wait(exc) > self.max_wait_s:
                raise RateLimited(f"rate limited: the server asks to wait "
                                  f"{_asked_wait(exc):.0f} s, more than the "
                                  f"{self.max_wait_s:g} s cap") from exc
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.inner.aclose()
