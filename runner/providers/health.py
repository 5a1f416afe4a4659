"""Noticing a dead provider. A provider that never answers (connection refused, no DNS
name, TLS handshake failing) would otherwise cost every run of the batch its full retry
schedule, one run after the other, for the same error. One `Health` per provider counts
the attempts in a row that got no answer at all, whatever run sent them; an answer of any
kind (even a 500 or a 429) resets it. After `limit` of them the provider is down: nothing
more is sent to it, requests in flight fail with `ProviderDown`, and the batch skips its
runs still to start (`Health.down`), while the other providers go on."""

from __future__ import annotations

from runner.errors import CONNECT_FAILED, ModelError, ModelNoAnswer, ProviderDown
from runner.providers import ModelClient, ModelResponse, Prompt

MAX_CONNECT_FAILURES = 3
"""The default of `budget.max_connect_failures`."""


class Health:
    """One provider's count of connection failures in a row, shared by all its runs."""

    def __init__(self, provider: str, base_url: str, limit: int = MAX_CONNECT_FAILURES) -> None:
        self.provider = provider
        self.base_url = base_url
        self.limit = limit
        self.failures = 0
        self.last = ""
        """The last connection failure's message."""

    @property
    def down(self) -> str | None:
        """Why nothing more is sent to this provider; None while it may answer."""
        if self.failures < self.limit:
            return None
        return (
            f"provider {self.provider!r} at {self.base_url} is down: {self.failures} "
            f"requests in a row got no answer (last: {self.last}); its runs still to "
            "start are skipped (budget.max_connect_failures)"
        )

    def answered(self) -> None:
        self.failures = 0

    def failed(self, exc: ModelError) -> None:
        if exc.code == CONNECT_FAILED:
            self.failures += 1
            self.last = str(exc)
        else:
            self.answered()  # someone answered, if only with an error


class Watched:
    """A provider's client whose every attempt (under the retry policy) feeds its `Health`;
    once the provider is down, an attempt fails at once, unsent."""

    def __init__(self, inner: ModelClient, health: Health) -> None:
        self.inner = inner
        self.health = health

    async def generate(self, prompt: Prompt) -> ModelResponse:
        why = self.health.down
        if why is not None:
            raise ProviderDown(why)
        try:
            resp = await self.inner.generate(prompt)
        except ModelError as exc:
            self.health.failed(exc)
            why = self.health.down
            if why is not None:
                raise ProviderDown(why) from exc
            if isinstance(exc, ModelNoAnswer) and exc.code == CONNECT_FAILED:
                named = f"provider {self.health.provider!r}: {exc}"
                raise ModelNoAnswer(named, code=CONNECT_FAILED) from exc
            raise
        self.health.answered()
        return resp

    async def aclose(self) -> None:
        await self.inner.aclose()
