"""`assert_cache_stable`: the failing check behind "every request extends the previous one".

Takes what a test has at hand: a whole `report.json` (dict), one task of it, its list of
requests, or the `RequestRecord`s of an `Outcome`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runner.usage import COMPACTION, RequestRecord, ideal_cached_tokens


@dataclass(frozen=True)
class _Req:
    where: str
    index: int
    extends: bool
    reason: str | None
    break_index: int | None
    input_tokens: int | None
    cached: int | None
    ideal: int | None


def _from_dict(where: str, r: Mapping[str, Any]) -> _Req:
    p, u = r["prefix"], r.get("usage")
    ideal = None
    if u is not None:
        ideal = u.get("ideal_cached_tokens")
        if ideal is None and p.get("ideal_cache_ratio") is not None:
            ideal = round(u["input_tokens"] * p["ideal_cache_ratio"])
    return _Req(
        where,
        r["index"],
        p["extends_previous"],
        p.get("break_reason"),
        p.get("break_index"),
        u["input_tokens"] if u else None,
        u["cached_tokens"] if u else None,
        ideal,
    )


def _from_record(r: RequestRecord) -> _Req:
    u = r.usage
    return _Req(
        "",
        r.index,
        r.prefix.extends_previous,
        r.prefix.break_reason,
        r.prefix.break_index,
        u.input_tokens if u else None,
        u.cached_tokens if u else None,
        ideal_cached_tokens(u.input_tokens, r.prefix) if u else None,
    )


def _threads(data: Any) -> list[list[_Req]]:
    if isinstance(data, Mapping) and ("runs" in data or "tasks" in data):
        # A report: `runs`, or `tasks` in a report written before the rename.
        return [_threads(t)[0] for t in data.get("runs", data.get("tasks", []))]
    if isinstance(data, Mapping):
        name = str(data.get("run") or data.get("id") or "")
        return [[_from_dict(name, r) for r in data["requests"]]]
    reqs: Sequence[Any] = data
    return [[_from_record(r) if isinstance(r, RequestRecord) else _from_dict("", r) for r in reqs]]


def cache_problems(data: Any, *, exact_cache: bool = True) -> list[str]:
    """Every request that breaks the prefix for another reason than a compaction, and, with
    `exact_cache` (a server that caches exact prefixes), every request whose cached tokens
    differ from the ideal (cached/ideal 1.00 to two places, or within two tokens), except
    right after a compaction."""
    problems: list[str] = []
    for thread in _threads(data):
        for r in thread[1:]:
            name = f"{r.where + ' ' if r.where else ''}request {r.index}"
            if not r.extends and r.reason != COMPACTION:
                problems.append(f"{name} breaks the prefix at item {r.break_index}: {r.reason}")
                continue
            if not exact_cache or not r.extends or not r.ideal or r.cached is None:
                continue
            # Servers count whole tokens: two tokens either way are rounding, not loss.
            if round(r.cached / r.ideal, 2) != 1.0 and abs(r.cached - r.ideal) > 2:
                problems.append(
                    f"{name}: cached {r.cached} of an ideal {r.ideal} tokens "
                    f"(cached/ideal {r.cached / r.ideal:.3f})"
                )
    return problems


def assert_cache_stable(data: Any, *, exact_cache: bool = True) -> None:
    problems = cache_problems(data, exact_cache=exact_cache)
    assert not problems, "prompt cache not stable:\n- " + "\n- ".join(problems)
