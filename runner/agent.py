"""The agent loop: sample, run every tool call, feed the outputs back, until the model
answers without calls; then the next follow-up turn.

It sees only protocols (`ModelClient`, `Tool`, `Executor` via the tool context, `Sink`):
no HTTP, git or sandbox code is imported here, so tests drive it with scripted models and
the same loop runs against every provider.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio

from runner import items as it
from runner.errors import HTTPStatusError, ModelError
from runner.items import Item, Usage
from runner.providers import ModelClient, Prompt, StreamEvent
from runner.tools import Tool, ToolCall, ToolContext, ToolResult
from runner.usage import PrefixAudit, PrefixRecord

Status = Literal["completed", "max_turns", "max_tool_calls", "budget", "timeout", "failed",
                 "error", "interrupted"]
"""`failed`: the model refused or could not go on (context full, invalid prompt);
`error`: the runner could not reach a working model (network, 5xx, auth); `budget`: a token
or cost limit of the run or the batch was reached."""


class Budget(Protocol):
    """Token and cost limits, checked before every request; the loop knows no prices."""

    def exceeded(self, usage: Usage) -> str | None:
        """Why the thread must stop now, or None to go on."""
        ...


class Sink(Protocol):
    """Receives events in the `codex exec --json` shape, plus our own richer ones."""

    def emit(self, event: dict[str, Any]) -> None: ...


@dataclass(frozen=True)
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


@dataclass
class RequestRecord:
    prefix: PrefixRecord
    index: int
    turn: int
    input_items: int
    request_bytes: int
    duration_s: float
    usage: Usage | None
    response_id: str | None
    output_types: list[str]


@dataclass
class Outcome:
    status: Status
    final_message: str | None
    error: str | None
    history: list[Item]
    requests: list[RequestRecord]
    usage: Usage
    tool_calls: int
    turns_completed: int
    duration_s: float


class Thread:
    """One agent thread. `run()` never raises for model or tool trouble: it returns an
    `Outcome` whose status says how it ended, with everything done so far kept."""

    def __init__(self, spec: ThreadSpec, model: ModelClient, tools: Sequence[Tool],
                 ctx: ToolContext, sink: Sink) -> None:
        self.spec = spec
        self.model = model
        self.tools = {t.name: t for t in tools}
        self.tool_specs = [t.spec() for t in tools]
        self.ctx = ctx
        self.sink = sink
        self.history: list[Item] = list(spec.context)
        self.requests: list[RequestRecord] = []
        self.usage = Usage()
        self.tool_calls = 0
        self._item_seq = 0
        self._audit = PrefixAudit()
        self._start = time.monotonic()
        self._final: str | None = None
        self._turns_done = 0
        self._last_outputs: list[Item] = []

    async def run(self) -> Outcome:
        self._start = time.monotonic()
        self.sink.emit({"type": "thread.started", "thread_id": self.spec.thread_id})
        status: Status = "completed"
        error: str | None = None
        with anyio.move_on_after(self.spec.timeout_s) as deadline:
            for turn, prompt in enumerate(self.spec.prompts):
                self.sink.emit({"type": "turn.started"})
                self.history.append(it.message("user", prompt))
                try:
                    self._final = await self._turn(turn)
                except _LimitHit as hit:
                    status, error = hit.status, hit.reason
                except ModelError as exc:
                    status, error = _classify(exc), f"model error: {exc}"
                if status != "completed":
                    break
                self._turns_done += 1
                self.sink.emit({"type": "turn.completed", "usage": self._exec_usage()})
        if deadline.cancelled_caught:
            status, error = "timeout", f"stopped after the {self.spec.timeout_s:g} s timeout"
        return self._outcome(status, error)

    def interrupted(self, reason: str) -> Outcome:
        """The outcome of a thread cancelled from outside (Ctrl-C, SIGTERM): everything up
        to the interruption, with every pending call answered."""
        return self._outcome("interrupted", reason)

    def _outcome(self, status: Status, error: str | None) -> Outcome:
        if status != "completed":
            self._close_pending_calls()
            self.sink.emit({"type": "turn.failed", "error": {"message": error}})
        return Outcome(status, self._final, error, self.history, self.requests, self.usage,
                       self.tool_calls, self._turns_done, time.monotonic() - self._start)

    async def _turn(self, turn: int) -> str | None:
        while True:
            if len(self.requests) >= self.spec.max_requests:
                raise _LimitHit("max_turns", f"stopped after {self.spec.max_requests} model "
                                             "requests (max_turns)")
            why = self.spec.budget.exceeded(self.usage) if self.spec.budget else None
            if why is not None:
                raise _LimitHit("budget", why)
            outputs = await self._sample(turn)
            calls = [i for i in outputs if i.type in it.TOOL_CALL_TYPES]
            if not calls:
                messages = [i for i in outputs if i.type == "message" and i.role == "assistant"]
                return it.message_text(messages[-1]) if messages else None
            for call in calls:
                cap = self.spec.max_tool_calls
                if cap is not None and self.tool_calls >= cap:
                    raise _LimitHit("max_tool_calls", f"stopped at the limit of {cap} tool "
                                                      "calls (max_tool_calls)")
                self.history.append(await self._call(call))

    async def _sample(self, turn: int) -> list[Item]:
        s = self.spec
        prompt = Prompt(model=s.model, instructions=s.instructions, input=tuple(self.history),
                        tools=self.tool_specs, prompt_cache_key=s.thread_id,
                        parallel_tool_calls=s.parallel_tool_calls, reasoning=s.reasoning,
                        text=s.text, extra=s.extra)
        prefix = self._audit.check(prompt, self._last_outputs)
        t0 = time.monotonic()
        resp = await self.model.generate(prompt, on_event=self._on_stream)
        self._last_outputs = resp.items
        rec = RequestRecord(prefix, len(self.requests) + 1, turn, len(self.history),
                            resp.request_bytes, time.monotonic() - t0, resp.usage,
                            resp.response_id, [i.type for i in resp.items])
        self.requests.append(rec)
        if resp.usage is not None:
            self.usage = self.usage + resp.usage
        self.sink.emit({"type": "request.completed", "request": rec.index, "turn": turn,
                        "input_items": rec.input_items, "request_bytes": rec.request_bytes,
                        "duration_ms": round(rec.duration_s * 1000, 1),
                        "response_id": rec.response_id,
                        "usage": resp.usage.as_dict() if resp.usage else None,
                        "prefix": {"extends_previous": prefix.extends_previous,
                                   "reused_items": prefix.reused_items,
                                   "ideal_cache_ratio": prefix.ideal_cache_ratio,
                                   "break_index": prefix.break_index,
                                   "break_reason": prefix.break_reason}})
        self.history.extend(resp.items)
        for item in resp.items:
            if item.type == "message" and item.role == "assistant":
                self._emit_item("agent_message", {"text": it.message_text(item)})
            elif item.type == "reasoning":
                text = "".join(str(p.get("text", "")) for p in item.data.get("summary") or []
                               if isinstance(p, dict))
                if text:
                    self._emit_item("reasoning", {"text": text})
        return resp.items

    async def _call(self, item: Item) -> Item:
        """Run one tool call; always returns exactly one output item for it."""
        d = item.data
        call_id = str(d.get("call_id", ""))
        kind: Literal["function", "custom"] = ("custom" if item.type == "custom_tool_call"
                                               else "function")
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
            started = tool.started(call)
            if started is not None:
                self.sink.emit({"type": "item.started", "item": {"id": item_id, **started}})
            try:
                result = await tool.run(call, self.ctx)
            except Exception as exc:  # a tool bug must still answer the call
                result = ToolResult(f"tool {name} failed: {type(exc).__name__}: {exc}", False)
            if result.event is not None:
                self.sink.emit({"type": "item.completed", "item": {"id": item_id,
                                                                   **result.event}})
        if kind == "custom":
            return it.custom_tool_call_output(call_id, result.output)
        return it.function_call_output(call_id, result.output)

    def _close_pending_calls(self) -> None:
        """Give every call without an output an `aborted` one, so the history stays valid."""
        answered = {i.data.get("call_id") for i in self.history if i.type in it.TOOL_OUTPUT_TYPES}
        for item in list(self.history):
            if item.type in it.TOOL_CALL_TYPES and item.data.get("call_id") not in answered:
                cid = str(item.data.get("call_id", ""))
                self.history.append(it.custom_tool_call_output(cid, "aborted")
                                    if item.type == "custom_tool_call"
                                    else it.function_call_output(cid, "aborted"))

    def _on_stream(self, event: StreamEvent) -> None:
        if event.kind in ("text_delta", "reasoning_delta"):
            self.sink.emit({"type": f"stream.{event.kind}", "delta": event.data.get("delta", "")})

    def _emit_item(self, kind: str, fields: dict[str, Any]) -> None:
        self.sink.emit({"type": "item.completed",
                        "item": {"id": self._next_item_id(), "type": kind, **fields}})

    def _next_item_id(self) -> str:
        self._item_seq += 1
        return f"item_{self._item_seq - 1}"

    def _exec_usage(self) -> dict[str, int]:
        """Cumulative thread usage in `codex exec --json` field names."""
        u = self.usage
        return {"input_tokens": u.input_tokens, "cached_input_tokens": u.cached_tokens,
                "output_tokens": u.output_tokens, "reasoning_output_tokens": u.reasoning_tokens}


class _LimitHit(Exception):
    def __init__(self, status: Status, reason: str) -> None:
        super().__init__(reason)
        self.status: Status = status
        self.reason = reason


def _classify(exc: ModelError) -> Status:
    if exc.code == "rate_limited":
        return "error"
    if isinstance(exc, HTTPStatusError):
        return "failed" if exc.status in (400, 413, 422) else "error"
    return "error" if exc.retryable else "failed"
