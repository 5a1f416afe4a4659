"""Tests for runner.tools.shell: the arguments a model may send, the output form it gets
back (cut head and tail on UTF-8 boundaries), and the login environment taken once per
thread, run with real commands on the host (`LocalExecutor`)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from runner.errors import ToolArgumentsError
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext
from runner.tools.shell import (
    MAX_TIMEOUT_MS,
    ShellArgs,
    ShellTool,
    format_output,
    login_argv,
    truncate_middle,
)


def host(tmp_path: Path, home: Path | None = None) -> ToolContext:
    """The workspace `tmp_path/work`, commands run unsandboxed with a bare environment."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home or tmp_path)}
    return ToolContext(environment=LocalEnvironment(LocalExecutor(), work), env=env)


def call(args: object) -> ToolCall:
    return ToolCall("c1", "shell", args if isinstance(args, str) else json.dumps(args))


def test_plain_output_form() -> None:
    assert format_output(2, 1.234, "oops\n", plain=True) == (
        "Exit code: 2\nWall time: 1.2 seconds\nOutput:\noops\n"
    )
    long = "x" * 20_000
    text = format_output(0, 0.0, long, 1, plain=True)
    assert text.startswith("Exit code: 0\nWall time: 0.0 seconds\nTotal output lines: 1\nOutput:\n")
    assert json.loads(format_output(0, 0.04, "ok")) == {
        "output": "ok",
        "metadata": {"exit_code": 0, "duration_seconds": 0.0},
    }


def test_the_structured_form_counts_lines_of_a_cut_output() -> None:
    out = json.loads(format_output(1, 2.0, "line\n" * 5000))
    assert out["output"].startswith("Total output lines: 5001\n\nline\n")
    assert out["metadata"] == {"exit_code": 1, "duration_seconds": 2.0}


def test_truncate_middle_keeps_head_and_tail_on_utf8_boundaries() -> None:
    assert truncate_middle("short", 10) == ("short", False)
    text = "é" * 10 + "MIDDLE" + "ü" * 10  # 46 bytes
    cut, truncated = truncate_middle(text, 9)
    # 4 bytes a side hold two whole characters each; the half one is dropped, not mangled.
    assert truncated and cut == "éé…22 chars truncated…üü"
    cut.encode("utf-8")


def test_a_string_command_is_run_by_a_login_shell_and_the_timeout_is_capped() -> None:
    args = ShellArgs('{"command": "ls | wc -l", "timeout_ms": 1e300}', 5000)
    assert args.command == ["bash", "-lc", "ls | wc -l"]
    assert args.timeout_ms == MAX_TIMEOUT_MS
    assert ShellArgs('{"command": ["ls"], "timeout": 7}', 5000).timeout_ms == 7
    assert ShellArgs('{"command": ["ls"]}', 5000).timeout_ms == 5000


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ("", "`command` must be a non-empty array of strings"),
        ("[1]", "arguments must be a JSON object"),
        ("{oops", "arguments are not valid JSON"),
        ('{"command": []}', "`command` must be a non-empty array of strings"),
        ('{"command": ["ls", 3]}', "`command` must be a non-empty array of strings"),
        ('{"command": ["ls\\u0000x"]}', "`command` must not contain NUL bytes"),
        ('{"command": ["ls"], "workdir": 3}', "`workdir` must be a string"),
        ('{"command": ["ls"], "timeout_ms": true}', "`timeout_ms` must be a positive number"),
        ('{"command": ["ls"], "timeout_ms": NaN}', "`timeout_ms` must be a positive number"),
        ('{"command": ["ls"], "timeout_ms": -1}', "`timeout_ms` must be a positive number"),
        ('{"command": ["ls"], "timeout_ms": "9"}', "`timeout_ms` must be a positive number"),
    ],
)
def test_bad_arguments_say_what_is_wrong(raw: str, said: str) -> None:
    with pytest.raises(ToolArgumentsError, match=said):
        ShellArgs(raw, 1000)


def test_started_shows_the_command_quoted_or_the_patch_it_carries() -> None:
    tool = ShellTool()
    assert tool.started(call({"command": ["echo", "a b"]})) == {
        "type": "command_execution",
        "command": "echo 'a b'",
        "aggregated_output": "",
        "exit_code": None,
        "status": "in_progress",
    }
    bad = tool.started(call("{not json"))
    assert bad is not None and bad["command"] == "{not json"
    patch = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch"
    script = f"cd src && apply_patch <<'EOF'\n{patch}\nEOF"
    started = tool.started(call({"command": ["bash", "-lc", script], "workdir": "pkg"}))
    assert started == {
        "type": "file_change",
        "changes": [{"path": "pkg/src/x.txt", "kind": "add"}],
        "status": "in_progress",
    }


def test_a_failing_command_is_a_failed_call_with_its_output(tmp_path: Path) -> None:
    ctx = host(tmp_path)
    (tmp_path / "work" / "sub").mkdir()
    argv = ["sh", "-c", "pwd; echo err >&2; exit 3"]
    res = anyio.run(ShellTool().run, call({"command": argv, "workdir": "sub"}), ctx)
    out = json.loads(res.output)
    assert out["output"] == f"{tmp_path / 'work' / 'sub'}\nerr\n"
    assert out["metadata"]["exit_code"] == 3
    assert not res.success and res.event is not None
    assert (res.event["status"], res.event["exit_code"]) == ("failed", 3)
    invalid = anyio.run(ShellTool().run, call({"command": "ls", "timeout_ms": 0}), ctx)
    assert not invalid.success
    assert invalid.output == "invalid shell call: `timeout_ms` must be a positive number"


def test_apply_patch_typed_into_the_shell_is_applied_not_run(tmp_path: Path) -> None:
    ctx = host(tmp_path)
    patch = "*** Begin Patch\n*** Add File: made.txt\n+hello\n*** End Patch"
    tool = ShellTool(plain_output=True)
    res = anyio.run(tool.run, call({"command": ["apply_patch", patch]}), ctx)
    assert res.success and res.output.startswith("Exit code: 0\n")
    assert (tmp_path / "work" / "made.txt").read_text() == "hello\n"
    assert res.event == {
        "type": "file_change",
        "changes": [{"path": "made.txt", "kind": "add"}],
        "status": "completed",
    }


def test_the_login_environment_is_taken_once_and_reused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text(
        'echo read >> "$HOME/reads"\nexport FROM_PROFILE=yes\nhi() { echo "hi $1"; }\n'
    )
    ctx = host(tmp_path, home)
    tool = ShellTool()
    for _ in range(2):
        res = anyio.run(tool.run, call({"command": 'echo "$FROM_PROFILE"; hi you'}), ctx)
        assert json.loads(res.output)["output"] == "yes\nhi you\n"
    assert (home / "reads").read_text() == "read\n"
    env = ctx.state["login_env"]
    assert "FROM_PROFILE=yes" in env and not any(e.startswith("PWD=") for e in env)
    argv = anyio.run(login_argv, ["bash", "-lc", "true"], ctx)
    assert argv[:2] == ["env", "-i"] and argv[-3:] == ["bash", "-c", "true"]


def test_a_profile_that_fails_leaves_commands_as_asked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bash_profile").write_text("exit 4\n")
    ctx = host(tmp_path, home)
    assert anyio.run(login_argv, ["bash", "-lc", "true"], ctx) == ["bash", "-lc", "true"]
    assert ctx.state["login_env"] is None
    # Not a login shell: no snapshot is taken at all.
    other = host(tmp_path, home)
    assert anyio.run(login_argv, ["bash", "-c", "true"], other) == ["bash", "-c", "true"]
    assert "login_env" not in other.state
