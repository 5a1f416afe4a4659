"""One bounded run of an engine's or kubectl's client (runner/sandbox/cli_call.py): the
cap on what is kept, the time limit that kills the client and what it started, the
polite stop first with a grace, and a client that is not there. Real processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import EnvironmentFault
from runner.sandbox.cli_call import Bounded, run_once
from tests.support.procs import ends_soon

pytestmark = pytest.mark.anyio

ENV = {"PATH": "/usr/bin:/bin"}


async def _killed(argv: list[str], **more: Any) -> int | None:
    """`argv` run as a client of the tests, past a 0.3 s limit: its exit code or None."""
    return await run_once(
        argv,
        ENV,
        stdin=None,
        stdout=Bounded(10),
        stderr=Bounded(10),
        limit=0.3,
        kill_group=True,
        what="the test client",
        **more,
    )


def test_bounded_keeps_the_head_whole_and_counts_the_rest() -> None:
    out = Bounded(5)
    for chunk in (b"abc", b"defg", b"", b"hi"):
        out.add(chunk)
    assert (bytes(out.data), out.over) == (b"abcde", 4)
    none = Bounded(0)
    none.add(b"xyz")
    assert (bytes(none.data), none.over) == (b"", 3)


async def test_the_exit_code_the_output_and_stdin_fed_in_pieces() -> None:
    out, err = Bounded(1 << 20), Bounded(100)
    data = bytes(range(256)) * 1000
    code = await run_once(
        ["sh", "-c", "cat; echo oops >&2; exit 4"],
        ENV,
        stdin=data,
        stdout=out,
        stderr=err,
        limit=10,
        kill_group=True,
        what="the test client",
    )
    assert (code, bytes(out.data), bytes(err.data)) == (4, data, b"oops\n")


async def test_a_client_past_its_limit_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pid_file = tmp_path / "helper"
    code = await _killed(["sh", "-c", f"sleep 30 & echo $! > {pid_file}; wait"])
    assert code is None
    helper = int(pid_file.read_text())
    assert ends_soon(helper)


async def test_with_a_grace_the_client_is_asked_to_stop_first(tmp_path: Path) -> None:
    said = tmp_path / "said"
    code = await _killed(
        ["sh", "-c", f"trap 'echo term > {said}; exit 0' TERM; sleep 30 & wait"], grace_s=5
    )
    assert code is None
    assert said.read_text() == "term\n"


async def test_a_client_that_cannot_start_names_what_it_was(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentFault, match=r"cannot run kubectl: No such file"):
        await run_once(
            [str(tmp_path / "kubectl")],
            ENV,
            stdin=None,
            stdout=Bounded(10),
            stderr=Bounded(10),
            limit=10,
            kill_group=False,
            what="kubectl",
        )
