"""Keeping a long thread inside the model's context window, without losing the cache.

Counting (Codex's rule): the thread's size is the last response's `total_tokens` plus an
estimate (UTF-8 bytes / 4) of every item appended since. Exact tokens would need the model's
tokenizer; the server's own number for everything up to its last answer keeps the estimate
small and self-correcting.

Compacting, when the count reaches the limit:

- remote, when the provider has `POST {base_url}/responses/compact`: the server returns the
  new history (the kept user messages and an opaque `compaction` item); the context messages
  we inject are put back in front of it. If that endpoint fails, local compaction follows.
- local: a hand-off summary request that is the thread's last request plus one user message
  (same instructions, same tools, `tool_choice: "none"`), so the server serves all of it but
  that message from its prompt cache. Codex drops the tools there, which changes the prefix
  and makes every compaction start cold.

The rebuilt history is always context + real user messages (newest first within a token
budget, kept in their order) + one summary message, so consecutive compactions share the
prefix up to the summary. A compaction request that overflows drops the oldest items after
the context and is sent again.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import field, replace
from importlib import resources
from typing import Literal

from runner import items as it
from runner.errors import ContextWindowExceeded, ModelError
from runner.frozen import frozen
from runner.items import Item, Usage, dumps
from runner.prompt import is_contextual_user_message
from runner.providers import ModelResponse, Prompt

USER_MESSAGE_TOKENS = 20_000
"""How much of the user's own messages a rebuilt history keeps (Codex's budget)."""
NO_SUMMARY = "(no summary available)"
SUMMARY_OUTPUT_TOKENS = 1024
"""The least output a summary request may use, whatever `max_output_tokens` the task set
for its turns: a summary cut off by a cap meant for short steps fails the compaction."""
TRUNCATED = "\n[... earlier part of this message cut at compaction]"

Kind = Literal["remote", "local"]
Reason = Literal["pre-turn", "mid-turn", "context_length_exceeded"]


@functools.cache
def _data(name: str) -> str:
    return resources.files("runner").joinpath("data", name).read_text(encoding="utf-8").strip()


def default_prompt() -> str:
    """The bundled hand-off summary request (our own wording)."""
    return _data("compact_prompt.md")


def summary_prefix() -> str:
    """The first line(s) of every summary message; also how earlier summaries are told apart
    from the user's own messages."""
    return _data("compact_summary_prefix.md")


@frozen
class CompactionSettings:
    limit: int | None = None
    """Compact when the thread's token count reaches this. None: only when the server says
    the context is full."""
    prompt: str = field(default_factory=default_prompt)
    """The hand-off summary request of local compaction."""
    user_message_tokens: int = USER_MESSAGE_TOKENS


@frozen
class Compaction:
    """One compaction, for the event log and the report."""

    kind: Kind
    reason: Reason
    tokens_before: int
    tokens_after: int
    items_before: int
    items_after: int
    dropped_items: int
    """Oldest items left out of the compaction request because it did not fit."""
    requests: tuple[int, ...]
    """Indexes (1-based) of the compaction's answered requests (one, unless a remote
    failure fell back to local)."""
    fallback: str | None = None
    """Why remote compaction was not used although the provider offers it."""

    def event(self) -> dict[str, object]:
        return {
            "type": "compaction.completed",
            "kind": self.kind,
            "reason": self.reason,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "items_before": self.items_before,
            "items_after": self.items_after,
            "dropped_items": self.dropped_items,
            "requests": list(self.requests),
            "fallback": self.fallback,
        }


# --- counting ------------------------------------------------------------------------


def estimate_tokens(nbytes: int) -> int:
    """Bytes / 4, rounded up: Codex's estimate for text the server has not counted yet."""
    return (nbytes + 3) // 4


def head_bytes(instructions: str, tools: Sequence[object]) -> int:
    """Bytes of the instructions and tools, which every request repeats."""
    instr = len(dumps(instructions).encode()) if instructions else 0
    return instr + sum(len(dumps(t).encode()) for t in tools)


class TokenCounter:
    """The thread's size in tokens: the server's count up to its last answer, plus an
    estimate of what was appended since."""

    def __init__(self, head: int) -> None:
        self._head = head
        self._base = estimate_tokens(head)
        self._mark = 0

    def observe(self, usage: Usage | None, history: Sequence[Item]) -> None:
        """After a response's items were appended to `history`."""
        if usage is None or usage.total_tokens <= 0:
            self.reset(history)
            return
        self._base = usage.total_tokens
        self._mark = len(history)

    def reset(self, history: Sequence[Item]) -> None:
        """An estimate of the whole prompt, when no server count applies (after compaction)."""
        self._base = estimate_tokens(self._head + sum(i.nbytes for i in history))
        self._mark = len(history)

    def count(self, history: Sequence[Item]) -> int:
        mark = min(self._mark, len(history))
        return self._base + estimate_tokens(sum(i.nbytes for i in history[mark:]))


# --- the new history -----------------------------------------------------------------


def is_summary(item: Item) -> bool:
    return (
        item.type == "message"
        and item.role == "user"
        and it.message_text(item).startswith(summary_prefix())
    )


def is_real_user_message(item: Item) -> bool:
    """A message the user wrote (task prompt, follow-up turn): not our injected context,
    not an earlier summary."""
    return (
        item.type == "message"
        and item.role == "user"
        and not is_contextual_user_message(item)
        and not is_summary(item)
    )


