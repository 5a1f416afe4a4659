"""What a suite's own value may be, checked where the suite writes it. Pure: no I/O.

A suite task becomes an ordinary task of the task file (runner/config/suite_runs.py), whose
models bound every number and name. Left to those models, a task.toml's `timeout_sec = 1e12`
would be blamed on the task file's `suites:` entry, under runner's field name; checked here
first, it is named in the suite's own file, at its line, as the suite spells it. The limits
are the task file's own (tests/suites/test_bounds.py holds them equal), so a value that
passes here passes there.
"""

from __future__ import annotations

import math
import posixpath
import re

MAX_AGENT_S = 7 * 24 * 3600
"""The agent's time (the task file's `limits.timeout_s`)."""
MAX_BUILD_S = 24 * 3600
"""Building or starting the environment (`environment.timeout_s`)."""
MAX_VERIFY_S = 24 * 3600
"""The verifier's time: as long as a build may take."""
MAX_CPUS = 1024
MIN_MEMORY_MB = 16
MAX_MEMORY_MB = 16 * 1024 * 1024
"""`environment.memory_mb` (16 MiB to 16 TiB)."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}")
_USER_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}"
_USER = re.compile(rf"{_USER_NAME}(:{_USER_NAME})?")


def shown(value: object) -> str:
    """A value as a message quotes it: numbers bare, text quoted, unprintables escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() < 64 else "a number over 2**63"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 60 else value[:60] + "...")
    if isinstance(value, dict):
        return "a table"
    return "a list" if isinstance(value, list) else type(value).__name__


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {shown(value)}"
    return shown(value)


def number_problem(
    value: object, *, most: float, unit: str, written: str | None = None
) -> str | None:
    """What is wrong with a count of `unit` that must be above 0 and at most `most`, or
    None. `written` is the value as the file spells it (e.g. `1e12`), when known."""
    allowed = f"allowed: a number of {unit} above 0, at most {most:g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number of {unit}, got {_kind(value)}; {allowed}"
    said = written if written and len(written) <= 32 else shown(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{said} is not a finite number; {allowed}"
    if value <= 0:
        return f"{said} is not above 0; {allowed}"
    if value > most:
        return f"{said} is over the limit of {most:g} {unit}"
    return None


def seconds_problem(value: object, most: float, written: str | None = None) -> str | None:
    return number_problem(value, most=most, unit="seconds", written=written)


def cpus_problem(value: object, written: str | None = None) -> str | None:
    return number_problem(value, most=MAX_CPUS, unit="cpus", written=written)


def memory_problem(megabytes: float, said: str) -> str | None:
    """`said`: the size as written (`"999999G"`, `8`)."""
    if not math.isfinite(megabytes) or megabytes > MAX_MEMORY_MB:
        return f"{said} is over the limit of {MAX_MEMORY_MB} MB (16 TiB)"
    if megabytes < MIN_MEMORY_MB:
        return f"{said} is under the least runner gives a container, {MIN_MEMORY_MB} MB"
    return None


def env_name_problem(name: str) -> str | None:
    if _ENV_NAME.fullmatch(name):
        return None
    return (
        f"{shown(name)} is not a variable name: letters, digits and '_', not starting with "
        "a digit, at most 128"
    )


def env_value_problem(value: str) -> str | None:
    """A value reaches the engine as one `--env=NAME=VALUE` word: no NUL, no line break."""
    if "\0" in value or "\n" in value or "\r" in value:
        return "must not hold a NUL or a line break (the engine takes NAME=VALUE on one line)"
    return None


def image_problem(image: str) -> str | None:
    if _IMAGE.fullmatch(image):
        return None
    return (
        f"{shown(image)} is not an image reference: letters, digits and . _ / : @ + -, "
        "starting with a letter or digit (e.g. docker.io/library/python:3.12)"
    )


def workdir_problem(path: str) -> str | None:
    if not path.startswith("/") or "\0" in path or "\\" in path or not path.isprintable():
        return f"{shown(path)} is not an absolute POSIX path such as /app"
    if posixpath.normpath(path) != path or path.startswith("//"):
        return f"{shown(path)} must be written plainly (no '..', '.', '//' or trailing '/')"
    if path == "/":
        return "must be a folder of its own, not /"
    return None


def user_problem(user: str) -> str | None:
    if _USER.fullmatch(user):
        return None
    return f"{shown(user)} is not a user name or uid (optionally :group or :gid)"
