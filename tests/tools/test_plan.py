"""Tests for runner.tools.plan: a model's checklist parsed into `todo_list` items, and
every malformed one refused with a message the model can act on."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from runner.errors import ToolArgumentsError, ToolError
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext
from runner.tools.plan import SPEC, STATUSES, PlanTool, parse_plan


def test_a_plan_becomes_items_done_or_not() -> None:
    raw = json.dumps(
        {
            "explanation": "why",
            "plan": [
                {"step": "read", "status": "completed"},
                {"step": "fix", "status": "in_progress"},
                {"step": "test", "status": "pending"},
            ],
        }
    )
    assert parse_plan(raw) == [
        {"text": "read", "completed": True},
        {"text": "fix", "completed": False},
        {"text": "test", "completed": False},
    ]
    assert parse_plan('{"plan": []}') == []


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("[1]", "`plan` must be an array"),
        ('{"plan": "do it"}', "`plan` must be an array"),
        ("{", "arguments are not valid JSON"),
        ('{"plan": ' + "[" * 100_000 + "]" * 100_000 + "}", "arguments are not valid JSON"),
        ('{"plan": [{"step": "a", "status": "done"}]}', "needs a `step` string and a `status`"),
        ('{"plan": [{"step": 1, "status": "pending"}]}', "needs a `step` string and a `status`"),
        ('{"plan": ["a"]}', "needs a `step` string and a `status`"),
        (
            '{"plan": [{"step": "a", "status": "in_progress"}, '
            '{"step": "b", "status": "in_progress"}]}',
            "at most one step may be in_progress",
        ),
    ],
)
def test_a_bad_plan_is_refused_with_why(raw: str, said: str) -> None:
    with pytest.raises(ToolArgumentsError, match=said) as info:
        parse_plan(raw)
    assert isinstance(info.value, ToolError)


def test_the_spec_offers_exactly_the_statuses_parse_plan_takes() -> None:
    item = SPEC["parameters"]["properties"]["plan"]["items"]
    said = item["properties"]["status"]["description"]
    assert said == "One of: " + ", ".join(STATUSES)
    assert PlanTool().spec() is SPEC
    assert PlanTool().started(ToolCall("c", "update_plan", "{}")) is None


def test_the_tool_keeps_the_plan_and_answers_a_bad_one(tmp_path: Path) -> None:
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), tmp_path), env={})
    good = ToolCall("c", "update_plan", '{"plan": [{"step": "a", "status": "pending"}]}')
    res = anyio.run(PlanTool().run, good, ctx)
    items = [{"text": "a", "completed": False}]
    assert (res.output, res.success) == ("Plan updated", True)
    assert res.event == {"type": "todo_list", "items": items}
    assert ctx.state["plan"] == items
    bad = anyio.run(PlanTool().run, ToolCall("c", "update_plan", "[]"), ctx)
    assert not bad.success and bad.output.startswith("invalid plan: `plan` must be an array")
    assert ctx.state["plan"] == items  # a bad call leaves the last good plan
