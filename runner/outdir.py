"""An out dir belongs to one batch.

Two runners writing one out dir mix their threads and patches, and each one's report
describes half of what is there; a new batch in a used dir would mix its files with the
earlier batch's. So a batch (and `runner report merge`) holds an flock on
`OUT/.runner.lock` for its whole life (the file names the holder's pid, for the message a
second writer gets), and a fresh batch starts only in an empty or new dir unless `--force`
says the earlier batch's files may go. `--force` deletes exactly those (`BATCH_FILES`):
a file the runner did not write is never the runner's to delete.

Some places are never an out dir, `--force` or not: `/`, the user's home, a system folder
(`/usr`, `/tmp`, ...) and a folder holding the task file or a run's repository. A batch
there would mix its files with the user's, and hide all of them from the sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from runner.errors import ConfigError, Problem
from runner.fsutil import private_dirs
from runner.hostfs import kind, remove_tree
from runner.sandbox.hostview import user_folder

LOCK_NAME = ".runner.lock"

BATCH_FILES = (
    "journal",
    "threads",
    "patches",
    "inputs",
    "report.json",
    "junit.xml",
    "summary.md",
    "report.html",
)
"""What a batch (or a merge) writes in its out dir: what `--force` deletes."""


@contextlib.contextmanager
def claim(
    out_dir: Path, *, resume: bool, force: bool, holds: Iterable[Path] = ()
) -> Iterator[None]:
    """Hold `out_dir` for one batch. ConfigError (exit 2) when it is a place no batch may
    write (see the module docstring; `holds` are the task file and repositories), when
    another live runner holds it, or when a fresh batch (neither `resume` nor `force`)
    would mix with what is there. A fresh batch with `force` deletes an earlier batch's
    files first, and only those (without one, every file there is someone else's)."""
    _refuse_place(out_dir, holds)
    lock = out_dir / LOCK_NAME
    try:
        private_dirs(out_dir)  # 0700 where the runner makes it, like every folder it writes
        fd = os.open(
            lock,
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK,
            0o600,
        )
    except OSError as exc:
        raise _problem(out_dir, f"cannot be used as the out dir: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _problem(
                out_dir,
                f"{lock} is a {kind(mode)}, not the runner's lock file (a regular file); "
                "remove it, or give this batch a new --out",
            )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _problem(
                out_dir,
                f"another runner ({_holder(fd)}) is writing a batch there; wait for it to "
                "end or give this batch a new --out",
            ) from None
        if resume:
            _refuse_unjournaled(out_dir)
        elif not force:
            _refuse_used(out_dir)
        elif _has_batch(out_dir):
            for name in BATCH_FILES:
                remove_tree(out_dir / name)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _refuse_place(out_dir: Path, holds: Iterable[Path]) -> None:
    real = Path(os.path.realpath(out_dir))
    allowed = (
        "; an out dir is a folder of its own, e.g. ./runner-out or a new folder "
        "under your home or a project"
    )
    homes = {Path(os.path.realpath(Path.home()))}
    with contextlib.suppress(KeyError):
        homes.add(Path(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir)))
    if real in homes:
        raise _problem(out_dir, f"is your home directory ({real}){allowed}")
    if user_folder(real) is None:
        raise _problem(out_dir, f"is {real}, a system folder or one holding tools{allowed}")
    for path in holds:
        held = Path(os.path.realpath(path))
        if held.is_relative_to(real):
            raise _problem(
                out_dir,
                f"holds {held}, which the batch reads (its task file or a repository)"
                f"{allowed}, inside the repository or beside it, not around it",
            )


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


def _has_batch(out_dir: Path) -> bool:
    return (out_dir / "journal" / "batch.json").is_file() or (out_dir / "report.json").exists()


def _refuse_unjournaled(out_dir: Path) -> None:
    """A report without a journal (a merged report, or a copy without `journal/`) has no
    batch `--resume` could continue: a new batch there would overwrite its transcripts."""
    if (out_dir / "report.json").exists() and not (out_dir / "journal" / "batch.json").is_file():
        raise _problem(
            out_dir,
            "holds a report but no journal/ (a merged report, or a copy of one "
            "batch's): --resume has no batch to continue there; start a new batch "
            "with --force (it deletes that report's files) or give this batch a new --out",
        )


def _refuse_used(out_dir: Path) -> None:
    left = sorted(p.name for p in out_dir.iterdir() if p.name != LOCK_NAME)
    if not left:
        return
    if _has_batch(out_dir):
        raise _problem(
            out_dir,
            "holds an earlier batch's results: continue that batch with --resume, replace "
            f"them with --force (it deletes {', '.join(BATCH_FILES)} and keeps any other "
            "file), or give this batch a new --out",
        )
    named = f"{', '.join(left[:3])}{', ...' if len(left) > 3 else ''}"
    raise _problem(
        out_dir,
        f"holds files no batch wrote ({named}): write the batch beside them with --force "
        "(they are kept), or give this batch a new --out",
    )


def _problem(out_dir: Path, message: str) -> ConfigError:
    return ConfigError([Problem(str(out_dir), None, "--out", message)])