def kept_user_messages(history: Sequence[Item], budget_tokens: int) -> list[Item]:
    """The real user messages, newest first while they fit in the budget, back in their
    order; the oldest kept one is cut (its beginning kept) when only part of it fits."""
    kept: list[Item] = []
    left = budget_tokens
    for item in reversed([i for i in history if is_real_user_message(i)]):
        cost = estimate_tokens(item.nbytes)
        if cost <= left:
            kept.append(item)
            left -= cost
            continue
        if left > 0:
            text = it.message_text(item)
            keep_chars = max(0, left * 4 - len(TRUNCATED) - 80)
            kept.append(it.message("user", text[:keep_chars] + TRUNCATED))
        break
    kept.reverse()
    return kept


def summary_text(output: Sequence[Item]) -> str:
    messages = [i for i in output if i.type == "message" and i.role == "assistant"]
    text = it.message_text(messages[-1]).strip() if messages else ""
    return text or NO_SUMMARY


def summary_message(text: str) -> Item:
    return it.message("user", f"{summary_prefix()}\n\n{text}")


def rebuild_local(
    context: Sequence[Item],
    history: Sequence[Item],
    summary: str,
    user_message_tokens: int = USER_MESSAGE_TOKENS,
) -> list[Item]:
    """Context, the user's messages, the summary: the same shape every time."""
    return [*context, *kept_user_messages(history, user_message_tokens), summary_message(summary)]


def rebuild_remote(context: Sequence[Item], output: Sequence[Item]) -> list[Item]:
    """Our context in front of the server's new history, minus the context messages it
    echoed (they would be stale or doubled), as Codex does."""
    kept = [
        i
        for i in output
        if not (i.type == "message" and i.role in ("developer", "system"))
        and not is_contextual_user_message(i)
    ]
    return [*context, *kept]


def drop_oldest(items: Sequence[Item], keep: int) -> list[Item] | None:
    """`items` without the oldest one after the first `keep` (with its tool outputs, so
    every call keeps exactly one answer); None when nothing is left to drop."""
    if len(items) <= keep:
        return None
    oldest = items[keep]
    rest = list(items[keep + 1 :])
    if oldest.type in it.TOOL_CALL_TYPES:
        cid = oldest.data.get("call_id")
        rest = [
            i for i in rest if not (i.type in it.TOOL_OUTPUT_TYPES and i.data.get("call_id") == cid)
        ]
    return [*items[:keep], *rest]


def is_context_overflow(exc: BaseException) -> bool:
    """The server refused the request because it does not fit the context window (the
    providers say so with one error kind, whatever the wire)."""
    return isinstance(exc, ContextWindowExceeded)


# --- the procedure ---------------------------------------------------------------------

Send = Callable[[Prompt, bool], Awaitable[tuple[int, ModelResponse]]]
"""Sends one compaction request (remote when the flag is true) and records it like any
other request; returns its index and the response."""


async def compact(
    *,
    prompt: Prompt,
    context: Sequence[Item],
    keep: int,
    settings: CompactionSettings,
    send: Send,
    remote: bool,
    reason: Reason,
    tokens_before: int,
) -> tuple[list[Item], Compaction]:
    """The new history for the thread whose next request would be `prompt`.

    `context` is what goes in front of the new history (the thread's context messages,
    later settings changes included); `keep` is how many leading items of `prompt.input`
    are context and must never be dropped.
    """
    history = list(prompt.input)
    requests: list[int] = []
    fallback: str | None = None
    if remote:
        try:
            resp, dropped = await _fitting(send, prompt, history, keep, (), True, requests)
            new = rebuild_remote(context, resp.items)
            return new, _done(
                "remote", reason, tokens_before, prompt, history, new, dropped, requests, None
            )
        except ModelError as exc:
            if is_context_overflow(exc):
                raise
            fallback = f"remote compaction failed, compacted locally: {exc}"
    ask = (it.message("user", settings.prompt),)
    extra = dict(prompt.extra)
    cap = extra.get("max_output_tokens")
    if isinstance(cap, int) and cap < SUMMARY_OUTPUT_TOKENS:
        extra["max_output_tokens"] = SUMMARY_OUTPUT_TOKENS  # not part of the cached prefix
    local = replace(prompt, tool_choice="none", extra=extra)
    resp, dropped = await _fitting(send, local, history, keep, ask, False, requests)
    new = rebuild_local(context, history, summary_text(resp.items), settings.user_message_tokens)
    return new, _done(
        "local", reason, tokens_before, prompt, history, new, dropped, requests, fallback
    )


async def _fitting(
    send: Send,
    prompt: Prompt,
    history: list[Item],
    keep: int,
    tail: Sequence[Item],
    remote: bool,
    requests: list[int],
) -> tuple[ModelResponse, int]:
    """Send `history + tail`; on overflow drop the oldest items and send again."""
    body = history
    while True:
        try:
            index, resp = await send(replace(prompt, input=(*body, *tail)), remote)
            requests.append(index)
            return resp, len(history) - len(body)
        except ModelError as exc:
            if not is_context_overflow(exc):
                raise
            shorter = drop_oldest(body, keep)
            if shorter is None:
                raise ContextWindowExceeded(
                    f"even the compaction request does not fit the context window: {exc}"
                ) from exc
            body = shorter


def _done(
    kind: Kind,
    reason: Reason,
    tokens_before: int,
    prompt: Prompt,
    history: Sequence[Item],
    new: Sequence[Item],
    dropped: int,
    requests: Sequence[int],
    fallback: str | None,
) -> Compaction:
    after = estimate_tokens(
        head_bytes(prompt.instructions, prompt.tools) + sum(i.nbytes for i in new)
    )
    return Compaction(
        kind,
        reason,
        tokens_before,
        after,
        len(history),
        len(new),
        dropped,
        tuple(requests),
        fallback,
    )
