"""The prefix audit: does each request extend the one before it exactly?

Prompt caches serve the longest exact prefix, so every request should be the previous
request plus the previous response's items plus what is new. The audit compares each
request with that expectation item by item (each item's wire text; identical objects
compare in O(1)), and says where and why a request breaks it. It also gives the ideal
cache share of a request: the part of its bytes that repeat the previous request, counted
the way a prefix cache counts them (instructions, then each tool, then each input item).

A request's record (`RequestRecord`) lives here beside the audit it carries, not in the
loop that fills it: the event shapes and the report read it without importing the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Literal

from runner.frozen import frozen
from runner.items import Item, Usage, dumps
from runner.providers import Prompt

COMPACTION = "compaction"
"""The break reason of the first request after a compaction: the one expected break."""


@frozen
class PrefixRecord:
    extends_previous: bool
    """True for the first request, and for any request that repeats the previous one
    (its input plus the items the server answered) byte for byte before adding to it."""
    reused_items: int
    """Leading input items identical to the previous request's input and output."""
    ideal_cache_ratio: float | None
    """Bytes repeated from the previous request / bytes of this request (null for the
    first): what a perfect prefix cache could serve."""
    break_index: int | None = None
    break_reason: str | None = None
    """`compaction`, `instructions changed`, `tools changed`, `item N rewritten (type)`
    or `history shortened`; null when the request extends the previous one."""


def ideal_cached_tokens(input_tokens: int, prefix: PrefixRecord) -> int:
    """The cached tokens a perfect prefix cache would report for this request."""
    return round(input_tokens * (prefix.ideal_cache_ratio or 0.0))


class PrefixAudit:
    def __init__(self) -> None:
        self._instructions: str | None = None
        self._tools: str | None = None
        self._tool_bytes: list[int] = []
        self._tools_seen: object = None
        self._instr_seen: object = None
        self._instr_bytes = 0
        self._expected: list[Item] = []
        self._sent = 0
        self._first = True

    def check(
        self, prompt: Prompt, outputs_before: Sequence[Item] = (), *, after_compaction: bool = False
    ) -> PrefixRecord:
        """Audit `prompt` against the previous request plus `outputs_before`.

        `after_compaction`: the history was rebuilt on purpose since the last request, so
        a break here is reported as `compaction` rather than as a fault.
        """
        # A thread sends the same tools and instructions objects every time: serialise
        # them only when they are new objects, not on every request.
        if prompt.tools is not self._tools_seen:
            self._tools_seen = prompt.tools
            tools = dumps(list(prompt.tools))
            if tools != self._tools:
                self._tool_bytes = [len(dumps(t).encode()) for t in prompt.tools]
        else:
            tools = self._tools or ""
        if prompt.instructions is not self._instr_seen:
            self._instr_seen = prompt.instructions
            self._instr_bytes = (
                len(dumps(prompt.instructions).encode()) if prompt.instructions else 0
            )
        instr = self._instr_bytes
        current = list(prompt.input)
        total = instr + sum(self._tool_bytes) + sum(i.nbytes for i in current)
        record: PrefixRecord
        if self._first:
            record = PrefixRecord(True, 0, None)
        else:
            expected = self._expected + list(outputs_before)
            reused = 0
            for a, b in zip(expected, current, strict=False):
                if a.wire != b.wire:
                    break
                reused += 1
            # Only the previous request's own input can be in the cache, not its output.
            repeated = (
                instr
                + sum(self._tool_bytes)
                + sum(i.nbytes for i in current[: min(reused, self._sent)])
            )
            reason: str | None = None
            index: int | None = None
            if prompt.instructions != self._instructions:
                reason, index, repeated = "instructions changed", 0, 0
            elif tools != self._tools:
                reason, index, repeated = "tools changed", 0, instr
            elif reused < len(expected):
                index = reused
                reason = (
                    "history shortened"
                    if reused == len(current)
                    else f"item {reused} rewritten ({current[reused].type})"
                )
            if reason is not None and after_compaction:
                reason = COMPACTION
            record = PrefixRecord(
                reason is None, reused, round(repeated / total, 4) if total else None, index, reason
            )
        self._first = False
        self._instructions = prompt.instructions
        self._tools = tools
        self._expected = current
        self._sent = len(current)
        return record


RequestKind = Literal["turn", "compaction"]


@frozen
class RequestRecord:
    """One request: what was sent, then what came back (or why nothing did)."""

    prefix: PrefixRecord
    index: int
    turn: int
    input_items: int
    kind: RequestKind = "turn"
    """`compaction`: a summary request or a call of the compaction endpoint."""
    duration_s: float = 0.0
    usage: Usage | None = None
    request_bytes: int = 0
    response_id: str | None = None
    output_types: list[str] = field(default_factory=list)
    error: str | None = None
    """Why the server refused it: kept for context-window overflows, which the loop
    answers with a compaction, and for failures that were billed or resent (other
    failures end the run and are its `error`)."""
    retries: int = 0
    """Attempts resent before the answer (or the final failure)."""
    retry_wait_s: float = 0.0
    """Seconds waited before its attempts: backoff, Retry-After, a held rate gate."""
