"""The agent loop: sample, run every tool call, feed the outputs back, until the model
answers without calls; then the next follow-up turn.

It sees only protocols (`ModelClient`, `Compactor`, `Tool`, `Executor` via the tool
context, `Sink`): no HTTP, git or sandbox code is imported here, so tests drive it with
scripted models and the same loop runs against every provider.

Every request is the previous one plus what is new (instructions, tools and earlier items
are never rebuilt), except right after a compaction, which `runner.compaction` does when
the thread's token count reaches the limit: before a turn, mid-turn while tool calls are
pending, and once when the server says the context is full.

Why one module: the loop, its limits and its item bookkeeping read top-down
in one sitting; everything with I/O lives behind the protocols, and what the events it
emits look like lives in `runner.exec_events`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import field, replace
from typing import Any, Literal, Protocol

import anyio

from runner import compaction as cp
from runner import exec_events as ev
from runner import items as it
from runner.errors import (
    AnswerTruncated,
    AuthFailed,
    ModelError,
    QuotaExhausted,
    RateLimited,
    RunEnds,
    SizeLimitReached,
)
from runner.frozen import frozen
from runner.items import Item, Usage
from runner.providers import Compactor, ModelClient, ModelResponse, Prompt
from runner.sizes import SizeCaps, size
from runner.tools import Tool, ToolCall, ToolContext, ToolResult
from runner.usage import PrefixAudit, RequestKind, RequestRecord
from runner.vocabulary import RunStatus


class Budget(Protocol):
    """Token and cost limits, checked before every request; the loop knows no prices."""

    def exceeded(self, usage: Usage) -> str | None:
        """Why the thread must stop now, or None to go on."""
        ...


class Sink(Protocol):
    """Receives events in the `codex exec --json` shape, plus our own richer ones."""

    def emit(self, event: dict[str, Any]) -> None: ...


@frozen
class ThreadSpec:
    thread_id: str
    model: str
    instructions: str
    context: Sequence[Item]
    """Initial context (developer + contextual user message), before the first prompt."""
    prompts: Sequence[str]
    """The task prompt, then each follow-up turn, all in the same thread."""
    max_requests: int
    timeout_s: float
    max_tool_calls: int | None = None
    budget: Budget | None = None
    parallel_tool_calls: bool = False
    reasoning: dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    compaction: cp.CompactionSettings = field(default_factory=cp.CompactionSettings)
    compactor: Compactor | None = None
    """The provider's own compaction endpoint, when it has one; else local compaction."""
    caps: SizeCaps = field(default_factory=SizeCaps)
    """Byte caps (`limits:`): what bounds the thread's memory, whatever usage says."""


@frozen
class Outcome:
    """How the thread ended and everything it did: copies, so it never changes after."""

    status: RunStatus
    final_message: str | None
    error: str | None
    history: tuple[Item, ...]
    requests: tuple[RequestRecord, ...]
    usage: Usage
    tool_calls: int
    turns_completed: int
    duration_s: float
    compactions: tuple[cp.Compaction, ...] = ()
    truncated_output: str | None = None
    """The text of an answer `max_output_tokens` cut off, when that ended the run."""


