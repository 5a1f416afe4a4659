"""The prefix audit names the request, the item and the reason of every cache break."""

from __future__ import annotations

from runner import items as it
from runner.providers import Prompt
from runner.usage import COMPACTION, PrefixAudit, ideal_cached_tokens


def prompt(
    items: list[it.Item], *, instructions: str = "be good", tools: tuple[str, ...] = ("shell",)
) -> Prompt:
    return Prompt(
        model="m",
        instructions=instructions,
        input=tuple(items),
        tools=[{"type": "function", "name": n} for n in tools],
        prompt_cache_key="k",
    )


def test_exact_extension_and_breaks() -> None:
    a = PrefixAudit()
    h = [it.message("developer", "rules"), it.message("user", "task")]
    first = a.check(prompt(h))
    assert first.extends_previous and first.ideal_cache_ratio is None
    out = [
        it.Item(
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "c",
                "name": "shell",
                "arguments": "{}",
            }
        )
    ]
    h2 = h + out + [it.function_call_output("c", "ok")]
    rec = a.check(prompt(h2), out)
    assert rec.extends_previous and rec.reused_items == 3
    assert rec.ideal_cache_ratio is not None and 0.5 < rec.ideal_cache_ratio < 1
    # An item rewritten (here: the call's arguments re-serialised differently).
    rewritten = [
        h2[0],
        h2[1],
        it.Item({"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{ }"}),
        h2[3],
        it.message("user", "more"),
    ]
    rec = a.check(prompt(rewritten))
    assert not rec.extends_previous
    assert rec.break_index == 2 and rec.break_reason == "item 2 rewritten (function_call)"
    # Tools changed and instructions changed.
    h3 = rewritten + [it.message("user", "again")]
    rec = a.check(prompt(h3, tools=("shell", "apply_patch")))
    assert (rec.extends_previous, rec.break_reason) == (False, "tools changed")
    rec = a.check(
        prompt(h3 + [it.message("user", "x")], instructions="other", tools=("shell", "apply_patch"))
    )
    assert (rec.extends_previous, rec.break_reason) == (False, "instructions changed")
    # History shortened (what a compaction does).
    rec = a.check(prompt(h3[:2], instructions="other", tools=("shell", "apply_patch")))
    assert (rec.extends_previous, rec.break_reason) == (False, "history shortened")


def test_ideal_share_counts_what_a_prefix_cache_can_serve() -> None:
    """Bytes as the server sees them: the instructions as a JSON string, each tool, each
    item; of those, the ones the previous request already sent (not its answer)."""
    a = PrefixAudit()
    h = [it.message("developer", "rules"), it.message("user", "tâche")]
    p1 = prompt(h)
    a.check(p1)
    call = it.Item({"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"})
    h2 = [*h, call, it.function_call_output("c", "ok")]
    rec = a.check(prompt(h2), [call])
    head = len(it.dumps("be good").encode()) + len(
        it.dumps({"type": "function", "name": "shell"}).encode()
    )
    sent_before = head + sum(len(i.wire.encode()) for i in h)
    total = head + sum(len(i.wire.encode()) for i in h2)
    assert rec.extends_previous and rec.reused_items == 3
    assert rec.ideal_cache_ratio == round(sent_before / total, 4)
    assert ideal_cached_tokens(1000, rec) == round(1000 * sent_before / total)


def test_break_after_compaction_is_expected() -> None:
    a = PrefixAudit()
    h = [
        it.message("developer", "rules"),
        it.message("user", "task"),
        it.message("assistant", "long work"),
    ]
    a.check(prompt(h))
    rebuilt = [h[0], h[1], it.message("user", "summary")]
    rec = a.check(prompt(rebuilt), after_compaction=True)
    assert (rec.extends_previous, rec.break_index, rec.break_reason) == (False, 2, COMPACTION)
    # The shared head and the two kept items are what the cache can still serve.
    assert rec.ideal_cache_ratio is not None and 0.5 < rec.ideal_cache_ratio < 1
    # The flag only explains a break; a request that extends stays unbroken.
    more = [*rebuilt, it.message("user", "go on")]
    rec = a.check(prompt(more), after_compaction=True)
    assert rec.extends_previous and rec.break_reason is None
    # And the next break without a compaction is a fault again.
    rec = a.check(prompt([more[0], it.message("user", "edited"), *more[2:]]))
    assert rec.break_reason == "item 1 rewritten (message)"
