"""The retry policy, in one place: what is resent, how often, and how long to wait.

Every failed attempt gets a typed decision (`decide`): give up, or retry against one of
two budgets, as Codex counts them:

- `request` (`request_max_retries`, 4): the server never answered 200: connect or send
  failures, 5xx, 408/409/429;
- `stream` (`stream_max_retries`, 5): the server answered 200 and the stream then failed:
  cut, stalled (idle timeout), `response.incomplete`, or `response.failed` with a
  transient code (`rate_limit_exceeded`, `server_is_overloaded`, `server_error`...).

Codex nests the two (its turn loop resends the HTTP retry loop); here each budget counts
only its own failures, so k cut streams cost exactly k + 1 requests.

The wait is 0.2 s · 2^(n-1) ± 10 % (n counted per budget), never shorter than the
server's `Retry-After` / `retry-after-ms` / "try again in 17s". A rate-limit answer
(429, `rate_limit_exceeded`, overload) holds the provider's `RateGate`: every run
sharing the provider waits until then before sending anything. A server that asks for
more than `max_wait_s` fails the run at once as rate limited instead of holding a batch
slot for an hour.

A retry resends the very same prompt: tools already run are never run again, because the
agent loop only sees the response that finally completed. Tenacity drives the attempts.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Literal, TypeVar

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_never

from runner.errors import (
    AuthFailed,
    ModelError,
    RateLimited,
    RemoteError,
    StreamFailure,
)
from runner.frozen import frozen
from runner.items import Usage
from runner.providers import ModelClient, ModelResponse, Prompt, find_compactor

__all__ = [
    "RateGate",
    "RateLimited",
    "Retry",
    "RetryingClient",
    "Tally",
    "backoff_s",
    "decide",
]

BASE_DELAY_S = 0.2
MAX_DELAY_S = 10.0
MAX_WAIT_S = 120.0
"""A server asking for a longer wait than this fails the run at once as rate-limited."""

Budget = Literal["request", "stream"]
T = TypeVar("T")


@frozen
class Retry:
    """Resend after a failed attempt."""

    budget: Budget
    asked_s: float
    """The wait the server asked for (0 when it said nothing)."""
    holds_provider: bool
    """A rate-limit answer: the wait applies to every run of the provider."""


def decide(exc: RemoteError) -> Retry | None:
    """What to do after `exc`: a `Retry`, or None to give up (the error is final). Any
    HTTP caller's error will do (the GitHub client resends by it too); only a model
    stream's failures count against the `stream` budget."""
    if not exc.retryable:
        return None
    budget: Budget = "stream" if isinstance(exc, StreamFailure) else "request"
    return Retry(budget, max(0.0, exc.retry_after_s or 0.0), exc.rate_limit)


def backoff_s(n: int, base_s: float = BASE_DELAY_S) -> float:
    """The wait before retry `n` (1-based) when the server asked for none."""
    return min(MAX_DELAY_S, base_s * 2.0 ** (n - 1)) * random.uniform(0.9, 1.1)


@dataclass
class Tally:
    """What one request cost in resends and waiting: handed to `RetryingClient.call` by
    its caller and read back by it, so the counts travel with the request (into its
    `ModelResponse` or `ModelError`), never through a shared counter."""

    retries: int = 0
    """Attempts resent after a failed one (connect failures, 5xx, 429, cut streams)."""
    wait_s: float = 0.0
    """Seconds spent waiting before attempts: backoff, the server's Retry-After, and a
    provider's rate gate held by another run's 429."""


class RateGate:
    """When a provider may next be sent a request. One per provider, shared by all its
    runs: after a 429 one run's wait holds every run, so twenty runs do not each spend
    a request learning what the first one was told."""

    def __init__(self) -> None:
        self.opens_at = 0.0
        """On `anyio.current_time()`'s clock."""

    def hold(self, seconds: float) -> None:
        self.opens_at = max(self.opens_at, anyio.current_time() + seconds)

    async def wait(self, max_wait_s: float) -> float:
        """Return when the gate is open, with the seconds waited; raise `RateLimited`
        rather than wait too long."""
        began = anyio.current_time()
        while (left := self.opens_at - anyio.current_time()) > 0:
            if left > max_wait_s:
                raise RateLimited(
                    f"rate limited: the provider asked to wait {left:.0f} s, "
                    f"more than the {max_wait_s:g} s cap (max_retry_wait_s)"
                )
            await anyio.sleep(left)
        return anyio.current_time() - began