class Thread:
    """One agent thread. `run()` never raises for model or tool trouble: it returns an
    `Outcome` whose status says how it ended, with everything done so far kept."""

    def __init__(
        self,
        spec: ThreadSpec,
        model: ModelClient,
        tools: Sequence[Tool],
        ctx: ToolContext,
        sink: Sink,
    ) -> None:
        self.spec = spec
        self.model = model
        self.tools = {t.name: t for t in tools}
        # Fixed for the life of the thread: the tools are part of every request's prefix.
        self.tool_specs = tuple(t.spec() for t in tools)
        self.ctx = ctx
        self.sink = sink
        self.history: list[Item] = list(spec.context)
        self.requests: list[RequestRecord] = []
        self.compactions: list[cp.Compaction] = []
        self.truncated_output: str | None = None
        self.usage = Usage()
        self.tool_calls = 0
        self._item_seq = 0
        self._audit = PrefixAudit()
        self._start = time.monotonic()
        self._final: str | None = None
        self._turns_done = 0
        self._turn = 0
        self._turn_requests = 0
        self._last_outputs: list[Item] = []
        self._context: list[Item] = list(spec.context)
        """What a rebuilt history starts with: the initial context."""
        self._head = len(spec.context)
        """Leading history items that are context, which compaction never drops."""
        self._counter = cp.TokenCounter(cp.head_bytes(spec.instructions, self.tool_specs))
        self._counter.reset(self.history)
        self._after_compaction = False
        self._compacted_at = -1
        self._reasoning_seen = False

    async def run(self) -> Outcome:
        self._start = time.monotonic()
        self.sink.emit(ev.thread_started(self.spec.thread_id))
        status, error = RunStatus.COMPLETED, None
        with anyio.move_on_after(self.spec.timeout_s) as deadline:
            for turn, prompt in enumerate(self.spec.prompts):
                self._turn = turn
                self.sink.emit(ev.turn_started())
                try:
                    await self._maybe_compact("pre-turn")
                    self._begin_turn(prompt)
                    self._final = await self._turn_loop()
                except RunEnds as hit:
                    status, error = hit.status, hit.reason
                except ModelError as exc:
                    status, error = _classify(exc), f"model error: {exc}"
                    if exc.partial_output is not None:
                        self.truncated_output = exc.partial_output
                        self.sink.emit(
                            {
                                "type": "response.truncated",
                                "request": len(self.requests),
                                "text": exc.partial_output,
                            }
                        )
                if status != RunStatus.COMPLETED:
                    break
                self._turns_done += 1
                self.sink.emit({"type": "turn.completed", "usage": ev.exec_usage(self.usage)})
        if deadline.cancelled_caught:
            status = RunStatus.TIMEOUT
            error = f"stopped after the {self.spec.timeout_s:g} s timeout"
        return self._outcome(status, error)

    def interrupted(self, reason: str) -> Outcome:
        """The outcome of a thread cancelled from outside (Ctrl-C, SIGTERM): everything up
        to the interruption, with every pending call answered."""
        return self._outcome(RunStatus.INTERRUPTED, reason)

    def _outcome(self, status: RunStatus, error: str | None) -> Outcome:
        if status != RunStatus.COMPLETED:
            self._close_pending_calls()
            self.sink.emit(ev.turn_failed(error))
        return Outcome(
            status=status,
            final_message=self._final,
            error=error,
            history=tuple(self.history),
            requests=tuple(self.requests),
            usage=self.usage,
            tool_calls=self.tool_calls,
            turns_completed=self._turns_done,
            duration_s=time.monotonic() - self._start,
            compactions=tuple(self.compactions),
            truncated_output=self.truncated_output,
        )

    def _begin_turn(self, prompt: str) -> None:
        self.history.append(it.message("user", prompt))

    async def _turn_loop(self) -> str | None:
        first = True
        overflowed = False
        while True:
            if self._turn_requests >= self.spec.max_requests:
                raise RunEnds(
                    RunStatus.MAX_REQUESTS,
                    f"stopped after {self.spec.max_requests} model requests (max_requests)",
                )
            why = self.spec.budget.exceeded(self.usage) if self.spec.budget else None
            if why is not None:
                raise RunEnds(RunStatus.BUDGET, why)
            self._check_history()
            if not first:
                await self._maybe_compact("mid-turn")
            first = False
            try:
                outputs = await self._sample()
            except ModelError as exc:
                if not cp.is_context_overflow(exc):
                    raise
                if overflowed:
                    raise RunEnds(
                        RunStatus.FAILED,
                        "the model's context window was "
                        f"exceeded again right after a compaction: {exc}",
                    ) from exc
                overflowed = True
                await self._compact("context_length_exceeded")
                continue
            overflowed = False
            calls = [i for i in outputs if i.type in it.TOOL_CALL_TYPES]
            if not calls:
                messages = [i for i in outputs if i.type == "message" and i.role == "assistant"]
                return it.message_text(messages[-1]) if messages else None
            for call in calls:
                cap = self.spec.max_tool_calls
                if cap is not None and self.tool_calls >= cap:
                    raise RunEnds(
                        RunStatus.MAX_TOOL_CALLS,
                        f"stopped at the limit of {cap} tool calls (max_tool_calls)",
                    )
                self.history.append(await self._call(call))

    def _check_history(self) -> None:
        """Tool outputs grow the history too; the clients check what a response adds."""
        held = sum(i.held_bytes for i in self.history)
        cap = self.spec.caps.history_bytes
        if held > cap:
            raise RunEnds(
                RunStatus.SIZE_LIMIT,
                f"stopped: the history holds {size(held)}, over max_history_bytes ({size(cap)})",
            )

    def _prompt(self) -> Prompt:
        """The next request: the same instructions, tools and cache key every time."""
        s = self.spec
        return Prompt(
            model=s.model,
            instructions=s.instructions,
            input=tuple(self.history),
            tools=self.tool_specs,
            prompt_cache_key=s.thread_id,
            parallel_tool_calls=s.parallel_tool_calls,
            reasoning=s.reasoning,
            reasoning_seen=self._reasoning_seen,
            text=s.text,
            extra=s.extra,
            caps=s.caps,
        )

    async def _sample(self) -> list[Item]:
        self._turn_requests += 1
        _, resp = await self._request(self._prompt(), "turn", self.model.generate)
        self.history.extend(resp.items)
        self._counter.observe(resp.usage, self.history)
        for item in resp.items:
            if item.type == "message" and item.role == "assistant":
                self._emit_model_item("agent_message", {"text": it.message_text(item)})
            elif item.type == "reasoning":
                self._reasoning_seen = True
                if text := ev.reasoning_text(item):
                    self._emit_model_item("reasoning", {"text": text})
        return resp.items

    async def _request(
        self, prompt: Prompt, kind: RequestKind, call: Callable[[Prompt], Awaitable[ModelResponse]]
    ) -> tuple[int, ModelResponse]:
        """Send one request, audited, timed and recorded with the server's usage."""
        prefix = self._audit.check(
            prompt, self._last_outputs, after_compaction=self._after_compaction
        )
        self._after_compaction = False
        self._last_outputs = []
        sent = RequestRecord(
            prefix=prefix,
            index=len(self.requests) + 1,
            turn=self._turn,
            input_items=len(prompt.input),
            kind=kind,
        )
        t0 = time.monotonic()
        try:
            resp = await call(prompt)
        except ModelError as exc:
            # Always kept, with its error, resends and waits: a run that ended on a request
            # nobody answered (a provider down) still shows what it tried and waited.
            self._record(
                replace(
                    sent,
                    duration_s=time.monotonic() - t0,
                    usage=exc.usage,
                    error=str(exc),
                    retries=exc.retries,
                    retry_wait_s=exc.retry_wait_s,
                )
            )
            raise
        self._last_outputs = resp.items
        self._record(
            replace(
                sent,
                duration_s=time.monotonic() - t0,
                usage=resp.usage,
                request_bytes=resp.request_bytes,
                response_id=resp.response_id,
                output_types=[i.type for i in resp.items],
                retries=resp.retries,
                retry_wait_s=resp.retry_wait_s,
            )
        )
        return sent.index, resp

    def _record(self, rec: RequestRecord) -> None:
        self.requests.append(rec)
        if rec.usage is not None:
            self.usage = self.usage + rec.usage
        elif rec.error is None:
            self.usage = self.usage + Usage(unreported=1)
        self.sink.emit(ev.request_completed(rec))

    async def _maybe_compact(self, reason: cp.Reason) -> None:
        limit = self.spec.compaction.limit
        if limit is None or self._counter.count(self.history) < limit:
            return
        if self._compacted_at == self._turn_requests or len(self.history) <= self._head:
            return  # nothing new since the last compaction (or at all): it cannot help
        await self._compact(reason)

    async def _compact(self, reason: cp.Reason) -> None:
        compactor = self.spec.compactor

        async def send(prompt: Prompt, remote: bool) -> tuple[int, ModelResponse]:
            if remote and compactor is not None:
                return await self._request(prompt, "compaction", compactor.compact)
            return await self._request(prompt, "compaction", self.model.generate)

        try:
            new, done = await cp.compact(
                prompt=self._prompt(),
                context=self._context,
                keep=self._head,
                settings=self.spec.compaction,
                send=send,
                remote=compactor is not None,
                reason=reason,
                tokens_before=self._counter.count(self.history),
            )
        except ModelError as exc:
            if cp.is_context_overflow(exc):
                raise RunEnds(RunStatus.FAILED, f"compaction failed: {exc}") from exc
            raise
        self.history = new
        self._head = len(self._context)
        self._counter.reset(self.history)
        self._after_compaction = True
        self._compacted_at = self._turn_requests
        self.compactions.append(done)
        self.sink.emit(done.event())

    async def _call(self, item: Item) -> Item:
        """Run one tool call; always returns exactly one output item for it."""
        d = item.data
        call_id = str(d.get("call_id", ""))
        kind: Literal["function", "custom"] = (
            "custom" if item.type == "custom_tool_call" else "function"
        )
        name = str(d.get("name", ""))
        raw = d.get("input") if kind == "custom" else d.get("arguments")
        call = ToolCall(call_id, name, raw if isinstance(raw, str) else "", kind)
        self.tool_calls += 1
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            result = ToolResult(f"unknown tool {name!r}; available tools: {known}", False)
        else:
            item_id = self._next_item_id()
            started = None
            try:
                started = tool.started(call)
                if started is not None:
                    self._emit_tool_item("item.started", item_id, started)
                result = await tool.run(call, self.ctx)
            except Exception as exc:  # a tool bug must still answer the call
                result = ToolResult(f"tool {name} failed: {type(exc).__name__}: {exc}", False)
            except BaseException:  # cancelled (SIGTERM, timeout): the item still ends
                if started is not None:
                    self._emit_tool_item(
                        "item.completed", item_id, ev.failed_item(started, "interrupted")
                    )
                raise
            completed = result.event
            if completed is None and started is not None:
                completed = ev.failed_item(started, result.output)
            if completed is not None:
                self._emit_tool_item("item.completed", item_id, completed)
        if kind == "custom":
            return it.custom_tool_call_output(call_id, result.output)
        return it.function_call_output(call_id, result.output)

    def _emit_tool_item(self, kind: str, item_id: str, item: dict[str, Any]) -> None:
        """A tool's `item.started` or `item.completed`, its paths made absolute."""
        item = ev.absolute_paths(item, self.ctx.cwd)
        self.sink.emit({"type": kind, "item": {"id": item_id, **item}})

    def _close_pending_calls(self) -> None:
        """Give every call without an output an `aborted` one, so the history stays valid."""
        answered = {i.data.get("call_id") for i in self.history if i.type in it.TOOL_OUTPUT_TYPES}
        for item in list(self.history):
            if item.type in it.TOOL_CALL_TYPES and item.data.get("call_id") not in answered:
                cid = str(item.data.get("call_id", ""))
                self.history.append(
                    it.custom_tool_call_output(cid, "aborted")
                    if item.type == "custom_tool_call"
                    else it.function_call_output(cid, "aborted")
                )

    def _emit_model_item(self, kind: str, fields: dict[str, Any]) -> None:
        """An `agent_message` or `reasoning` item: complete as soon as it is seen."""
        self.sink.emit(
            {"type": "item.completed", "item": {"id": self._next_item_id(), "type": kind, **fields}}
        )

    def _next_item_id(self) -> str:
        self._item_seq += 1
        return f"item_{self._item_seq - 1}"


def _classify(exc: ModelError) -> RunStatus:
    """The run's status for the error that ended it (the message is the error's own)."""
    if isinstance(exc, AnswerTruncated):
        return RunStatus.MAX_OUTPUT_TOKENS
    if isinstance(exc, SizeLimitReached):
        return RunStatus.SIZE_LIMIT
    if isinstance(exc, RateLimited):
        return RunStatus.RATE_LIMITED
    if isinstance(exc, QuotaExhausted):
        return RunStatus.QUOTA_EXHAUSTED
    if isinstance(exc, AuthFailed):
        return RunStatus.ERROR
    return RunStatus.FAILED if exc.request_fault else RunStatus.ERROR
