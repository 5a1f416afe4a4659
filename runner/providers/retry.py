"""Resending a request that failed in a way resending can fix (transport errors, 5xx,
a stream cut before `response.completed`, `response.incomplete`).

A retry resends the very same prompt: tools already run are never run again, because
the agent loop only sees the response that finally completed.
"""

from __future__ import annotations

from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from runner.errors import ModelError
from runner.providers import ModelClient, ModelResponse, OnEvent, Prompt

BASE_DELAY_S = 0.2
MAX_DELAY_S = 10.0


def _retryable(exc: BaseException) -> bool:
    return isinstance(exc, ModelError) and exc.retryable


class RetryingClient:
    def __init__(self, inner: ModelClient, *, max_retries: int = 4) -> None:
        self.inner = inner
        self.max_retries = max_retries
        self.retries = 0

    async def generate(self, prompt: Prompt, *, on_event: OnEvent | None = None) -> ModelResponse:
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=BASE_DELAY_S, max=MAX_DELAY_S, jitter=0.1),
            reraise=True,
        ):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    self.retries += 1
                return await self.inner.generate(prompt, on_event=on_event)
        raise AssertionError("unreachable")  # pragma: no cover

    async def aclose(self) -> None:
        await self.inner.aclose()
