"""One child process to completion (runner/sandbox/process.py): the head+tail capture,
exit codes, the timeout that kills the whole group, the watch that stops a command, and
stdin. Real processes, each a few milliseconds."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from runner.sandbox.process import STOPPED_EXIT, Capture, run_process
from tests.support.procs import ends_soon

pytestmark = pytest.mark.anyio


def test_capture_keeps_head_and_tail_and_says_how_much_fell_between() -> None:
    cap = Capture(8)
    for chunk in (b"ab", b"cdefgh", b"", b"ijkl\nmn"):
        cap.add(chunk)
    assert cap.value() == b"abcd\n[... 7 bytes dropped ...]\nl\nmn"
    assert (cap.dropped, cap.newlines, cap.last) == (7, 1, b"n")


def test_capture_under_its_cap_is_the_stream_itself() -> None:
    cap = Capture(100)
    cap.add(b"one\n")
    cap.add(b"two\n")
    assert (cap.value(), cap.dropped, cap.newlines) == (b"one\ntwo\n", 0, 2)


async def test_output_exit_code_lines_and_a_signal_as_a_shell_says_it(tmp_path: Path) -> None:
    done = await run_process(
        ["sh", "-c", "pwd; printf 'no end'; exit 3"],
        cwd=tmp_path,
        timeout_s=10,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (done.exit_code, done.output) == (3, f"{tmp_path}\nno end".encode())
    assert (done.total_lines, done.timed_out, done.truncated_bytes) == (2, False, 0)
    killed = await run_process(
        ["sh", "-c", "kill -9 $$"], cwd=tmp_path, timeout_s=10, env={"PATH": "/usr/bin:/bin"}
    )
    assert killed.exit_code == 128 + 9


async def test_a_timeout_kills_the_group_and_gives_124(tmp_path: Path) -> None:
    pid_file = tmp_path / "child"
    done = await run_process(
        ["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"],
        cwd=tmp_path,
        timeout_s=0.3,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert (done.exit_code, done.timed_out) == (124, True)
    child = int(pid_file.read_text())
    assert ends_soon(child), "a child of the timed-out command lived on"


async def test_a_watch_that_returns_stops_the_command_with_its_reason(tmp_path: Path) -> None:
    async def watch() -> str:
        await anyio.sleep(0.05)
        return "disk cap reached"

    done = await run_process(
        ["sleep", "30"], cwd=tmp_path, timeout_s=10, env={"PATH": "/usr/bin:/bin"}, watch=watch
    )
    assert (done.exit_code, done.timed_out) == (STOPPED_EXIT, False)
    assert done.output.endswith(b"[stopped: disk cap reached]\n")


async def test_stdin_is_fed_and_closed_and_output_is_capped(tmp_path: Path) -> None:
    data = b"x" * 300_000
    done = await run_process(
        ["cat"], cwd=tmp_path, timeout_s=10, env={}, stdin=data, output_cap=1000
    )
    assert done.exit_code == 0
    assert done.truncated_bytes == 299_000
    assert done.output.startswith(b"x" * 500 + b"\n[... 299000 bytes dropped ...]\n")


async def test_a_program_that_is_not_there_is_127_with_its_name(tmp_path: Path) -> None:
    done = await run_process([str(tmp_path / "nothing")], cwd=tmp_path, timeout_s=10, env={})
    assert done.exit_code == 127
    assert b"failed to start" in done.output and b"nothing" in done.output
