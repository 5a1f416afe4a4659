"""The helper a container keeps inside (runner/sandbox/inside.py), run here on the host as
the container runs it (`python3 -I -S -c <file>`) and spoken to in its frames: commands,
their output (merged or split), stdin, deadlines, what a command leaves running, and the
faults it answers instead of dying. Through real containers: test_container.py."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from runner.sandbox import inside
from tests.support.procs import alive

HELPER = Path(inside.__file__).read_text()


class Helper:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        assert proc.stdin is not None and proc.stdout is not None
        self.inp: IO[bytes] = proc.stdin
        self.out: IO[bytes] = proc.stdout

    def frame(self) -> tuple[bytes, bytes]:
        head = self.out.read(5)
        (size,) = struct.unpack(">I", head[1:])
        return head[:1], self.out.read(size)

    def ask(
        self, argv: list[str], *, stdin: bytes = b"", **req: Any
    ) -> tuple[dict[str, Any], dict[bytes, bytes]]:
        """The end's JSON, and each kind's output joined."""
        body = json.dumps({"argv": argv, "timeout": 20, "stdin": len(stdin), **req}).encode()
        self.inp.write(struct.pack(">I", len(body)) + body + stdin)
        self.inp.flush()
        got: dict[bytes, bytes] = {}
        while True:
            kind, data = self.frame()
            if kind == b"x":
                return json.loads(data), got
            got[kind] = got.get(kind, b"") + data


@pytest.fixture
def helper(tmp_path: Path) -> Iterator[Helper]:
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "FROM_IMAGE": "kept"},
    )
    h = Helper(proc)
    try:
        assert h.frame() == (b"R", b"")
        yield h
    finally:
        proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()


def test_a_command_runs_where_and_with_what_it_is_asked(helper: Helper, tmp_path: Path) -> None:
    end, out = helper.ask(
        ["sh", "-c", 'pwd; echo "$FROM_IMAGE $ADDED"; echo err >&2; exit 6'],
        cwd=str(tmp_path),
        env={"ADDED": "too"},
    )
    assert end == {"code": 6, "timed_out": False}
    assert out == {b"o": f"{tmp_path}\nkept too\nerr\n".encode()}


def test_split_sends_stderr_apart_and_stdin_is_fed(helper: Helper) -> None:
    data = bytes(range(256)) * 2000
    end, out = helper.ask(["sh", "-c", "cat; echo err >&2"], stdin=data, split=True)
    assert end["code"] == 0
    assert (out[b"o"], out[b"e"]) == (data, b"err\n")


def test_past_its_deadline_a_command_is_killed_with_124(helper: Helper) -> None:
    end, _ = helper.ask(["sleep", "30"], timeout=0.2)
    assert end == {"code": 124, "timed_out": True}
    end, out = helper.ask(["echo", "next"])
    assert (end["code"], out) == (0, {b"o": b"next\n"})


def test_what_a_command_left_running_is_killed_when_it_ends(helper: Helper, tmp_path: Path) -> None:
    # Its output elsewhere: one holding the command's pipe costs the helper's poll (0.5 s).
    script = (
        "setsid -f sh -c 'echo $$ > d; exec sleep 300' >/dev/null 2>&1; "
        "while [ ! -s d ]; do :; done"
    )
    end, _ = helper.ask(["sh", "-c", script], cwd=str(tmp_path))
    assert end["code"] == 0
    assert not alive(int((tmp_path / "d").read_text()))


def test_faults_are_answers_and_the_helper_lives_on(helper: Helper, tmp_path: Path) -> None:
    end, out = helper.ask(["true"], cwd=str(tmp_path / "absent"))
    assert end["code"] == 1 and b"not a directory" in out[b"o"]
    end, out = helper.ask([str(tmp_path / "absent")])
    assert end["code"] == 127 and b"cannot run" in out[b"o"]
    # a command that never reads its stdin: the helper's write fails, not the helper
    end, _ = helper.ask(["true"], stdin=b"x" * (1 << 20))
    assert end["code"] == 0
    end, _ = helper.ask(["sh", "-c", "kill -9 $$"])
    assert end["code"] == 128 + 9
    assert helper.ask(["echo", "still"])[1] == {b"o": b"still\n"}


def test_the_helper_ends_when_its_input_does(helper: Helper) -> None:
    helper.inp.close()
    assert helper.proc.wait(timeout=10) == 0
