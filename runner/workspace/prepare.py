"""A run's checkout of its base commit: init + alternates + `read-tree -u`, nothing
written into the user's repository (see the package docstring for why)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import time
import uuid
from dataclasses import replace
from functools import partial
from pathlib import Path

import anyio

from runner import hostfs
from runner.errors import GitError, WorkspaceError
from runner.fsutil import private_dirs
from runner.workspace.git import (
    IDENTITY,
    PRIVATE_SUFFIX,
    common_dir,
    config_env,
    git_out,
    private_env,
    run_git,
    user_filter_blanks,
)
from runner.workspace.types import Workspace


async def prepare(repo: Path, *, base: str = "HEAD", root: Path, name: str) -> Workspace:
    """Check out the commit `base` resolves to into `root/name`, for one run.

    Many workspaces on one repository work side by side. Uncommitted changes in the user's
    tree are not included; `Workspace.base_dirty` says whether there were any (refusing a
    dirty tree is the caller's policy). `root` belongs outside the user's work tree (or in
    an ignored directory), or their `git status` shows the workspaces.
    """
    return await anyio.to_thread.run_sync(
        partial(prepare_sync, repo, base=base, root=root, name=name)
    )


def check_base(repo: Path, base: str = "HEAD") -> str:
    """The commit `base` names in `repo`, or a WorkspaceError saying why there is none.
    Run before a batch starts, so a wrong repo or base is bad input, not a failed run."""
    if not base or base.startswith("-") or any(ord(c) < 0x20 for c in base):
        raise WorkspaceError(f"base {base!r} is not a revision")
    try:
        return git_out(
            ["rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}"], cwd=repo.resolve()
        ).strip()
    except GitError as exc:
        reason = exc.stderr.strip().splitlines()[-1:] or ["unknown error"]
        raise WorkspaceError(
            f"{repo}: {base!r} is not a commit there ({reason[0]}); the "
            "runner starts every run from a commit, so the repository needs "
            "one (git init && git add -A && git commit)"
        ) from exc


def prepare_sync(repo: Path, *, base: str = "HEAD", root: Path, name: str) -> Workspace:
    """`prepare` without the thread hop, for benchmarks and synchronous callers."""
    t0 = time.perf_counter()
    _check_name(name)
    repo = repo.resolve()
    if not base or base.startswith("-") or any(ord(c) < 0x20 for c in base):
        raise WorkspaceError(f"base {base!r} is not a revision")
    # One call: the trailing `--` makes git read both as revisions, never as paths.
    try:
        lines = git_out(
            [
                "rev-parse",
                "--path-format=absolute",
                "--git-dir",
                "--git-path",
                "objects",
                "--is-bare-repository",
                "--show-object-format",
                f"{base}^{{commit}}",
                f"{base}^{{tree}}",
                "--",
            ],
            cwd=repo,
        ).splitlines()
    except GitError as exc:
        raise WorkspaceError(
            f"{repo}: base {base!r} is not a commit there ({exc.stderr.strip()})"
        ) from exc
    git_dir, objects, bare, fmt = Path(lines[0]), Path(lines[1]), lines[2] == "true", lines[3]
    sha, tree = lines[4], lines[5]
    dirty = False if bare else is_dirty(repo)
    stores = _borrowed(objects)
    user = [repo, git_dir, common_dir(git_dir)]
    for store in stores:  # a store's git dir, and the work tree around a `.git`
        owner = store.parent if store.name == "objects" else store
        user += [owner.parent, owner] if owner.name == ".git" else [owner]
    if not bare:
        # The top of the work tree (`repo` may be a folder inside it) and, for a
        # submodule, its superproject's.
        user += [Path(p) for p in git_out(_TOPS, cwd=repo).splitlines() if p]

    root = root.resolve()
    path, private = root / name, root / f".{name}{PRIVATE_SUFFIX}"
    for p in (path, private):
        if p.exists() or p.is_symlink():
            raise WorkspaceError(f"workspace {p} already exists")
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(
        path=path,
        repo=repo,
        git_dir=git_dir,
        objects=objects,
        base=sha,
        base_tree=tree,
        base_dirty=dirty,
        setup_s=0.0,
        private_dir=private,
        sandbox_objects=(_shared_store(root, Path(os.path.realpath(objects)), sha),),
        user_paths=tuple(dict.fromkeys(Path(os.path.realpath(p)) for p in user)),
    )
    try:
        path.mkdir(0o700)
        private.mkdir(0o700)
        base_objects(repo, objects, ws.sandbox_objects[0], sha)
        _init(ws._private_git, fmt, bare=True)
        with (ws._private_git / "config").open("a") as f:
            # Without these, git still reads ~/.config/git/{ignore,attributes} by default
            # and the same work tree would give different results on different machines.
            f.write(f"[core]\n\texcludesFile = {os.devnull}\n\tattributesFile = {os.devnull}\n")
        _copy_shallow(git_dir, ws._private_git)
        run_git(["read-tree", "--reset", "-u", sha], env=private_env(ws), cwd=path)
        agent_git = path / ".git"
        _init(path, fmt, bare=False)
        (agent_git / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (agent_git / "objects" / "info" / "alternates").write_text(
            "".join(f"{m}\n" for m in ws.sandbox_objects)
        )
        (agent_git / "HEAD").write_text(f"{sha}\n")
        _copy_shallow(git_dir, agent_git)
        shutil.copyfile(ws._index, agent_git / "index")
        with (agent_git / "config").open("a") as f:
            # So the agent's own `git commit` works without a global identity.
            f.write(f"[user]\n\tname = {IDENTITY[0]}\n\temail = {IDENTITY[1]}\n")
    except BaseException:
        hostfs.remove_tree(path)
        hostfs.remove_tree(private)
        raise
    return replace(ws, setup_s=time.perf_counter() - t0)


_TOPS = [
    "rev-parse",
    "--path-format=absolute",
    "--show-toplevel",
    "--show-superproject-working-tree",
]
MAX_ALTERNATE_DEPTH = 5
"""How deep git itself follows alternates of alternates."""


def _borrowed(objects: Path) -> list[Path]:
    """The user's object store and every store it borrows from through alternates, as
    git reads them, each once."""
    found: list[Path] = []
    level = [objects]
    for _ in range(MAX_ALTERNATE_DEPTH + 1):
        nxt: list[Path] = []
        for store in level:
            real = Path(os.path.realpath(store))
            if real in found or not real.is_dir():
                continue
            found.append(real)
            try:
                lines = (real / "info" / "alternates").read_text().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            nxt += [real / ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
        level = nxt
    return found


SHARED_OBJECTS = ".objects"
"""Under a workspace root: the object stores its runs read (see `base_objects`)."""


def _shared_store(root: Path, objects: Path, sha: str) -> Path:
    """Where the store of what `sha` reaches in `objects` lives under `root`: one per
    repository and base, so the runs of a batch that share both share it."""
    key = hashlib.sha256(f"{objects}\0{sha}".encode(errors="surrogateescape")).hexdigest()
    return root / SHARED_OBJECTS / key[:32]


def base_objects(repo: Path, objects: Path, store: Path, sha: str) -> None:
    """Make `store` once: an object store holding exactly the objects `sha` reaches in
    `repo` (its history, trees and blobs, to a shallow clone's boundary), as one pack.

    The workspace's git reads only this store, so a run cannot find the result commits
    that earlier runs of the batch put into the user's repository, other branches,
    older batches' results or dangling objects: only what checking out the base would
    give it. Made under a lock by the first run that needs it and kept read-only for the
    others until the batch clears its root, so a thousand runs on one base pay for one
    pack. The folder is readable by the sandbox's user; the one holding it is private."""
    private_dirs(store.parent)
    fd = os.open(store.parent / f"{store.name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if store.is_dir():
            return
        tmp = store.with_name(f"{store.name}.tmp-{uuid.uuid4().hex[:8]}")
        try:
            os.mkdir(tmp, 0o755)
            os.mkdir(tmp / "pack", 0o755)
            # `--revs` walks from `sha` as `rev-list --objects` does (honouring a shallow
            # clone's boundary and the stores the repository borrows from); without
            # `--thin` the pack holds every delta base it needs. git writes its temporary
            # file in the object directory and renames it: `tmp` is made that directory
            # (the user's store read as an alternate), so the rename stays on the run
            # directories' filesystem.
            env = {
                "GIT_OBJECT_DIRECTORY": str(tmp),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(objects),
            }
            try:
                run_git(
                    ["pack-objects", "--revs", "--quiet", "--delta-base-offset"]
                    + [str(tmp / "pack" / "pack")],
                    cwd=repo,
                    env=env,
                    input=f"{sha}\n".encode(),
                    # Not synced: the store lives and dies with the batch's work root,
                    # so a machine crash loses nothing a resume needs (two fsyncs, a few
                    # ms of every batch's first run).
                    config=[("core.fsync", "none")],
                )
            except GitError as exc:
                why = exc.stderr.strip().splitlines()[-1:] or ["unknown error"]
                raise WorkspaceError(
                    f"{repo}: cannot gather the objects {sha} reaches for the run ({why[0]})"
                ) from exc
            for f in (tmp / "pack").iterdir():  # whatever the umask: the sandbox's user reads
                f.chmod(0o444)
            os.rename(tmp, store)
        except BaseException:
            hostfs.remove_tree(tmp)
            raise
    finally:
        os.close(fd)


def _check_name(name: str) -> None:
    if (
        not name
        or name in (".", "..")
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\0" in name
    ):
        raise WorkspaceError(f"workspace name {name!r}: use one plain path component")


def _init(target: Path, fmt: str, *, bare: bool) -> None:
    # An empty --template: no sample hooks, no info/exclude copied from the system.
    run_git(
        [
            "init",
            "--quiet",
            "--template=",
            f"--object-format={fmt}",
            *(["--bare"] if bare else []),
            str(target),
        ]
    )


def _copy_shallow(src_git_dir: Path, dst_git_dir: Path) -> None:
    """A shallow user clone (CI's `fetch-depth: 1`) has no parents past the boundary;
    without its `shallow` file `git log` in the workspace would die on a missing object."""
    common = common_dir(src_git_dir)
    shallow = common / "shallow"
    if shallow.exists():
        shutil.copyfile(shallow, dst_git_dir / "shallow")


def is_dirty(repo: Path) -> bool:
    """Any staged, unstaged or untracked change, read without writing the user's index
    (`GIT_OPTIONAL_LOCKS=0`) and without running their filter drivers."""
    proc = run_git(
        [
            "status",
            "--porcelain=v2",
            "-z",
            "--untracked-files=normal",
            "--ignore-submodules=dirty",
            "--no-renames",
        ],
        cwd=repo,
        env=config_env(user_filter_blanks(repo)),
    )
    return bool(proc.stdout)
