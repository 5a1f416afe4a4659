"""The files of a report directory (`report.json` and the files it names: `events_file`,
`result.patch`, `inputs`), treated as data.

A report directory may be a CI artifact someone edited: a name in it is a claim, not a path
to follow. So a name must be relative and lie under its own folder (`threads/` for events,
`patches/` for patches), with no `..`, no empty or `.` component and no control character;
and the file is opened component by component without following any link
(`hostfs.open_parent`), must be a regular file, and must have no second hard link (which
could be a host file planted in the directory). Every reader of these files (`report
merge`, `compare`, `branches` through `load_shard`; the `report.html` writer) goes
through here, so none of them can be led to another file on the machine. `report.json`
itself is opened the same way and read up to `REPORT_BYTES`; the page reads at most a
head of a patch and skips over-long transcript lines, so no file makes a reader hold
more than a cap in memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from runner import hostfs
from runner.errors import Problem, UnsafeFileError

if TYPE_CHECKING:  # the model costs 30 ms to import; a run's inputs are named first
    from runner.reports.model import Report

EVENTS_DIR = "threads"
PATCHES_DIR = "patches"
INPUTS_DIR = "inputs"
WHERE = "a report directory"
"""How refusals name the tree they were refused in."""
REPORT_BYTES = 256 << 20
"""The largest `report.json` read: a report of thousands of long runs is a few tens of
MiB; a bigger file would only make the parser hold gigabytes."""
LINE_CHARS = 16 << 20
"""The longest transcript line the page reads (one event: items are capped at 8 MiB)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def allowed(folder: str) -> str:
    """What a report may name, said in one phrase for every message."""
    return (
        f"must be a relative path under {folder}/ naming a regular file in the report "
        "directory (no absolute path, no `..`, no links)"
    )


def path_problem(value: str, folder: str) -> str | None:
    """Why `value` is not a name a report may give a file of `folder`; None if it is."""
    if _CONTROL.search(value):
        return "holds a control character"
    if value.startswith("/"):
        return "is an absolute path"
    parts = value.split("/")
    if any(p == ".." for p in parts):
        return "holds `..`"
    if any(p in ("", ".") for p in parts):
        return "holds an empty or `.` component"
    if len(parts) < 2 or parts[0] != folder:
        return f"is not under {folder}/"
    return None


def open_plain(root: Path, rel: str) -> int:
    """A read-only fd of `root/rel`, reached without following a link, a regular file
    with no second hard link; opening never blocks (a FIFO is refused, not waited on).
    Raises FileNotFoundError, UnsafeFileError or OSError."""
    try:
        with hostfs.open_parent(root, rel, where=WHERE) as (dir_fd, name):
            fd = hostfs.open_regular(name, dir_fd, rel)
    except NotADirectoryError:
        raise FileNotFoundError(rel) from None
    if os.fstat(fd).st_nlink != 1:
        os.close(fd)
        raise UnsafeFileError(f"{rel}: has another hard link; report files are plain files")
    return fd


def open_named(root: Path, value: str, folder: str) -> int | None:
    """A read-only fd of the file `root/value`, or None when there is no such file.
    Raises UnsafeFileError when the name is not allowed, or the file is reached through a
    link, is not a regular file or has another hard link."""
    why = path_problem(value, folder)
    if why is not None:
        raise UnsafeFileError(f"{value!r} {why}")
    try:
        return open_plain(root, value)
    except FileNotFoundError:
        return None


def read_named(root: Path, value: str, folder: str, max_bytes: int) -> tuple[bytes, int] | None:
    """The first `max_bytes` of a file a report names and its whole size; None when it
    is missing or not allowed (the page then says so instead of showing it)."""
    try:
        fd = open_named(root, value, folder)
    except (UnsafeFileError, OSError):
        return None
    if fd is None:
        return None
    try:
        return hostfs.read_bytes(fd, max_bytes), os.fstat(fd).st_size
    finally:
        os.close(fd)


def named_lines(root: Path, value: str, folder: str) -> Iterator[str]:
    """The lines of a file a report names, streamed; nothing when it is missing or not
    allowed. A line longer than LINE_CHARS is passed over without being held."""
    try:
        fd = open_named(root, value, folder)
    except (UnsafeFileError, OSError):
        return
    if fd is None:
        return
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        while line := f.readline(LINE_CHARS + 1):
            if len(line) <= LINE_CHARS or line.endswith("\n"):
                yield line
                continue
            while line and not line.endswith("\n"):
                line = f.readline(hostfs.CHUNK)


def named_files(report: Report) -> Iterator[tuple[str, str, str]]:
    """`(field, value, folder)` for every file the report names."""
    for i, t in enumerate(report.runs):
        yield f"runs[{i}].events_file", t.events_file, EVENTS_DIR
        if t.result is not None:
            yield f"runs[{i}].result.patch", t.result.patch, PATCHES_DIR
        if t.inputs is not None:
            for kind in ("prompt", "instructions", "tools", "agents_md"):
                value = getattr(t.inputs, kind)
                if value is not None:
                    yield f"runs[{i}].inputs.{kind}", value, INPUTS_DIR


def check_named(root: Path, report: Report, file: str) -> list[Problem]:
    """A problem for every name in the report that is not allowed, and for every named
    file that exists but is a link, not a regular file, or hard-linked. A missing file
    is fine (a run that never started has no events)."""
    problems = []
    for field, value, folder in named_files(report):
        why = path_problem(value, folder)
        if why is None:
            try:
                fd = open_named(root, value, folder)
            except UnsafeFileError as exc:
                why = str(exc)
            except OSError as exc:
                why = f"cannot be opened: {exc.strerror or exc}"
            else:
                if fd is not None:
                    os.close(fd)
        else:
            why = f"{value!r} {why}"
        if why is not None:
            problems.append(Problem(file, None, field, f"{why}; {allowed(folder)}"))
    return problems
