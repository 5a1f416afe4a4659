"""`bash -lc` commands reuse one login environment per thread instead of re-reading the
profile each time, with the same result as running them literally, in every mode."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from runner.sandbox import make_executor
from runner.sandbox.env import child_env
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext
from runner.tools.shell import ShellTool
from tests.support.sandbox import Box

PROFILE = """\
echo "profile ran" >> "$HOME/sourced"
export GREETING="hello from the profile"
export PATH="$HOME/bin:$PATH"
greet() { echo "greet $1"; }
"""
PROBE = (
    'echo "$GREETING"; greet you; command -v tool-from-profile; tool-from-profile; '
    'echo "cwd=$PWD"; echo "home=$HOME"; echo "path=$PATH"; umask; ls -a | head -3'
)


def make_home(tmp_path: Path, profile: str = PROFILE) -> Path:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".bash_profile").write_text(profile)
    tool = home / "bin" / "tool-from-profile"
    tool.write_text("#!/bin/sh\necho tool ran\n")
    tool.chmod(0o755)
    return home


def output(raw: str) -> str:
    return str(json.loads(raw)["output"])


def run_tool(ctx: ToolContext, argv: list[str]) -> str:
    call = ToolCall("c", "shell", json.dumps({"command": argv}))
    return output(anyio.run(ShellTool().run, call, ctx).output)


def test_profile_is_read_once_and_results_are_unchanged(box: Box, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    env = child_env({**os.environ, "HOME": str(home)})
    executor = make_executor(box.policy("danger-full-access"))
    literal = anyio.run(
        lambda: executor.run(["bash", "-lc", PROBE], cwd=box.path, timeout_s=20, env=env)
    )
    (home / "sourced").unlink()
    ctx = ToolContext(environment=LocalEnvironment(executor, box.path), env=env)
    outs = [run_tool(ctx, ["bash", "-lc", PROBE]) for _ in range(3)]
    assert outs == [literal.output.decode()] * 3
    assert "greet you" in outs[0] and "tool ran" in outs[0]
    assert (home / "sourced").read_text() == "profile ran\n"  # once for the thread
    # A new thread (a new tool context) takes its own snapshot.
    run_tool(
        ToolContext(environment=LocalEnvironment(executor, box.path), env=env),
        ["bash", "-lc", "true"],
    )
    assert (home / "sourced").read_text().count("profile ran") == 2


@pytest.mark.parametrize("mode", ["workspace-write", "read-only"])
def test_sandboxed_commands_get_the_sandbox_login_environment(box: Box, mode: str) -> None:
    """The snapshot is taken inside the sandbox, with the sandbox's environment: nothing
    of the host's environment gets in that a literal `bash -lc` would not see."""
    env = child_env({**os.environ, "CANARY_VISIBLE": "x"})
    executor = make_executor(box.policy(mode))  # type: ignore[arg-type]
    probe = "env | sort | grep -v '^_='; echo $0; umask"
    literal = anyio.run(
        lambda: executor.run(["bash", "-lc", probe], cwd=box.path, timeout_s=20, env=env)
    )
    ctx = ToolContext(environment=LocalEnvironment(executor, box.path), env=env)
    ours = run_tool(ctx, ["bash", "-lc", probe])
    assert ours == literal.output.decode()
    assert "CANARY_VISIBLE" not in ours
    assert ctx.state["login_env"] is not None


def test_a_broken_profile_falls_back_to_literal_commands(box: Box, tmp_path: Path) -> None:
    home = make_home(tmp_path, PROFILE + "exit 7\n")
    env = child_env({**os.environ, "HOME": str(home)})
    ctx = ToolContext(
        environment=LocalEnvironment(make_executor(box.policy("danger-full-access")), box.path),
        env=env,
    )
    raw = anyio.run(
        ShellTool().run,
        ToolCall("c", "shell", json.dumps({"command": ["bash", "-lc", "echo never"]})),
        ctx,
    ).output
    assert ctx.state["login_env"] is None
    assert json.loads(raw)["metadata"]["exit_code"] == 7  # what bash -lc itself gives


def test_other_commands_run_as_given(box: Box, tmp_path: Path) -> None:
    home = make_home(tmp_path)
    env = child_env({**os.environ, "HOME": str(home)})
    ctx = ToolContext(
        environment=LocalEnvironment(make_executor(box.policy("danger-full-access")), box.path),
        env=env,
    )
    assert run_tool(ctx, ["bash", "-c", 'echo "[$GREETING]"']) == "[]\n"
    assert "login_env" not in ctx.state and not (home / "sourced").exists()


def test_unsandboxed_login_shell_keeps_path_and_an_earlier_bash_env(
    box: Box, tmp_path: Path
) -> None:
    """danger-full-access reads the user's own profile, which resets PATH: the command's
    PATH goes back in front (the profile's additions stay after it); a BASH_ENV the user
    had is still read; a shell that is not a login shell keeps the PATH it was given."""
    home = make_home(tmp_path, 'PATH="$HOME/bin:/usr/bin:/bin"\n')
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "mine").write_text("#!/bin/sh\necho mine\n")
    (tools / "mine").chmod(0o755)
    earlier = tmp_path / "earlier.sh"
    earlier.write_text("export FROM_EARLIER=yes\n")
    env = child_env(
        {
            **os.environ,
            "HOME": str(home),
            "PATH": f"{tools}:/usr/bin:/bin",
            "BASH_ENV": str(earlier),
        }
    )
    executor = make_executor(box.policy("danger-full-access"))

    def run(argv: list[str]) -> str:
        res = anyio.run(lambda: executor.run(argv, cwd=box.path, timeout_s=20, env=env))
        return res.output.decode()

    out = run(["bash", "-lc", "command -v mine; command -v tool-from-profile; echo $FROM_EARLIER"])
    assert out.splitlines() == [f"{tools}/mine", f"{home}/bin/tool-from-profile", "yes"]
    moved = run(["bash", "-c", 'PATH=/opt/elsewhere:$PATH bash -c "echo \\$PATH"'])
    assert moved.startswith("/opt/elsewhere:")
    assert sorted(p.name for p in home.iterdir()) == [".bash_profile", "bin"]