class _Attempts:
    """The budgets of one call and the decision about its last failure."""

    def __init__(
        self, limits: dict[Budget, int], max_wait_s: float, base_s: float, gate: RateGate
    ) -> None:
        self.limits = limits
        self.gate = gate
        self.max_wait_s = max_wait_s
        self.base_s = base_s
        self.used: dict[Budget, int] = {"request": 0, "stream": 0}
        self.last: Retry | None = None
        self.final: ModelError | None = None
        """Set when a retryable error ends the call anyway (budget spent, wait too long)."""

    def allow(self, exc: BaseException) -> bool:
        self.last = None
        if not isinstance(exc, ModelError):
            return False
        retry = decide(exc)
        if retry is None:
            return False
        if retry.asked_s > self.max_wait_s:
            if retry.holds_provider:
                self.gate.hold(retry.asked_s)  # the other runs fail fast too, unsent
            self.final = RateLimited(
                f"rate limited: the server asks to wait {retry.asked_s:.0f} s, more than "
                f"the {self.max_wait_s:g} s cap (max_retry_wait_s); last error: {exc}"
            )
            return False
        self.used[retry.budget] += 1
        if self.used[retry.budget] > self.limits[retry.budget]:
            n = self.limits[retry.budget]
            if retry.holds_provider:
                self.final = RateLimited(
                    f"rate limited: still refused after {n} retries; last error: {exc}"
                )
            return False
        self.last = retry
        return True

    def wait(self, state: RetryCallState) -> float:
        assert self.last is not None
        return max(backoff_s(self.used[self.last.budget], self.base_s), self.last.asked_s)


class RetryingClient:
    """Wraps one provider's client; one per provider, so its `gate` is the provider's."""

    def __init__(
        self,
        inner: ModelClient,
        *,
        request_max_retries: int = 4,
        stream_max_retries: int = 5,
        max_wait_s: float = MAX_WAIT_S,
        key_env: str | None = None,
        base_delay_s: float = BASE_DELAY_S,
    ) -> None:
        self.inner = inner
        self.base_delay_s = base_delay_s
        self.limits: dict[Budget, int] = {
            "request": request_max_retries,
            "stream": stream_max_retries,
        }
        self.max_wait_s = max_wait_s
        self.key_env = key_env
        self.gate = RateGate()

    async def generate(self, prompt: Prompt) -> ModelResponse:
        """One request under the policy. Attempts the server billed before failing
        (incomplete, failed mid-stream) are added to the usage returned or raised, so a
        run's tokens match what was paid for; so are the resends and waits (`Tally`)."""
        billed: list[Usage] = []
        tally = Tally()

        async def attempt() -> ModelResponse:
            try:
                return await self.inner.generate(prompt)
            except ModelError as exc:
                if exc.usage is not None:
                    billed.append(exc.usage)
                raise

        try:
            resp = await self.call(attempt, tally)
        except ModelError as exc:
            if billed:
                exc.usage = sum(billed, Usage())
            exc.retries, exc.retry_wait_s = tally.retries, tally.wait_s
            raise
        usage = sum(billed, resp.usage or Usage()) if billed else resp.usage
        return replace(resp, usage=usage, retries=tally.retries, retry_wait_s=tally.wait_s)

    async def call(self, attempt: Callable[[], Awaitable[T]], tally: Tally | None = None) -> T:
        """Run `attempt` under the policy: any model request of this provider can use it.
        Its resends and waits are added to `tally`, when given."""
        tally = Tally() if tally is None else tally
        tries = _Attempts(self.limits, self.max_wait_s, self.base_delay_s, self.gate)
        try:
            async for state in AsyncRetrying(
                retry=retry_if_exception(tries.allow),
                stop=stop_never,
                wait=tries.wait,
                sleep=self._sleep(tries, tally),
                reraise=True,
            ):
                with state:
                    tally.wait_s += await self.gate.wait(self.max_wait_s)
                    return await attempt()
        except AuthFailed as exc:
            hint = (
                f"check the API key in ${self.key_env}"
                if self.key_env
                else "the provider has no env_key: does it need an API key?"
            )
            raise AuthFailed(f"{exc}; {hint}") from exc
        except ModelError as exc:
            if tries.final is not None:
                raise tries.final from exc
            raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def compact(self, prompt: Prompt) -> ModelResponse:
        """The provider's compaction endpoint, behind the same rate gate as every other
        request (a provider holding us off after a 429 is not hit meanwhile). Not resent:
        a failed compaction falls back to a local one."""
        inner = find_compactor(self.inner)
        if inner is None:
            raise ModelError("this provider has no compaction endpoint")
        waited = await self.gate.wait(self.max_wait_s)
        resp = await inner.compact(prompt)
        return replace(resp, retry_wait_s=waited)

    def _sleep(self, tries: _Attempts, tally: Tally) -> Callable[[float], Awaitable[None]]:
        async def sleep(seconds: float) -> None:
            tally.retries += 1
            if tries.last is not None and tries.last.holds_provider:
                self.gate.hold(seconds)
            began = anyio.current_time()
            try:
                await anyio.sleep(seconds)
            finally:
                tally.wait_s += anyio.current_time() - began

        return sleep

    async def aclose(self) -> None:
        await self.inner.aclose()
