"""Reading a suite's task folder: bounded regular files, no link out of the suite, every
refusal kept as a located `Problem` so one `validate` lists all of a suite's faults."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TypeVar

from runner import hostfs
from runner.errors import ConfigError, Problem
from runner.suites.model import Listed, SuiteListing, SuiteTask

_T = TypeVar("_T")

MAX_TEXT_BYTES = 1 << 20
"""An instruction, task.toml, task.yaml or compose file: far more than any suite writes."""


class TaskFolder:
    """One task's folder and the problems found in it so far."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.problems: list[Problem] = []

    def refuse(self, rel: str, line: int | None, field: str, message: str) -> None:
        self.problems.append(Problem(str(self.root / rel), line, field, message))

    def lexists(self, rel: str) -> bool:
        return os.path.lexists(self.root / rel)

    def _lstat(self, rel: str, field: str) -> os.stat_result | None:
        """`rel`'s own status (a link not followed); None when absent or refused."""
        try:
            return (self.root / rel).lstat()
        except FileNotFoundError:
            return None
        except OSError as exc:
            self.refuse(rel, None, field, f"cannot read: {exc.strerror or exc}")
            return None

    def file(self, rel: str) -> Path | None:
        """`rel` when it is a regular file (not a link); None when absent; refused else."""
        path = self.root / rel
        st = self._lstat(rel, "(file)")
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            self.refuse(rel, None, "(file)", "a symbolic link; a task's files must be real files")
            return None
        if not stat.S_ISREG(st.st_mode):
            self.refuse(rel, None, "(file)", "not a regular file")
            return None
        return path

    def folder(self, rel: str) -> Path | None:
        """`rel` when it is a real folder with no link leaving the task; None when absent."""
        path = self.root / rel
        st = self._lstat(rel, "(folder)")
        if st is None:
            return None
        if not stat.S_ISDIR(st.st_mode):
            self.refuse(rel, None, "(folder)", "not a folder (a link or a file)")
            return None
        return path if self._links_stay_inside(rel) else None

    def _links_stay_inside(self, rel: str) -> bool:
        root = self.root.resolve()
        for top, dirs, files in os.walk(self.root / rel):
            for name in dirs + files:
                entry = Path(top) / name
                if entry.is_symlink() and not entry.resolve().is_relative_to(root):
                    shown = entry.relative_to(self.root).as_posix()
                    self.refuse(shown, None, "(file)", "a symbolic link out of the task folder")
                    return False
        return True

    def text(self, rel: str) -> str | None:
        """The UTF-8 text of a regular file, at most MAX_TEXT_BYTES; None when absent."""
        path = self.file(rel)
        if path is None:
            return None
        try:
            raw = _read_regular(path, MAX_TEXT_BYTES + 1)
        except OSError as exc:
            self.refuse(rel, None, "(file)", f"cannot read: {exc.strerror or exc}")
            return None
        if len(raw) > MAX_TEXT_BYTES:
            self.refuse(rel, None, "(file)", f"larger than {MAX_TEXT_BYTES} bytes")
            return None
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.refuse(rel, None, "(file)", f"not UTF-8 text (byte {exc.start})")
            return None


def _read_regular(path: Path, limit: int) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return hostfs.read_bytes(fd, limit)
    finally:
        os.close(fd)


def list_tasks(
    path: Path,
    marker: str,
    fmt: str,
    read: Callable[[Path], tuple[SuiteTask | None, list[Problem]]],
    tags: Callable[[Path], tuple[tuple[str, ...], list[Problem]]],
) -> SuiteListing:
    """`path` itself when it holds `marker`, else each of its folders that does (hidden
    ones and links left out), sorted by name, each named by its folder and read only when
    asked. A folder without the marker names no task: it is `unlisted`, refused when the
    whole suite is wanted. Only the folder's names are read here, never a file."""
    if not path.is_dir():
        raise ConfigError([Problem(str(path), None, "path", f"not a folder of {fmt} tasks")])
    if os.path.lexists(path / marker):
        folders = [path]
        unlisted: list[Problem] = []
    else:
        folders, unlisted = [], []
        for entry in sorted(path.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir() or entry.is_symlink():
                continue
            if os.path.lexists(entry / marker):
                folders.append(entry)
            else:
                why = f"not a {fmt} task: it has no {marker}"
                unlisted.append(Problem(str(entry), None, "(folder)", why))
    if not folders and not unlisted:
        raise ConfigError([Problem(str(path), None, "path", f"holds no {fmt} task (no {marker})")])
    return SuiteListing(
        tuple(Listed(f.name, partial(tags, f), partial(read, f)) for f in folders),
        tuple(unlisted),
    )


def apart(folder: TaskFolder, read: Callable[[], _T]) -> tuple[_T, tuple[Problem, ...]]:
    """`read()` and the problems it found, taken off the folder's own: a task's solution
    matters to `agent: oracle` alone, so its faults must not make the task unreadable."""
    n = len(folder.problems)
    value = read()
    found = tuple(folder.problems[n:])
    del folder.problems[n:]
    return value, found


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}")


def expand(value: str, variables: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` taken from `variables` (never the whole host
    environment: the caller passes what the user named). A `${VAR}` that is not given
    raises KeyError naming it; anything else with a `$` is left as written."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(3)
        given = variables.get(name)
        if default is not None:
            return given if given else default
        if given is None:
            raise KeyError(name)
        return given

    return _VAR.sub(one, value)


_WORKDIR = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE | re.MULTILINE)


def dockerfile_workdir(dockerfile: str) -> str | None:
    """The Dockerfile's last plain absolute `WORKDIR`: where its author meant the work to
    be (one with a variable or a relative path is not guessed at)."""
    found = [m.group(1).strip("\"'") for m in _WORKDIR.finditer(dockerfile)]
    if not found or "$" in found[-1] or not found[-1].startswith("/"):
        return None
    return found[-1]
