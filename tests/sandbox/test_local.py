"""The unsandboxed executor (runner/sandbox/local.py): a command runs with the host's files
under the supervisor, with the environment it is given and the login PATH kept; what it
leaves running ends with it. Attacks through it are in tests/security."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.sandbox.local import LocalExecutor
from tests.support.procs import alive

pytestmark = pytest.mark.anyio

ENV = {"PATH": "/usr/bin:/bin", "ONLY": "this"}


async def test_argv_cwd_env_stdin_and_the_exit_code(tmp_path: Path) -> None:
    done = await LocalExecutor().run(
        ["sh", "-c", 'pwd; echo "$ONLY"; cat; exit 5'],
        cwd=tmp_path,
        timeout_s=20,
        env=ENV,
        stdin=b"fed\n",
    )
    assert (done.exit_code, done.output) == (5, f"{tmp_path}\nthis\nfed\n".encode())
    (tmp_path / "on-host").write_text("host file\n")
    seen = await LocalExecutor().run(["cat", "on-host"], cwd=tmp_path, timeout_s=20, env=ENV)
    assert seen.output == b"host file\n"


async def test_a_login_shell_keeps_the_path_it_was_given(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    env = {**ENV, "PATH": f"{tools}:/usr/bin:/bin", "HOME": str(tmp_path)}
    (tmp_path / ".profile").write_text("PATH=/usr/bin:/bin\n")
    done = await LocalExecutor().run(
        ["bash", "-lc", 'echo "$PATH"'], cwd=tmp_path, timeout_s=20, env=env
    )
    assert done.output.decode().split(":")[0] == str(tools)


async def test_a_daemon_the_command_left_is_gone_when_it_returns(tmp_path: Path) -> None:
    """(On a timeout too: tests/security/test_full_access_daemons.py.)"""
    script = "setsid -f sh -c 'echo $$ > d; exec sleep 300'; while [ ! -s d ]; do :; done"
    done = await LocalExecutor().run(["sh", "-c", script], cwd=tmp_path, timeout_s=20, env=ENV)
    assert done.exit_code == 0
    assert not alive(int((tmp_path / "d").read_text()))


async def test_a_missing_program_is_127_and_the_output_cap_holds(tmp_path: Path) -> None:
    done = await LocalExecutor().run(["no-such-tool-here"], cwd=tmp_path, timeout_s=20, env=ENV)
    assert done.exit_code == 127 and b"no-such-tool-here" in done.output
    big = await LocalExecutor().run(
        ["head", "-c", "100000", "/dev/zero"], cwd=tmp_path, timeout_s=20, env=ENV, output_cap=100
    )
    assert (big.exit_code, big.truncated_bytes) == (0, 99_900)
