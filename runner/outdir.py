"""An out dir belongs to one batch.

Two runners writing one out dir mix their threads and patches, and each one's report
describes half of what is there; a new batch in a used dir deletes the earlier batch's
results (the journal clears `threads/` and `patches/` so the dir holds one batch). So a
batch holds an flock on `OUT/.runner.lock` for its whole life (the file names the holder's
pid, for the message a second writer gets), and a fresh batch starts only in an empty or
new dir unless `--force` says the old results may go.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from runner.errors import ConfigError, Problem
from runner.fsutil import private_dirs

LOCK_NAME = ".runner.lock"


@contextlib.contextmanager
def claim(out_dir: Path, *, resume: bool, force: bool) -> Iterator[None]:
    """Hold `out_dir` for one batch. ConfigError (exit 2) when another live runner holds
    it, or when a fresh batch (neither `resume` nor `force`) would delete what is there."""
    try:
        private_dirs(out_dir)  # 0700 where the runner makes it, like every folder it writes
        fd = os.open(
            out_dir / LOCK_NAME,
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
            0o600,
        )
    except OSError as exc:
        raise _problem(out_dir, f"cannot be used as the out dir: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _problem(
                out_dir,
                f"another runner ({_holder(fd)}) is writing a batch there; wait for it to "
                "end or give this batch a new --out",
            ) from None
        if not resume and not force:
            _refuse_used(out_dir)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


def _refuse_used(out_dir: Path) -> None:
    left = sorted(p.name for p in out_dir.iterdir() if p.name != LOCK_NAME)
    if not left:
        return
    what = (
        "an earlier batch's results"
        if (out_dir / "journal" / "batch.json").is_file() or "report.json" in left
        else f"files ({', '.join(left[:3])}{', ...' if len(left) > 3 else ''})"
    )
    raise _problem(
        out_dir,
        f"holds {what}, which a new batch would delete: continue that batch with --resume, "
        "replace it with --force, or give this batch a new --out",
    )


def _problem(out_dir: Path, message: str) -> ConfigError:
    return ConfigError([Problem(str(out_dir), None, "--out", message)])
