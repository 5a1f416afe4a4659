"""Where every live batch of this user says where its run directories are.

The sandbox leaves every batch's `runner-work` out of its view, but a batch may keep it
anywhere (`TMPDIR=/srv/ci/tmp/job/7`): no search of the usual temp roots finds them all,
and an unprivileged user's batches share one uid, so only the mount tree keeps their
commands apart. So each batch writes its `runner-work` into one folder of its uid's,
at a path that does not depend on TMPDIR (`/tmp/runner-live-<uid>`, mode 0700; the
sandbox's `/tmp` is its own, so no command sees it), and holds a lock on its entry while
it lives. An entry nobody holds is a killed batch's: skipped, and removed by the next
batch that registers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path

from runner.errors import RunnerError

RUN_DIRS = "runner-work"
"""The folder, in a temp dir, holding a batch's run directories (runner/batch.py)."""
MAX_ENTRIES = 1000
"""Entries read at most: the folder is the user's own, but a runaway could fill it."""
MAX_ENTRY_BYTES = 4096


def folder() -> Path:
    return Path("/tmp", f"runner-live-{os.geteuid()}")


@contextlib.contextmanager
def live(run_dirs: Path) -> Iterator[None]:
    """`run_dirs` is registered while the context lasts. RunnerError when the registry
    folder is someone else's or a link (then the batch cannot promise to be hidden)."""
    fd = _open_folder(create=True)
    if fd is None:
        raise RunnerError(
            f"{folder()}: not a folder of the runner's own with mode 0700 (someone else's, "
            "or a link); the runner lists its live batches there so their sandboxes hide "
            "each other's workspaces: remove it"
        )
    name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    entry = -1
    try:
        _remove_stale(fd)
        entry = os.open(f".{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd)
        fcntl.flock(entry, fcntl.LOCK_EX)
        os.write(entry, os.fsencode(str(run_dirs)))
        # Named only once locked: a reader never takes a half-made entry for a dead one.
        os.rename(f".{name}", name, src_dir_fd=fd, dst_dir_fd=fd)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=fd)
        if entry >= 0:
            os.close(entry)
        os.close(fd)


def registered() -> tuple[Path, ...]:
    """The run directories of this uid's live batches: each an absolute `runner-work`
    folder of this uid's, as written (whatever an entry says, nothing else is taken)."""
    fd = _open_folder(create=False)
    if fd is None:
        return ()
    found: list[Path] = []
    try:
        for name in sorted(os.listdir(fd))[:MAX_ENTRIES]:
            if name.startswith("."):
                continue
            path = _read_live(fd, name)
            if path is not None and path not in found:
                found.append(path)
    finally:
        os.close(fd)
    return tuple(found)


def _read_live(dir_fd: int, name: str) -> Path | None:
    try:
        entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(entry).st_mode):
            return None
        try:
            fcntl.flock(entry, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # held: the batch lives
        else:
            return None  # nobody holds it: a killed batch's
        text = os.read(entry, MAX_ENTRY_BYTES).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(entry)
    path = Path(text)
    if not path.is_absolute() or path.name != RUN_DIRS or ".." in path.parts:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return path if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() else None


def _remove_stale(dir_fd: int) -> None:
    for name in os.listdir(dir_fd)[:MAX_ENTRIES]:
        try:
            entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            continue
        try:
            fcntl.flock(entry, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live batch's, or one being made
        finally:
            os.close(entry)
        if not name.startswith("."):
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)


def _open_folder(*, create: bool) -> int | None:
    """The registry folder, opened without following links, when it is this uid's own
    with mode 0700; else None."""
    path = folder()
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != 0o700:
        os.close(fd)
        return None
    return fd
