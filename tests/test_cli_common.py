"""What every command prints goes through one door: no line can be a workflow command in
an Actions log, a reader that went away does not stop the command, and a bad flag is a
located problem like a task file's."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import IO

import pytest

from runner.cli_common import flag_problem, flush_quietly, say, warn
from runner.errors import ConfigError


def test_say_makes_workflow_commands_inert_and_one_line_flattens() -> None:
    out = io.StringIO()
    say("ok\n::add-mask::x\nsee ##[error]here\x1b[31m", stream=out)
    assert out.getvalue() == "ok\n\\u003a:add-mask::x\nsee #\\u0023[error]here\\u001b[31m\n"
    out = io.StringIO()
    say("branch\n::set-env name=A::1", stream=out, one_line=True)
    assert out.getvalue() == "branch\\u000a::set-env name=A::1\n"


def test_warn_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    warn("::error::boom")
    got = capsys.readouterr()
    assert (got.out, got.err) == ("", "\\u003a:error::boom\n")


@contextmanager
def closed_pipe(buffering: int = 1) -> Iterator[IO[str]]:
    """A text stream (line-buffered by default) on a pipe whose reader is gone
    (`runner ... | head -1`)."""
    r, w = os.pipe()
    os.close(r)
    stream = os.fdopen(w, "w", buffering=buffering)
    try:
        yield stream
    finally:
        with suppress(BrokenPipeError):
            stream.close()


def _points_at_devnull(stream: IO[str]) -> bool:
    return os.readlink(f"/proc/self/fd/{stream.fileno()}") == os.devnull


def test_a_reader_that_went_away_sends_the_rest_to_devnull() -> None:
    with closed_pipe() as stream:
        say("first line", stream=stream)  # EPIPE here: no exception
        assert _points_at_devnull(stream)
        say("and the rest", stream=stream)
        stream.flush()


def test_flush_quietly_drops_a_closed_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    with closed_pipe(buffering=-1) as stream:
        stream.write("pending, never read\n")
        monkeypatch.setattr(sys, "stdout", stream)
        monkeypatch.setattr(sys, "stderr", io.StringIO())  # not a real file: left alone
        flush_quietly()
        assert _points_at_devnull(stream)


def test_a_bad_flag_is_located_on_the_command_line() -> None:
    err = flag_problem("--alpha", "must be between 0 and 1")
    assert isinstance(err, ConfigError)
    assert str(err) == "(command line): --alpha: must be between 0 and 1"
    (problem,) = err.problems
    assert (problem.file, problem.line, problem.field) == ("(command line)", None, "--alpha")
