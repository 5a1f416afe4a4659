"""The wiring of one run (runner/wiring.py): model options split into the request's
fields, the tools a run is offered, what a container run is told, the sandbox policy of
its commands, and tool output redacted before the model reads it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner.config import ModelOptions
from runner.redact import Redactor
from runner.sandbox.env import child_env
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext
from runner.wiring import Redacting, container_note, make_tools, sampling, sandbox_policy
from tests.support.records import a_task


@pytest.mark.parametrize(
    ("options", "extra", "reasoning", "text"),
    [
        ({}, {}, None, None),
        ({"temperature": 0.0, "seed": 7}, {"temperature": 0.0, "seed": 7}, None, None),
        (
            {"top_p": 0.5, "max_output_tokens": 99},
            {"top_p": 0.5, "max_output_tokens": 99},
            None,
            None,
        ),
        ({"reasoning_effort": "low"}, {}, {"effort": "low"}, None),
        (
            {"reasoning_effort": "high", "reasoning_summary": "auto"},
            {},
            {"effort": "high", "summary": "auto"},
            None,
        ),
        ({"reasoning_effort": "high", "reasoning_summary": "none"}, {}, {"effort": "high"}, None),
        ({"reasoning_summary": "auto"}, {}, None, None),
        ({"verbosity": "low"}, {}, None, {"verbosity": "low"}),
    ],
)
def test_model_options_become_the_requests_fields(
    options: dict[str, object], extra: dict[str, object], reasoning: object, text: object
) -> None:
    """Unset options are left out, never sent as null: a server's default stays its own.
    A summary without an effort is not sent (there is no `reasoning` to hang it on)."""
    assert sampling(ModelOptions.model_validate(options)) == (extra, reasoning, text)


def test_the_tools_offered_follow_the_task(tmp_path: Path) -> None:
    names = [t.name for t in make_tools(a_task(tmp_path))]
    assert "shell" in names and "apply_patch" in names and "update_plan" in names
    specs = [t.spec() for t in make_tools(a_task(tmp_path))]
    assert json.dumps(specs) == json.dumps([t.spec() for t in make_tools(a_task(tmp_path))]), (
        "the tool definitions are part of the cached prefix: the same bytes every time"
    )


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ("{backend: podman, image: 'x:1'}", "a podman container with no network"),
        ("{backend: docker, image: 'x:1', network: bridge}", "a docker container with network"),
        ("{backend: kubernetes, image: 'x:1'}", "a Kubernetes Pod with no network"),
    ],
)
def test_a_container_run_is_told_where_its_commands_run(
    tmp_path: Path, environment: str, said: str
) -> None:
    note = container_note(a_task(tmp_path, f", environment: {environment}"))
    assert said in note and "yours to change" in note


def test_the_policy_hides_the_other_runs_and_what_the_batch_adds(tmp_path: Path) -> None:
    cwd = tmp_path / "runs" / "a"
    cwd.mkdir(parents=True)
    out = tmp_path / "out"
    policy = sandbox_policy(a_task(tmp_path), cwd, hidden=[out])
    assert policy.workspace == cwd
    assert cwd.parent in policy.hidden and out in policy.hidden


@pytest.mark.anyio
async def test_tool_output_is_redacted_before_the_model_reads_it(tmp_path: Path) -> None:
    """A real shell command (no sandbox: it can read the runner's environment) prints a
    secret; the model gets it masked, and the tool's own name and spec are unchanged."""
    secret = "sk-" + "q7" * 12
    (shell,) = [t for t in make_tools(a_task(tmp_path)) if t.name == "shell"]
    tool = Redacting(shell, Redactor([secret]))
    assert tool.name == "shell" and tool.spec() == shell.spec()
    ctx = ToolContext(
        environment=LocalEnvironment(LocalExecutor(), tmp_path),
        env={**child_env(os.environ), "LEAKED": secret},
    )
    call = ToolCall("c1", "shell", json.dumps({"command": ["bash", "-c", "echo $LEAKED"]}))
    result = await tool.run(call, ctx)
    assert secret not in result.output and result.output.strip(), result.output
    plain = await shell.run(call, ctx)
    assert secret in plain.output, "without the wrapper the command's output holds it"
