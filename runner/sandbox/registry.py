"""Where every batch of this user says which of its folders other batches must not show.

The sandbox leaves every batch's `runner-work` out of its view, but a batch may keep it
anywhere (`TMPDIR=/srv/ci/tmp/job/7`), and its out dir (live transcripts), repositories
(their `.env`) and task folder (expected answers) anywhere too: no search of the usual
temp roots finds them, and an unprivileged user's batches share one uid, so only the
mount tree keeps their commands apart. So each batch writes those folders into one
folder of its uid's, at a path that depends on neither TMPDIR nor HOME (the uid's home
from the password database: `~/.local/state/runner/live`, mode 0700, in a folder no
other user may create, and hidden in every sandbox with the home; `/tmp/runner-live-<uid>`
for a uid without a usable home: `folder`), and holds a lock on its entry while it lives.

An entry stays after its batch: a killed batch's (every folder it named) and a finished
batch's (its out dir only, rewritten when it ends) are hidden while the folder exists,
so a later batch cannot read a killed batch's workspace or an earlier batch's
transcripts. The next batch that registers folds the unlocked entries into one list
(`kept`), leaving out the folders that are gone, so the registry stays as small as the
set of folders still on the disk.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import stat
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from runner.errors import RunnerError

RUN_DIRS = "runner-work"
"""The folder, in a temp dir, holding a batch's run directories (runner/batch.py)."""
MAX_ENTRIES = 1000
"""Entries read at most: the folder is the user's own, but a runaway could fill it."""
MAX_ENTRY_BYTES = 64 * 1024
MAX_KEPT = 10_000
"""Folders the `kept` list holds at most (the newest): one a finished batch's out dir."""
KEPT = "kept"
LOCK = ".lock"


def folder() -> Path:
    """`~/.local/state/runner/live` of the effective uid's home (the password database's,
    else $HOME): the same for every batch of the uid, whatever TMPDIR or HOME say.

    A home that is missing, not the uid's own or not writable (`useradd` without `-m`,
    `/nonexistent`: common in CI and containers) holds nothing: then `/tmp/runner-live-<uid>`,
    also the same for every batch of the uid. A sandbox shows its own /tmp, never the
    host's, so it is hidden as the home is. Another user may make that name first; then
    `live` refuses, as it does for a home folder that is not the runner's own.
    ($XDG_RUNTIME_DIR is not used: it comes from the environment, so two batches of the
    uid started from different sessions would keep two lists and not hide each other.)"""
    uid = os.geteuid()
    try:
        home = pwd.getpwuid(uid).pw_dir
    except KeyError:
        home = os.environ.get("HOME", "")
    if not _usable_home(home, uid):
        return Path("/tmp", f"runner-live-{uid}")
    return Path(home, ".local", "state", "runner", "live")


def _usable_home(home: str, uid: int) -> bool:
    if not os.path.isabs(home) or home == "/":
        return False
    try:
        st = os.stat(home)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid and os.access(home, os.W_OK)


