"""Two sides of a comparison that name the same task ids may still have run different
tasks: another task file, or an edited prompt or check. Such rows compare unlike with
unlike, so the comparison says which tasks changed, read from what each run recorded: the
stored prompt (`inputs.prompt`, a hash of the text sent) and the check command. Prompts
are compared variant by variant, and not at all when variants are what is compared (a variant's
`prompt_template` changes the prompt on purpose)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runner.reports.model import RunReport


def changed_tasks(
    base: Sequence[RunReport], new: Sequence[RunReport], *, by_variant: bool
) -> list[str]:
    """Task ids (first-seen order) whose recorded prompt or check differs between the
    sides; a side that recorded nothing for a task (older reports, runs that never
    started) is no evidence either way."""
    keys: list[Callable[[RunReport], str | None]] = [
        lambda t: t.check.command if t.check is not None else None
    ]
    if by_variant:
        keys.append(lambda t: t.inputs.prompt if t.inputs is not None else None)
    changed: dict[str, None] = {}
    for value in keys:
        x, y = _values(base, value, by_variant), _values(new, value, by_variant)
        for key in x.keys() & y.keys():
            if x[key] != y[key]:
                changed[key[0]] = None
    order = list(dict.fromkeys(t.id for t in base))
    return sorted(changed, key=order.index)


def _values(
    runs: Sequence[RunReport], value: Callable[[RunReport], str | None], by_variant: bool
) -> dict[tuple[str, str], frozenset[str]]:
    """`(task id, variant or "")` -> the values its runs recorded (none: left out)."""
    out: dict[tuple[str, str], set[str]] = {}
    for t in runs:
        v = value(t)
        if v is not None:
            out.setdefault((t.id, (t.variant or "") if by_variant else ""), set()).add(v)
    return {k: frozenset(v) for k, v in out.items()}
