"""The prefix audit: does each request extend the one before it exactly?

Prompt caches serve the longest exact prefix, so every request should be the previous
request plus the previous response's items plus what is new. The audit compares each
request with that expectation item by item (each item's wire text; identical objects
compare in O(1)), and says where and why a request breaks it. It also gives the ideal
cache share of a request: the part of its bytes that repeat the previous request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from runner.items import Item, dumps
from runner.providers import Prompt


@dataclass(frozen=True)
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


class PrefixAudit:
    def __init__(self) -> None:
        self._instructions: str | None = None
        self._tools: str | None = None
        self._expected: list[Item] = []
        self._first = True

    def check(self, prompt: Prompt, outputs_before: Sequence[Item] = ()) -> PrefixRecord:
        """Audit `prompt` against the previous request plus `outputs_before`."""
        tools = dumps(list(prompt.tools))
        expected = self._expected + list(outputs_before)
        current = list(prompt.input)
        record: PrefixRecord
        if self._first:
            record = PrefixRecord(True, 0, None)
        else:
            reused = 0
            for a, b in zip(expected, current, strict=False):
                if a.wire != b.wire:
                    break
                reused += 1
            head = len(prompt.instructions) + len(tools)
            repeated = sum(len(i.wire) for i in current[:reused])
            total = head + sum(len(i.wire) for i in current)
            reason = None
            index = None
            if prompt.instructions != self._instructions:
                reason, index, repeated = "instructions changed", 0, 0
            elif tools != self._tools:
                reason, index, repeated = "tools changed", 0, len(prompt.instructions)
            elif reused < len(expected):
                index = reused
                reason = ("history shortened" if reused == len(current)
                          else f"item {reused} rewritten ({current[reused].type})")
            ok = reason is None
            record = PrefixRecord(ok, reused, round((repeated + (head if ok else 0))
                                                    / total, 4) if total else None,
                                  index, reason)
        self._first = False
        self._instructions = prompt.instructions
        self._tools = tools
        self._expected = current
        return record
