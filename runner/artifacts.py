"""A run's `artifacts:` copied out to `OUT/artifacts/<run>/`, from any environment, by one
rule: never through a link (runner/envrun.py calls it for containers and Pods, runner/run.py
for host runs)."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence
from pathlib import Path

import anyio

from runner import hostfs
from runner.config import Run
from runner.errors import EnvironmentFault, EnvironmentLost, UnsafeFileError
from runner.record import EnvironmentInfo
from runner.redact import Redactor
from runner.sandbox.environment import Environment
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.sandbox.policy import PROTECTED_NAMES

__all__ = ["ARTIFACTS_MAX_BYTES", "copy_artifacts", "local_artifacts"]

ARTIFACTS_MAX_BYTES = 64 << 20


async def copy_artifacts(
    env: Environment, paths: Sequence[str], out_dir: Path, run_name: str
) -> tuple[str | None, list[str]]:
    """`paths` (files or folders, relative to workdir) copied out of `env` to
    `OUT/artifacts/<run>/`, `ARTIFACTS_MAX_BYTES` in all: that folder relative to the out
    dir (None when nothing came), and a note for each path that could not be copied."""
    folder = Path("artifacts") / run_name
    dest = out_dir / folder
    left = ARTIFACTS_MAX_BYTES
    notes: list[str] = []
    for rel in paths:
        link = await _link_in(env, rel)
        if link is not None:
            notes.append(
                f"artifact {rel} not copied: {link} is a link, and artifacts are never "
                "read through links (name the file or folder it points at)"
            )
            continue
        try:
            data = await env.read_file(rel, max_bytes=left)
        except UnsafeFileError as unreadable:
            try:
                await env.get_dir(rel, dest / rel, max_bytes=left)
                left -= hostfs.disk_usage(dest / rel)
                continue
            except (UnsafeFileError, EnvironmentFault) as exc:
                if isinstance(exc, EnvironmentLost):
                    raise
                # Not a file nor a folder that could be copied: both reasons, since
                # either may be the one that matters (a file over the cap, a FIFO).
                _prune(out_dir / "artifacts", f"{run_name}/{rel}")
                notes.append(f"artifact {rel} not copied: {unreadable}; as a folder: {exc}")
                continue
        if data is None:
            notes.append(f"artifact {rel} not copied: nothing is there")
            continue
        left -= len(data)
        await anyio.to_thread.run_sync(_write_inside, dest, rel, data)
    return (str(folder) if dest.exists() else None), notes


_LINK_IN = r"""cd -- "$1" 2>/dev/null || exit 0
shift
for p in "$@"; do
  if [ -L "$p" ]; then printf '%s' "$p"; exit 0; fi
done
"""


async def _link_in(env: Environment, rel: str) -> str | None:
    """The first of `rel`'s leading parts (relative to workdir) that is a link, or None:
    the one rule for artifacts on every backend. A container's `cd`/`tar` and a Pod's
    would follow a link to a folder anywhere in the image; the local reads refuse only
    links out of the workspace."""
    parts = [x for x in rel.split("/") if x not in ("", ".")]
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    if isinstance(env, LocalEnvironment):
        for p in prefixes:
            if await anyio.Path(env.workdir, p).is_symlink():
                return p
        return None
    done = await env.exec(
        ["sh", "-c", _LINK_IN, "sh", env.workdir, *prefixes],
        cwd="/",
        env={},
        timeout_s=60,
        output_cap=4096,
    )
    said = done.output.decode("utf-8", "surrogateescape")
    if done.exit_code != 0:
        raise EnvironmentFault(f"cannot look for links in artifact {rel} (exit {done.exit_code})")
    return said if said in prefixes else None


async def local_artifacts(
    t: Run, work: Path, out_dir: Path, redact: Redactor
) -> tuple[EnvironmentInfo | None, list[str]]:
    """A host run's `artifacts:` copied out of its workspace by the runner's own reads
    (runner/sandbox/localenv.py: a link out of the workspace is refused, `.git` and
    `.runner` untouched), as a container's are: where they went (None without
    `artifacts:`) and notes for what could not be."""
    if not t.environment.artifacts:
        return None, []
    env = LocalEnvironment(LocalExecutor(), work, read_only=True, protected=PROTECTED_NAMES)
    try:
        folder, notes = await copy_artifacts(env, t.environment.artifacts, out_dir, t.name)
    except OSError as exc:
        return None, [redact(f"artifacts not copied: {exc}")]
    return EnvironmentInfo(backend="local", artifacts=folder), [redact(n) for n in notes]


def _prune(top: Path, rel: str) -> None:
    """The empty folders a failed `get_dir` left, from `top/rel` up to `top`: a file
    that was refused must not show up as an empty folder of its name."""
    here = top / posixpath.normpath(rel)
    while here == top or top in here.parents:
        try:
            here.rmdir()
        except OSError:
            return
        here = here.parent


def _write_inside(dest: Path, rel: str, data: bytes) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    rel = posixpath.normpath(rel)
    with hostfs.open_parent(dest, rel, create=True) as (fd, name):
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=fd)
        with open(out, "wb") as f:
            f.write(data)
