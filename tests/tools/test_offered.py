"""Tests for runner.tools.offered: the built-in tools a run gets, in Codex's order (part of
the prompt's cached prefix), and how the apply_patch form changes the shell's output."""

from __future__ import annotations

import json
from typing import Literal

import pytest

from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.offered import offered_tools
from runner.tools.shell import ShellTool

ALL = ("apply_patch", "update_plan", "shell")


def test_the_order_is_codexs_whatever_order_the_names_come_in() -> None:
    tools = offered_tools(ALL, apply_patch_tool="function", shell_timeout_ms=10, web_search=True)
    assert [t.name for t in tools] == ["shell", "update_plan", "apply_patch", "web_search"]
    again = offered_tools(
        ALL[::-1], apply_patch_tool="function", shell_timeout_ms=10, web_search=True
    )
    assert json.dumps([t.spec() for t in tools]) == json.dumps([t.spec() for t in again])


@pytest.mark.parametrize(
    ("names", "web_search", "offered"),
    [
        ((), False, []),
        ((), True, ["web_search"]),
        (("shell",), False, ["shell"]),
        (("update_plan", "unknown"), False, ["update_plan"]),
    ],
)
def test_only_the_named_tools_are_offered(
    names: tuple[str, ...], web_search: bool, offered: list[str]
) -> None:
    tools = offered_tools(
        names, apply_patch_tool="function", shell_timeout_ms=10, web_search=web_search
    )
    assert [t.name for t in tools] == offered


@pytest.mark.parametrize(
    ("form", "names", "plain"),
    [
        ("freeform", ALL, True),
        ("function", ALL, False),
        ("freeform", ("shell",), False),  # plain output only beside the freeform patch tool
    ],
)
def test_the_shell_answers_plainly_only_beside_a_freeform_apply_patch(
    form: Literal["function", "freeform"], names: tuple[str, ...], plain: bool
) -> None:
    tools = offered_tools(names, apply_patch_tool=form, shell_timeout_ms=2500, web_search=False)
    shell = tools[0]
    assert isinstance(shell, ShellTool)
    assert (shell.plain_output, shell.default_timeout_ms) == (plain, 2500)
    patch = [t for t in tools if isinstance(t, ApplyPatchTool)]
    if patch:
        assert (patch[0].spec()["type"] == "custom") is (form == "freeform")
