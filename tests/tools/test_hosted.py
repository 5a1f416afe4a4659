"""Tests for runner.tools.hosted: which providers can run `web_search`, and the tool that
the runner itself never runs."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext
from runner.tools.hosted import NO_WEB_SEARCH, WebSearchTool, web_search_problem


@pytest.mark.parametrize("provider", sorted(NO_WEB_SEARCH))
def test_a_builtin_local_server_is_refused_by_name(provider: str) -> None:
    said = web_search_problem(provider, "responses", builtin=True)
    assert said is not None and f"built-in {provider!r} provider" in said
    # The same name defined under `providers:` is the user's own endpoint.
    assert web_search_problem(provider, "responses", builtin=False) is None


def test_chat_completions_has_no_hosted_tools_whoever_serves_it() -> None:
    for builtin in (True, False):
        said = web_search_problem("openai", "chat", builtin=builtin)
        assert said is not None and "wire_api: chat" in said
    assert web_search_problem("openai", "responses", builtin=True) is None
    assert web_search_problem("azure", "responses", builtin=True) is None


def test_the_tool_is_a_hosted_spec_and_a_call_of_it_is_an_error(tmp_path: Path) -> None:
    tool = WebSearchTool()
    assert tool.spec() == {"type": "web_search"}
    call = ToolCall("c", "web_search", '{"query": "x"}')
    assert tool.started(call) is None
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), tmp_path), env={})
    res = anyio.run(tool.run, call, ctx)
    assert not res.success and "run by the model provider" in res.output
    assert res.event is None
