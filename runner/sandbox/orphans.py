"""Which containers are the runner's, which batch is still alive, and removing the rest.

A batch killed with SIGKILL removes nothing, and its containers (`sleep infinity`) would
fill the disk. So every container carries labels naming its owner (`runner`), the uid and
host that started it, its batch and its run; a live batch holds a lock on a file named by
its batch id (`live_batch`), in a folder of its uid's beside the sandbox registry. At start
a batch removes every container labelled as this uid's and this host's whose batch holds
no lock: never one without the runner's labels, another user's, or a live batch's.

The lock file also lists, a line each, the images the live batch uses or will use (its
build tags, written before it looks for them), so `runner images prune` keeps them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from runner.errors import EnvironmentFault
from runner.sandbox import registry
from runner.sandbox.engine import BATCH_LABEL, HOST_LABEL, OWNER, OWNER_LABEL, RUN_LABEL, Engine

UID_LABEL = "io.runner.uid"
_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def batch_folder() -> Path:
    """`~/.local/state/runner/batches` (or beside the registry's fallback in /tmp)."""
    return registry.folder().parent / "batches"


def labels(batch_id: str, run_name: str) -> dict[str, str]:
    return {
        OWNER_LABEL: OWNER,
        UID_LABEL: str(os.geteuid()),
        HOST_LABEL: os.uname().nodename,
        BATCH_LABEL: batch_id,
        RUN_LABEL: run_name,
    }


def _lock_name(batch_id: str) -> str:
    if _SAFE.fullmatch(batch_id) and not batch_id.startswith("."):
        return f"{batch_id}.lock"
    return hashlib.sha256(batch_id.encode()).hexdigest()[:32] + ".lock"


def _open_folder(folder: Path) -> int:
    with contextlib.suppress(OSError):
        os.makedirs(folder, 0o700, exist_ok=True)
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise EnvironmentFault(f"{folder}: cannot open ({exc.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
        os.close(fd)
        raise EnvironmentFault(
            f"{folder}: not a private folder of the runner's own; the runner marks its live "
            "batches there so it never removes a live batch's containers"
        )
    return fd


class LiveBatch:
    """A live batch's mark: the lock it holds, and the images it uses written in it."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._written: set[str] = set()

    def uses(self, images: Iterable[str]) -> None:
        """Add `images` (names or ids) to what this batch uses, for `images_in_use`."""
        new = [i for i in dict.fromkeys(images) if i and "\n" not in i and i not in self._written]
        if new:
            os.write(self._fd, "".join(f"{i}\n" for i in new).encode())
            self._written.update(new)


@contextlib.contextmanager
def live_batch(batch_id: str, folder: Path | None = None) -> Iterator[LiveBatch]:
    """Mark `batch_id` alive while the context lasts (and while this process lives: the
    kernel drops the lock of a killed process)."""
    dir_fd = _open_folder(folder or batch_folder())
    name = _lock_name(batch_id)
    try:
        fd = os.open(
            name, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd
        )
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)  # what a killed run of this batch id used is no longer used
        yield LiveBatch(fd)
    finally:
        os.close(fd)


MAX_USES_BYTES = 1 << 22
"""Of one live batch's list of images read back (a line per build folder)."""


def images_in_use(folder: Path | None = None) -> set[str]:
    """The images every live batch of this uid and host listed (`LiveBatch.uses`). A lock
    that cannot be read is not a batch's: only the runner writes that folder."""
    try:
        dir_fd = _open_folder(folder or batch_folder())
    except EnvironmentFault:
        return set()
    found: set[str] = set()
    try:
        for name in os.listdir(dir_fd):
            if not name.endswith(".lock"):
                continue
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:
                continue
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:  # held: a live batch
                    data = os.pread(fd, MAX_USES_BYTES, 0)
                    found.update(line for line in data.decode(errors="replace").split("\n") if line)
            finally:
                os.close(fd)
    finally:
        os.close(dir_fd)
    return found


def batch_alive(batch_id: str, folder: Path | None = None) -> bool:
    """A process holds `batch_id`'s lock (its own process counts: flock is per open)."""
    try:
        dir_fd = _open_folder(folder or batch_folder())
    except EnvironmentFault:
        return True  # cannot tell: keep its containers
    try:
        fd = os.open(_lock_name(batch_id), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError:
        return False
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


async def runner_containers(engine: Engine) -> list[tuple[str, dict[str, str]]]:
    """(id, labels) of every container, running or not, labelled as this uid's and host's."""
    done = await engine.check(
        [
            "ps",
            "-a",
            "-q",
            "--no-trunc",
            "--filter",
            f"label={OWNER_LABEL}={OWNER}",
            "--filter",
            f"label={UID_LABEL}={os.geteuid()}",
        ]
    )
    ids = done.text.split()
    if not ids:
        return []
    shown = await engine.call(["inspect", "--type", "container", *ids])
    try:
        data = json.loads(shown.stdout)
    except ValueError:
        return []  # one went away between the two calls: found again next time
    found: list[tuple[str, dict[str, str]]] = []
    for item in data if isinstance(data, list) else []:
        got = (item.get("Config") or {}).get("Labels") or {}
        if got.get(OWNER_LABEL) == OWNER and got.get(UID_LABEL) == str(os.geteuid()):
            found.append((str(item.get("Id")), {str(k): str(v) for k, v in got.items()}))
    return found


async def reap_orphans(engine: Engine, folder: Path | None = None) -> list[str]:
    """Remove this uid's and host's containers whose batch is not alive; their ids."""
    host = os.uname().nodename
    dead = [
        cid
        for cid, got in await runner_containers(engine)
        if got.get(HOST_LABEL) == host and not batch_alive(got.get(BATCH_LABEL, ""), folder)
    ]
    if dead:
        await engine.call(remove_args(engine, dead))
    return dead


def remove_args(engine: Engine, names: list[str]) -> list[str]:
    """`rm -f` without waiting for a stop signal (docker's `rm` has no `-t`)."""
    if engine.kind == "podman":
        return ["rm", "-f", "-t", "0", *names]
    return ["rm", "-f", *names]


__all__ = [
    "RUN_LABEL",
    "LiveBatch",
    "batch_alive",
    "images_in_use",
    "labels",
    "live_batch",
    "reap_orphans",
    "remove_args",
]
