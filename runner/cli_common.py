"""What every command shares: its printing and its flag errors. Every line goes out
through `reports.fmt.safe_text` (what comes from a report, a run or an input file can
never be a workflow command in a log), and a reader that went away (`runner ... |
head -1`) never stops the command's work."""

from __future__ import annotations

import os
import sys
from typing import IO

from runner.errors import ConfigError, Problem


def say(text: str, *, stream: IO[str] | None = None, one_line: bool = False) -> None:
    """Every line the CLI prints goes out here, through `reports.fmt.safe_text`: what comes
    from a report, a run or an input file can never be a workflow command in a log."""
    from runner.reports.fmt import safe_text

    out = stream or sys.stdout
    try:
        out.write(safe_text(text, one_line=one_line) + "\n")
    except BrokenPipeError:
        _drop(out)


def _drop(stream: IO[str]) -> None:
    """Nobody reads `stream` any more (`runner ... | head -1`): what is left for it goes to
    /dev/null, so the command still finishes its work and keeps its exit code, and
    Python's final flush finds no broken pipe to complain about."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass  # not a real file (a test's capture): nothing to redirect


def flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            _drop(stream)
        except (OSError, ValueError):
            pass


def warn(text: str, *, one_line: bool = False) -> None:
    say(text, stream=sys.stderr, one_line=one_line)


def flag_problem(field: str, message: str) -> ConfigError:
    """A bad flag, located like a task file's problems (exit 2)."""
    return ConfigError([Problem("(command line)", None, field, message)])
