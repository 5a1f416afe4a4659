"""The prefix audit names the request, the item and the reason of every cache break."""

from __future__ import annotations

from runner import items as it
from runner.providers import Prompt
from runner.usage import PrefixAudit


def prompt(items: list[it.Item], *, instructions: str = "be good",
           tools: tuple[str, ...] = ("shell",)) -> Prompt:
    return Prompt(model="m", instructions=instructions, input=tuple(items),
                  tools=[{"type": "function", "name": n} for n in tools], prompt_cache_key="k")


def test_exact_extension_and_breaks() -> None:
    a = PrefixAudit()
    h = [it.message("developer", "rules"), it.message("user", "task")]
    first = a.check(prompt(h))
    assert first.extends_previous and first.ideal_cache_ratio is None
    out = [it.Item({"type": "function_call", "id": "fc_1", "call_id": "c", "name": "shell",
                    "arguments": "{}"})]
    h2 = h + out + [it.function_call_output("c", "ok")]
    rec = a.check(prompt(h2), out)
    assert rec.extends_previous and rec.reused_items == 3
    assert rec.ideal_cache_ratio is not None and 0.5 < rec.ideal_cache_ratio < 1
    # An item rewritten (here: the call's arguments re-serialised differently).
    rewritten = [h2[0], h2[1], it.Item({"type": "function_call", "call_id": "c",
                                        "name": "shell", "arguments": "{ }"}), h2[3],
                 it.message("user", "more")]
    rec = a.check(prompt(rewritten))
    assert not rec.extends_previous
    assert rec.break_index == 2 and rec.break_reason == "item 2 rewritten (function_call)"
    # Tools changed and instructions changed.
    h3 = rewritten + [it.message("user", "again")]
    rec = a.check(prompt(h3, tools=("shell", "apply_patch")))
    assert (rec.extends_previous, rec.break_reason) == (False, "tools changed")
    rec = a.check(prompt(h3 + [it.message("user", "x")], instructions="other",
                         tools=("shell", "apply_patch")))
    assert (rec.extends_previous, rec.break_reason) == (False, "instructions changed")
    # History shortened (what a compaction does).
    rec = a.check(prompt(h3[:2], instructions="other", tools=("shell", "apply_patch")))
    assert (rec.extends_previous, rec.break_reason) == (False, "history shortened")
