"""Tests for runner.reports.task_drift: which task ids ran something else on the two sides
of a comparison, read from the recorded check command and prompt file."""

from __future__ import annotations

from runner.reports.model import CheckReport, RunInputs, RunReport
from runner.reports.task_drift import changed_tasks
from tests.support.reports import task


def named(n: int) -> str:
    return f"inputs/{n:064x}.json"


def ran(
    task_id: str, *, check: str | None = None, prompt: int | None = None, variant: str | None = None
) -> RunReport:
    inputs = (
        None
        if prompt is None
        else RunInputs(prompt=named(prompt), instructions=named(0), tools=named(0))
    )
    checked = (
        None
        if check is None
        else CheckReport(command=check, exit_code=0, passed=True, duration_s=0.1, output_tail="")
    )
    return task(task_id, "p/m", "completed", variant=variant).model_copy(
        update={"check": checked, "inputs": inputs}
    )


def test_an_edited_check_or_prompt_is_named_in_base_order() -> None:
    base = [ran("z", check="make", prompt=1), ran("a", check="make", prompt=2), ran("m", prompt=3)]
    new = [ran("a", check="make test", prompt=2), ran("m", prompt=4), ran("z", prompt=1)]
    assert changed_tasks(base, new, by_variant=True) == ["a", "m"]
    assert changed_tasks(base, base, by_variant=True) == []


def test_prompts_are_not_compared_when_variants_are() -> None:
    """Comparing variant A with variant B: their prompts differ on purpose."""
    base = [ran("a", check="true", prompt=1, variant="terse")]
    new = [ran("a", check="true", prompt=2, variant="chatty")]
    assert changed_tasks(base, new, by_variant=False) == []
    assert changed_tasks(base, [ran("a", check="false", prompt=2)], by_variant=False) == ["a"]


def test_prompts_are_compared_variant_by_variant() -> None:
    base = [ran("a", prompt=1, variant="terse"), ran("a", prompt=2, variant="chatty")]
    same = [ran("a", prompt=2, variant="chatty"), ran("a", prompt=1, variant="terse")]
    assert changed_tasks(base, same, by_variant=True) == []
    swapped = [ran("a", prompt=2, variant="terse"), ran("a", prompt=1, variant="chatty")]
    assert changed_tasks(base, swapped, by_variant=True) == ["a"]


def test_a_side_that_recorded_nothing_is_no_evidence() -> None:
    base = [ran("a", check="make", prompt=1), ran("b", check="x")]
    new = [ran("a"), task("b", "p/m", "skipped"), ran("c", check="y", prompt=9)]
    assert changed_tasks(base, new, by_variant=True) == []