@contextlib.contextmanager
def live(places: Sequence[Path], *, keep: Sequence[Path] = ()) -> Iterator[None]:
    """`places` (absolute, resolved folders) are registered while the context lasts,
    then `keep` alone (the out dir) until it is gone. RunnerError when the registry folder
    is someone else's or a link (then the batch cannot promise to be hidden)."""
    fd = _open_folder(create=True)
    if fd is None:
        raise RunnerError(
            f"{folder()}: not a folder of the runner's own with mode 0700 (someone else's, "
            "or a link, or it cannot be made); the runner lists its batches' folders there "
            "so their sandboxes hide each other's workspaces and out dirs: remove it, or "
            "give the runner's user a home it can write"
        )
    name = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    entry = -1
    try:
        _fold_dead(fd)
        entry = os.open(f".{name}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=fd)
        fcntl.flock(entry, fcntl.LOCK_EX)
        os.write(entry, _lines(places))
        # Named only once locked: a reader never takes a half-made entry for a dead one.
        os.rename(f".{name}", name, src_dir_fd=fd, dst_dir_fd=fd)
        yield
        os.ftruncate(entry, 0)
        os.pwrite(entry, _lines(keep), 0)
    finally:
        if entry >= 0:
            os.close(entry)
        os.close(fd)


def registered() -> tuple[Path, ...]:
    """Every folder this uid's batches named, live or not, that still exists as a folder
    of this uid's (whatever an entry says, nothing else is taken)."""
    fd = _open_folder(create=False)
    if fd is None:
        return ()
    found: dict[Path, None] = {}
    try:
        for name in sorted(os.listdir(fd))[:MAX_ENTRIES]:
            if not name.startswith("."):
                found.update(dict.fromkeys(_read(fd, name)))
    finally:
        os.close(fd)
    return tuple(p for p in found if _usable(p))


def version() -> frozenset[tuple[str, int]]:
    """The registry's entries by name and inode: a batch that starts adds a name, and
    `kept` is replaced whole, so what `registered` gives changes only when this does (a
    live entry shrinking to its `keep` at exit aside: a reader that keeps hiding those
    folders a while hides too much, never too little). Not the folder's mtime: its clock
    ticks coarsely, and two changes within a tick would look like one."""
    fd = _open_folder(create=False)
    if fd is None:
        return frozenset()
    try:
        with os.scandir(fd) as entries:
            return frozenset((e.name, e.inode()) for e in entries)
    finally:
        os.close(fd)


def _lines(paths: Sequence[Path]) -> bytes:
    return b"".join(os.fsencode(str(p)) + b"\n" for p in paths if "\n" not in str(p))


def _read(dir_fd: int, name: str) -> list[Path]:
    try:
        entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(entry).st_mode):
            return []
        limit = MAX_ENTRY_BYTES * (MAX_KEPT // 10 if name == KEPT else 1)
        text = os.read(entry, limit).decode(errors="replace")
    except OSError:
        return []
    finally:
        os.close(entry)
    return [Path(line) for line in text.splitlines() if line]


def _usable(path: Path) -> bool:
    """An absolute folder of this uid's, named without `..`, and not `/` or a top-level
    folder (hiding `/srv` whole would hide what the sandbox needs)."""
    if not path.is_absolute() or ".." in path.parts or len(path.parts) < 3:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()


def _fold_dead(dir_fd: int) -> None:
    """Fold every entry nobody holds into `kept`, keeping the folders that still exist."""
    lock = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        kept = dict.fromkeys(_read(dir_fd, KEPT))
        dead: list[str] = []
        for name in sorted(os.listdir(dir_fd))[:MAX_ENTRIES]:
            if name in (KEPT, LOCK):
                continue
            if _unheld(dir_fd, name):
                dead.append(name)
                if not name.startswith("."):
                    kept.update(dict.fromkeys(_read(dir_fd, name)))
        paths = [p for p in kept if _usable(p)][-MAX_KEPT:]
        tmp = f".{KEPT}-{uuid.uuid4().hex[:8]}"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
        try:
            os.write(out, _lines(paths))
        finally:
            os.close(out)
        os.rename(tmp, KEPT, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        for name in dead:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=dir_fd)
    finally:
        os.close(lock)


def _unheld(dir_fd: int, name: str) -> bool:
    try:
        entry = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False
    try:
        fcntl.flock(entry, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # a live batch's, or one being made
    finally:
        os.close(entry)
    return True


def _open_folder(*, create: bool) -> int | None:
    """The registry folder, opened without following links, when it is this uid's own
    with mode 0700; else None. Made (with the folders above it, 0700) when missing."""
    path = folder()
    if create:
        with contextlib.suppress(OSError):
            os.makedirs(path.parent, 0o700, exist_ok=True)
        with contextlib.suppress(OSError):
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
