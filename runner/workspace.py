"""Isolated git workspaces for runs, and their results as new branches and patches.

The user's repository is only ever *read*, except for two additive writes: new objects in
its object store and new refs under `refs/heads/` (created, never moved). Its working
tree, index, HEAD, stash, config, hooks and existing branches are never touched, and no
`git worktree` bookkeeping is written into its `.git`.

How a workspace is laid out (for a run named `N` under `root`):

    root/N/            the work tree the agent sees; `root/N/.git` is a fresh repository whose
                       `objects/info/alternates` points at the user's object store (read-only
                       use) and whose HEAD is the base commit, detached
    root/.N.runner/    runner-private, never shown to the agent: `git/` (a pristine bare
                       repository holding only our own config) and `index`

Every git command the runner itself runs on a workspace uses the *private* git dir, reading
the user's object store (as `GIT_OBJECT_DIRECTORY`, or through alternates while a result
is staged in the private store; `_publish`). So:
- nothing the agent writes into `root/N/.git` (hooks, `core.fsmonitor`, filter drivers,
  `core.worktree`, `commit.gpgSign`/`gpg.program`, a doctored index) is ever read by the
  runner's own git;
- the result commit's objects are moved into the user's object store as packs: there is
  no fetch, so no `upload-pack` runs in an agent-controlled repository, and no loose
  objects pile up there;
- the result depends only on the work tree's content and our fixed config (no user
  `core.autocrlf`, `format.*`, `diff.noprefix` or filter drivers).

Why this and not `git worktree add` or `git clone`: `bench/workspace.py`, a generated
repository of 5,000 files (packed), 2 CPUs, git 2.39, median of 10 runs taken round-robin:

    setup of one workspace      tmpfs (/dev/shm)   this VM's ext4 disk
    worktree add --detach        102-119 ms          2.46 s
    clone --shared + checkout    102-127 ms          2.33 s
    clone --local + checkout     104-125 ms          2.31 s
    this module's prepare        112-143 ms          2.25 s   (incl. an 11-15 ms dirty check)

Writing 5,000 files is the whole cost and the same for every strategy, so the choice is
made on safety:
- `git worktree add` writes `.git/worktrees/<name>` into the user's repository and shares
  its refs, config and hooks with the agent (an agent's `git branch -f main` would move
  the user's branch), and runs the user's `post-checkout` hook unless disabled.
- `git clone --shared` copies every ref of the user's repo and leaves an `origin` remote
  pointing at it (an agent could push into the user's repo); `--local` also hardlinks
  objects. Both would then need a fetch back, running `upload-pack` in the agent's repo.
- init + alternates + `read-tree -u` does the same checkout with no refs, no remote, and a
  private index we keep.

`finish` (commit + patch + branch, 13 files changed) takes 136-172 ms (104-120 ms CPU);
with nothing changed 70-110 ms. Most of it is `git add` re-hashing files that were checked
out in the same second as the index was written (git's "racily clean" rule, which this
git build applies at one-second granularity); trusting those stat data instead could miss
an edit made within that second, so the cost stays.

GitPython is deliberately not used for running git: `git.Git.execute` builds the child
environment from a copy of `os.environ` and cannot drop an inherited `GIT_DIR`,
`GIT_INDEX_FILE` or `GIT_CONFIG_PARAMETERS` (present when the runner is started from a git
hook or `git rebase -x`; any of them would redirect our commands at the user's index), and
`import git` costs ~100 ms of start-up. Commands are plain argv lists run by `subprocess`
with an environment built from scratch (`git_env`).

Hardening of every git call (see `HARDENING` and `git_env`): hooks off
(`core.hooksPath=/dev/null`), `core.fsmonitor=false`, no system or global config, no
pager/editor/askpass/credential helpers, no signing programs, no auto-gc, only the `file`
transport (plus network transports for `push`), no replace refs, no external diff or
textconv, and filter drivers (clean/smudge/process) blanked wherever the user's own
config is read.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from string import Formatter

import anyio

from runner import gitnames, hostfs
from runner.errors import RunnerError, UnsafeFileError
from runner.redact import Redactor

__all__ = [
    "DEFAULT_FORBIDDEN",
    "IDENTITY",
    "FileChange",
    "GitError",
    "PushResult",
    "Result",
    "Scope",
    "Workspace",
    "WorkspaceError",
    "branch_name",
    "check_scope",
    "cleanup",
    "finish",
    "prepare",
    "push",
]

IDENTITY = ("runner", "runner@localhost")
"""Author and committer of every result commit: fixed, so results never carry the
identity of whoever happens to run the batch, and commits are reproducible in tests."""

DEFAULT_FORBIDDEN = (".github/workflows/**",)
"""Paths no run may change unless an allowed pattern names them explicitly: a workflow
edited by a model runs with the repository's CI secrets on the next push."""

HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),        # no hooks (pre-commit, reference-transaction, ...)
    ("core.fsmonitor", "false"),            # a configured fsmonitor is an arbitrary command
    ("core.protectNTFS", "true"),           # `.git` aliases refused (see runner/gitnames.py)
    ("core.protectHFS", "true"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),              # an empty value resets the helper list
    ("commit.gpgSign", "false"),            # signing runs gpg.program / gpg.ssh.program
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("gc.auto", "0"),                       # no background repacks of the user's store
    ("maintenance.auto", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.detachedHead", "false"),
)
"""Config forced on every git invocation (as `-c`, which beats repository config)."""

BLANKED_FILTER_KEYS = ("clean", "smudge", "process")

_ENV_DROP = frozenset({"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "LESSOPEN", "LESSCLOSE"})
_LOCAL_PROTOCOLS = "file"
_PUSH_PROTOCOLS = "file:git:ssh:http:https"
_PRIVATE_SUFFIX = ".runner"
_MAX_COMPONENT = 100
_MAX_BRANCH_SUFFIX = 1000
_TEMPLATE_FIELDS = frozenset({"run", "task", "model", "repeat", "name", "variant"})


class WorkspaceError(RunnerError):
    """A workspace could not be prepared, committed, branched, pushed or removed."""


class GitError(WorkspaceError):
    """A git command failed. Carries the argv (never a secret: those travel in the
    environment) and git's stderr with any secret removed."""

    def __init__(self, argv: Sequence[str], returncode: int, stderr: str,
                 command: Sequence[str] | None = None) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        shown = " ".join(["git", *(command if command is not None else argv[1:])])
        super().__init__(f"`{shown}` failed (exit {returncode}): {stderr.strip()[:2000]}")


@dataclass(frozen=True)
class Workspace:
    """One run's checkout of `base`. Give the agent `path` (and read-only access to
    `objects`, which `path/.git` borrows through alternates); never `private_dir`."""

    path: Path
    """The work tree the agent works in."""
    repo: Path
    """The user's repository (resolved)."""
    git_dir: Path
    """The user's git dir (absolute); refs are created here."""
    objects: Path
    """The user's object store: result objects are written here; bind it read-only."""
    base: str
    """The commit `base_ref` resolved to when the workspace was made."""
    base_tree: str
    base_ref: str
    base_dirty: bool
    """The user's tree had uncommitted or untracked changes; they are not in the workspace."""
    setup_s: float
    """Wall time `prepare` took, for the report."""
    object_format: str
    private_dir: Path
    """Runner-private git dir and index (outside `path`, so the agent cannot doctor them)."""

    @property
    def _private_git(self) -> Path:
        return self.private_dir / "git"

    @property
    def _index(self) -> Path:
        return self.private_dir / "index"


@dataclass(frozen=True)
class FileChange:
    """One path in a result, as `git diff-tree -M` sees it."""

    path: str
    status: str
    """`A`dded, `M`odified, `D`eleted, `R`enamed, `T`ype changed (e.g. file to symlink)."""
    old_path: str | None
    insertions: int
    deletions: int
    binary: bool


@dataclass(frozen=True)
class Result:
    """What a run produced: a commit on top of `base`, its patch, and maybe a branch."""

    commit: str
    base: str
    branch: str | None
    """The branch created in the user's repository, or None (not asked for, or scope
    violations). The final name may carry a `-2`, `-3`, ... suffix."""
    files: tuple[FileChange, ...]
    insertions: int
    deletions: int
    patch_path: Path
    violations: tuple[str, ...] = ()

    @property
    def files_changed(self) -> int:
        return len(self.files)

    @property
    def changed_paths(self) -> list[str]:
        """Every path touched, both sides of a rename included."""
        out: list[str] = []
        for f in self.files:
            if f.old_path is not None:
                out.append(f.old_path)
            out.append(f.path)
        return out


@dataclass(frozen=True)
class Scope:
    """Which paths a run may change and how much. `allowed=None` allows everything."""

    allowed: list[str] | None = None
    forbidden: list[str] | None = None
    max_diff_lines: int | None = None


@dataclass(frozen=True)
class PushResult:
    remote: str
    branch: str
    ref: str


# ---------------------------------------------------------------------------------------
# Running git

def git_env(extra: Mapping[str, str] | None = None, *, protocols: str = _LOCAL_PROTOCOLS
            ) -> dict[str, str]:
    """The environment of every git child, built from scratch.

    Every inherited `GIT_*` variable is dropped: `GIT_DIR`, `GIT_WORK_TREE` or
    `GIT_INDEX_FILE` left by a hook would point our commands at the user's repository, and
    `GIT_CONFIG_PARAMETERS`/`GIT_EXTERNAL_DIFF`/`GIT_SSH_COMMAND` would run other code.
    """
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") and k not in _ENV_DROP}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_OPTIONAL_LOCKS": "0",   # `status` must not refresh and rewrite the user's index
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_ALLOW_PROTOCOL": protocols,  # no ext::, fd::, and no network unless pushing
        "GIT_PAGER": "cat",
        "GIT_EDITOR": "true",
        "LC_ALL": "C",
        "LANGUAGE": "C",
    })
    if extra:
        env.update(extra)
    return env


def _argv(args: Sequence[str], config: Iterable[tuple[str, str]] = ()) -> list[str]:
    argv = ["git"]
    for key, value in (*HARDENING, *config):
        argv += ["-c", f"{key}={value}"]
    return argv + list(args)


def _git(args: Sequence[str], *, env: Mapping[str, str] | None = None,
         cwd: Path | None = None, input: bytes | None = None,
         config: Iterable[tuple[str, str]] = (), secrets: Sequence[str] = (),
         protocols: str = _LOCAL_PROTOCOLS, check: bool = True
         ) -> subprocess.CompletedProcess[bytes]:
    argv = _argv(args, config)
    proc = subprocess.run(argv, input=input, capture_output=True, cwd=cwd,
                          env=git_env(env, protocols=protocols), check=False)
    if check and proc.returncode != 0:
        raise GitError(argv, proc.returncode,
                       _scrub(proc.stderr.decode(errors="replace"), secrets), args)
    return proc


def _git_to_file(args: Sequence[str], path: Path, *, env: Mapping[str, str],
                 cwd: Path) -> None:
    """git's stdout written atomically to `path` (see `atomic_write_bytes`), streamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            argv = _argv(args)
            proc = subprocess.run(argv, stdout=f, stderr=subprocess.PIPE, cwd=cwd,
                                  env=git_env(env), check=False)
            if proc.returncode != 0:
                raise GitError(argv, proc.returncode,
                               proc.stderr.decode(errors="replace")[-4000:], args)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _out(args: Sequence[str], *, env: Mapping[str, str] | None = None,
         cwd: Path | None = None, input: bytes | None = None) -> str:
    return _git(args, env=env, cwd=cwd, input=input).stdout.decode(
        errors="surrogateescape").strip()


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Config as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`: unlike `-c key=value` a key may
    contain `=`, and a value never appears in the process list."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[REDACTED]")
    return text


def _user_filter_blanks(repo: Path) -> list[tuple[str, str]]:
    """Config that disables every filter driver the user's config defines.

    `git status` in the user's tree runs a driver's clean command on every stat-dirty file
    that `.gitattributes` routes to it; blanking `clean`/`smudge`/`process` (an empty value
    means "no command") and clearing `required` turns them all into no-ops.
    """
    proc = _git(["config", "--list", "--name-only", "-z"], cwd=repo, check=False)
    blanks: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name in proc.stdout.decode(errors="replace").split("\0"):
        if not name.lower().startswith("filter.") or name.count(".") < 2:
            continue
        driver = name[len("filter."):name.rindex(".")]
        if driver in seen:
            continue
        seen.add(driver)
        blanks += [(f"filter.{driver}.{k}", "") for k in BLANKED_FILTER_KEYS]
        blanks.append((f"filter.{driver}.required", "false"))
    return blanks


def _staging_env(ws: Workspace) -> dict[str, str]:
    """`_private_env` with new objects written to the private store (the user's is read
    through alternates): `_publish` then moves them in as packs, never as loose files."""
    return {**_private_env(ws), "GIT_OBJECT_DIRECTORY": str(ws._private_git / "objects"),
            "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(ws.objects)}


def _publish(ws: Workspace, env: Mapping[str, str], commit: str) -> None:
    """Give the user's object store the result's new objects as whole packs: 100k files
    written by an agent become one pack, not 100k loose objects.

    Loose objects are packed (`--incremental` skips what is packed already, such as a
    huge file `git add` streamed into its own pack; `--local` skips the user's own
    objects); then each private pack is moved in, its `.idx` last, since git only sees
    a pack once its index is there."""
    store = ws._private_git / "objects" / "pack"
    _git(["pack-objects", "--revs", "--local", "--incremental", "-q", str(store / "pack")],
         env=env, cwd=ws.path, input=f"{commit}\n^{ws.base}\n".encode())
    dest = ws.objects / "pack"
    dest.mkdir(exist_ok=True)
    for pack in sorted(store.glob("pack-*.pack")):
        for suffix in (".pack", ".rev", ".idx"):
            src = pack.with_suffix(suffix)
            if src.exists():
                _move_into(src, dest / src.name)


def _move_into(src: Path, dst: Path) -> None:
    """Rename where possible; across filesystems copy to a temporary name, then rename,
    so git never sees half a file."""
    if dst.exists():
        return   # the same pack (named by its content) is already there
    try:
        os.replace(src, dst)
    except OSError:
        tmp = dst.with_name(f".tmp-{dst.name}")
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o444)
        os.replace(tmp, dst)


def _private_env(ws: Workspace) -> dict[str, str]:
    return {"GIT_DIR": str(ws._private_git), "GIT_WORK_TREE": str(ws.path),
            "GIT_INDEX_FILE": str(ws._index), "GIT_OBJECT_DIRECTORY": str(ws.objects)}


# ---------------------------------------------------------------------------------------
# prepare

async def prepare(repo: Path, *, base: str = "HEAD", root: Path, name: str) -> Workspace:
    """Check out the commit `base` resolves to into `root/name`, for one run.

    Many workspaces on one repository work side by side. Uncommitted changes in the user's
    tree are not included; `Workspace.base_dirty` says whether there were any (refusing a
    dirty tree is the caller's policy). `root` belongs outside the user's work tree (or in
    an ignored directory), or their `git status` shows the workspaces.
    """
    return await anyio.to_thread.run_sync(
        partial(prepare_sync, repo, base=base, root=root, name=name))


def check_base(repo: Path, base: str = "HEAD") -> str:
    """The commit `base` names in `repo`, or a WorkspaceError saying why there is none.
    Run before a batch starts, so a wrong repo or base is bad input, not a failed run."""
    if not base or base.startswith("-") or any(ord(c) < 0x20 for c in base):
        raise WorkspaceError(f"base {base!r} is not a revision")
    try:
        return _out(["rev-parse", "--verify", "--end-of-options", f"{base}^{{commit}}"],
                    cwd=repo.resolve()).strip()
    except GitError as exc:
        reason = exc.stderr.strip().splitlines()[-1:] or ["unknown error"]
        raise WorkspaceError(f"{repo}: {base!r} is not a commit there ({reason[0]}); the "
                             "runner starts every run from a commit, so the repository needs "
                             "one (git init && git add -A && git commit)") from exc


def prepare_sync(repo: Path, *, base: str = "HEAD", root: Path, name: str) -> Workspace:
    """`prepare` without the thread hop, for benchmarks and synchronous callers."""
    t0 = time.perf_counter()
    _check_name(name)
    repo = repo.resolve()
    if not base or base.startswith("-") or any(ord(c) < 0x20 for c in base):
        raise WorkspaceError(f"base {base!r} is not a revision")
    # One call: the trailing `--` makes git read both as revisions, never as paths.
    try:
        lines = _out(["rev-parse", "--path-format=absolute", "--git-dir", "--git-path",
                      "objects", "--is-bare-repository", "--show-object-format",
                      f"{base}^{{commit}}", f"{base}^{{tree}}", "--"], cwd=repo).splitlines()
    except GitError as exc:
        raise WorkspaceError(f"{repo}: base {base!r} is not a commit there ({exc.stderr.strip()})"
                             ) from exc
    git_dir, objects, bare, fmt = Path(lines[0]), Path(lines[1]), lines[2] == "true", lines[3]
    sha, tree = lines[4], lines[5]
    dirty = False if bare else _is_dirty(repo)

    root = root.resolve()
    path, private = root / name, root / f".{name}{_PRIVATE_SUFFIX}"
    for p in (path, private):
        if p.exists() or p.is_symlink():
            raise WorkspaceError(f"workspace {p} already exists")
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(path=path, repo=repo, git_dir=git_dir, objects=objects, base=sha,
                   base_tree=tree, base_ref=base, base_dirty=dirty, setup_s=0.0,
                   object_format=fmt, private_dir=private)
    try:
        path.mkdir()
        private.mkdir()
        _init(ws._private_git, fmt, bare=True)
        with (ws._private_git / "config").open("a") as f:
            # Without these, git still reads ~/.config/git/{ignore,attributes} by default
            # and the same work tree would give different results on different machines.
            f.write(f"[core]\n\texcludesFile = {os.devnull}\n\tattributesFile = {os.devnull}\n")
        _copy_shallow(git_dir, ws._private_git)
        _git(["read-tree", "--reset", "-u", sha], env=_private_env(ws), cwd=path)
        agent_git = path / ".git"
        _init(path, fmt, bare=False)
        (agent_git / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (agent_git / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        (agent_git / "HEAD").write_text(f"{sha}\n")
        _copy_shallow(git_dir, agent_git)
        shutil.copyfile(ws._index, agent_git / "index")
        with (agent_git / "config").open("a") as f:
            # So the agent's own `git commit` works without a global identity.
            f.write(f"[user]\n\tname = {IDENTITY[0]}\n\temail = {IDENTITY[1]}\n")
    except BaseException:
        _remove(path)
        _remove(private)
        raise
    return replace(ws, setup_s=time.perf_counter() - t0)


def _check_name(name: str) -> None:
    if (not name or name in (".", "..") or name.startswith(".") or "/" in name
            or "\\" in name or "\0" in name):
        raise WorkspaceError(f"workspace name {name!r}: use one plain path component")


def _init(target: Path, fmt: str, *, bare: bool) -> None:
    # An empty --template: no sample hooks, no info/exclude copied from the system.
    _git(["init", "--quiet", "--template=", f"--object-format={fmt}",
          *(["--bare"] if bare else []), str(target)])


def _copy_shallow(src_git_dir: Path, dst_git_dir: Path) -> None:
    """A shallow user clone (CI's `fetch-depth: 1`) has no parents past the boundary;
    without its `shallow` file `git log` in the workspace would die on a missing object."""
    common = _common_dir(src_git_dir)
    shallow = common / "shallow"
    if shallow.exists():
        shutil.copyfile(shallow, dst_git_dir / "shallow")


def _common_dir(git_dir: Path) -> Path:
    marker = git_dir / "commondir"
    if marker.exists():
        return (git_dir / marker.read_text().strip()).resolve()
    return git_dir


def _is_dirty(repo: Path) -> bool:
    """Any staged, unstaged or untracked change, read without writing the user's index
    (`GIT_OPTIONAL_LOCKS=0`) and without running their filter drivers."""
    proc = _git(["status", "--porcelain=v2", "-z", "--untracked-files=normal",
                 "--ignore-submodules=dirty", "--no-renames"],
                cwd=repo, env=config_env(_user_filter_blanks(repo)))
    return bool(proc.stdout)


# ---------------------------------------------------------------------------------------
# finish

async def finish(ws: Workspace, *, branch_template: str, fields: Mapping[str, str],
                 message: str, patch_path: Path, create_branch: bool = True,
                 scope: Scope | None = None,
                 redact: Redactor | None = None,
                 before_branch: Callable[[str, str], None] | None = None,
                 on_left_out: Callable[[list[str]], None] | None = None) -> Result | None:
    """Commit everything in the workspace, write its patch, and create a branch for it.

    Returns None, with no commit and no branch, when the tree equals the base. The commit
    is one commit on top of `base` whatever the agent did with its own `.git` (its commits,
    index and config are ignored), made by `IDENTITY`. `.gitignore` files in the work tree
    are honoured; new untracked files are included.

    The patch is `git format-patch` output (binary deltas, full object ids, renames): both
    `git am` (recreates the commit) and `git apply` accept it. It is written atomically
    before any branch exists, so a failure later never loses it.

    No branch is created when `create_branch` is false or `scope` finds violations
    (`Result.violations`); an existing branch is never moved: `-2`, `-3`, ... is appended.

    What git must not or cannot record is left out, never failing the commit: names git
    (with NTFS and HFS+ protection) treats as `.git`, a nested repository's `.git` (its
    files are committed as plain files; its `gitdir:` is never followed), FIFOs, devices,
    sockets and unreadable entries. `on_left_out` gets them, as `path: why`.

    `redact` removes secrets from the changed files before the commit, so neither the
    commit nor the patch carries them; each file it changed is a violation (no branch: a
    run that wrote a secret into the repository is not one to push).
    """
    return await anyio.to_thread.run_sync(partial(
        finish_sync, ws, branch_template=branch_template, fields=fields, message=message,
        patch_path=patch_path, create_branch=create_branch, scope=scope, redact=redact,
        before_branch=before_branch, on_left_out=on_left_out))


def finish_sync(ws: Workspace, *, branch_template: str, fields: Mapping[str, str],
                message: str, patch_path: Path, create_branch: bool = True,
                scope: Scope | None = None,
                redact: Redactor | None = None,
                 before_branch: Callable[[str, str], None] | None = None,
                 on_left_out: Callable[[list[str]], None] | None = None) -> Result | None:
    """`finish` without the thread hop."""
    name = branch_name(branch_template, fields) if create_branch else None
    env = _staging_env(ws)
    tracked = _index_modes(ws, env)
    paths, left_out = _worktree(ws, env, tracked)
    # Before anything is staged, since staging writes the blobs.
    redacted = (_redact_files(ws, redact, _touched(ws, env, paths, tracked))
                if redact is not None else [])
    if redacted:
        paths, left_out = _worktree(ws, env, tracked)
    _stage(ws, env, paths, tracked)
    if left_out and on_left_out is not None:
        on_left_out(left_out)
    tree = _out(["write-tree"], env=env, cwd=ws.path)
    if tree == ws.base_tree:
        return None
    ident = {"GIT_AUTHOR_NAME": IDENTITY[0], "GIT_AUTHOR_EMAIL": IDENTITY[1],
             "GIT_COMMITTER_NAME": IDENTITY[0], "GIT_COMMITTER_EMAIL": IDENTITY[1]}
    commit = _out(["commit-tree", "--no-gpg-sign", "-p", ws.base, "-F", "-", tree],
                  env={**env, **ident}, cwd=ws.path, input=message.encode())
    files = _changes(ws, commit, env)
    # Straight from git to the file: a patch of a 1 GiB file never passes through memory.
    # A file over PATCH_FILE_MAX_BYTES is left out of the patch (the commit and branch
    # hold it): git builds a file's diff in memory (3 GB for one 1 GiB file) and takes
    # seconds per 100 MiB, which a batch stopping on SIGTERM cannot afford.
    big = _too_big_for_patch(ws, files)
    _git_to_file(["format-patch", "-1", "--stdout", "--binary", "--full-index", "-M",
                  "--no-signature", "--no-thread", "--no-attach", "--no-notes",
                  "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/",
                  commit, "--", ".", *(f":(exclude,literal){p}" for p in big)],
                 patch_path, env=env, cwd=ws.path)
    _publish(ws, env, commit)
    ins = sum(f.insertions for f in files)
    dels = sum(f.deletions for f in files)
    result = Result(commit=commit, base=ws.base, branch=None, files=files, insertions=ins,
                    deletions=dels, patch_path=patch_path)
    violations: list[str] = []
    if scope is not None:
        violations = check_scope(result.changed_paths, allowed=scope.allowed,
                                 forbidden=scope.forbidden or [],
                                 max_diff_lines=scope.max_diff_lines, diff_lines=ins + dels)
    violations += [f"{path}: held the value of a secret (redacted in the commit and the "
                   "patch)" for path in redacted]
    branch = None
    if name is not None and not violations:
        if before_branch is not None:
            before_branch(name, commit)   # journaled first: resume may then delete it
        branch = _create_branch(ws, name, commit)
    return replace(result, branch=branch, violations=tuple(violations))


ADD_CONFIG = (("core.compression", "1"), ("core.bigFileThreshold", "16m"),
              ("pack.compression", "0"))
"""How `git add` stores what the agent wrote: small files deflated fast (level 1); a file
over 16 MiB streamed straight into one pack, not compressed (hashing 1 GiB takes seconds,
deflating it a minute, and a batch stopping on SIGTERM waits for it)."""

PATCH_FILE_MAX_BYTES = 16 << 20
"""Changed files bigger than this are in the commit but not in the patch file."""


def _too_big_for_patch(ws: Workspace, files: Sequence[FileChange]) -> list[str]:
    out = []
    for f in files:
        if f.status == "D":
            continue
        try:
            if os.lstat(ws.path / f.path).st_size > PATCH_FILE_MAX_BYTES:
                out.append(f.path)
        except OSError:
            continue
    return out


def _index_modes(ws: Workspace, env: Mapping[str, str]) -> dict[str, str]:
    """Path -> mode of every entry in the private index (the base tree)."""
    out = _git(["ls-files", "-z", "--stage"], env=env, cwd=ws.path).stdout
    modes: dict[str, str] = {}
    for rec in filter(None, out.split(b"\0")):
        meta, _, path = rec.partition(b"\t")
        modes[os.fsdecode(path)] = meta.split(b" ", 1)[0].decode()
    return modes


_GITLINK = "160000"


def _worktree(ws: Workspace, env: Mapping[str, str], tracked: Mapping[str, str]
              ) -> tuple[list[str], list[str]]:
    """(paths to record, `path: why` for what is left out) of the work tree.

    The runner walks the tree itself, iteratively and without following links, instead
    of letting `git add` do it: git would take a directory holding `.git` for a nested
    repository (recording a gitlink and losing its files, or following a `gitdir:` line
    to any repository on the host), and would fail the whole commit on one name it
    refuses. Here no `.git` below the top is ever opened; the files beside it are
    recorded as plain files. Untracked files that `.gitignore` rules exclude are left
    out as `git add` leaves them out.
    """
    paths: list[str] = []
    left_out: list[str] = []
    check_read = os.geteuid() != 0
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            with os.scandir(ws.path / rel if rel else ws.path) as it:
                entries = list(it)
        except OSError as exc:
            left_out.append(f"{rel}/: cannot be listed ({exc.strerror or exc})")
            continue
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            if path == ".git":
                continue   # the agent's own repository: the runner never reads it
            link = e.is_symlink()
            why = gitnames.git_refuses(e.name, symlink=link)
            if why is not None:
                if e.name == ".git":
                    why = ("a nested repository's `.git`: never read; the files beside "
                           "it are committed as plain files")
                left_out.append(f"{path}: {why}")
                continue
            if tracked.get(path) == _GITLINK and e.is_dir(follow_symlinks=False):
                continue   # a submodule of the base: its gitlink stays as it was
            if link:
                paths.append(path)
            elif e.is_dir(follow_symlinks=False):
                stack.append(path)
            elif e.is_file(follow_symlinks=False):
                if check_read and not os.access(e.path, os.R_OK):
                    left_out.append(f"{path}: not readable")
                else:
                    paths.append(path)
            else:
                mode = e.stat(follow_symlinks=False).st_mode
                left_out.append(f"{path}: a {hostfs.kind(mode)}, which git cannot record")
    # Ignored entries are no loss (`node_modules/x/.git` is common): not reported.
    names = {e.split(": ", 1)[0].rstrip("/"): e for e in left_out}
    new = [p for p in paths if p not in tracked]
    ignored = _ignored(ws, env, [*new, *names]) if new or names else set()
    return ([p for p in paths if p not in ignored],
            sorted(e for p, e in names.items() if p not in ignored))


def _ignored(ws: Workspace, env: Mapping[str, str], paths: Sequence[str]) -> set[str]:
    """Which of these untracked paths `.gitignore` rules (and info/exclude) exclude."""
    proc = _git(["check-ignore", "-z", "--stdin"], env=env, cwd=ws.path, check=False,
                input=b"".join(os.fsencode(p) + b"\0" for p in paths))
    if proc.returncode not in (0, 1):
        raise GitError(_argv(["check-ignore"]), proc.returncode,
                       proc.stderr.decode(errors="replace"), ["check-ignore"])
    return {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}


def _stage(ws: Workspace, env: Mapping[str, str], paths: Sequence[str],
           tracked: Mapping[str, str]) -> None:
    """Make the private index hold exactly `paths` (plus the base's submodules that are
    still directories): entries no longer there are removed, the rest added or
    refreshed. Only files and links are named, never a directory, so git never looks
    for a repository inside one."""
    keep = set(paths)
    gone = [p for p, mode in tracked.items() if p not in keep
            and not (mode == _GITLINK and (ws.path / p).is_dir()
                     and not (ws.path / p).is_symlink())]
    if gone:
        _git(["update-index", "-z", "--force-remove", "--stdin"], env=env, cwd=ws.path,
             input=b"".join(os.fsencode(p) + b"\0" for p in gone))
    if paths:
        _git(["update-index", "-z", "--add", "--replace", "--stdin"], env=env,
             cwd=ws.path, config=ADD_CONFIG,
             input=b"".join(os.fsencode(p) + b"\0" for p in paths))


def _touched(ws: Workspace, env: Mapping[str, str], paths: Sequence[str],
             tracked: Mapping[str, str]) -> list[str]:
    """The paths the run added or changed: untracked ones, and tracked ones git finds
    modified. A tracked file the agent replaced by a directory is excluded from git's
    look: git would check whether that directory is a repository (and follow a
    `gitdir:` in it); submodules are not looked into either."""
    now_dirs = []
    for p, mode in tracked.items():
        if mode == _GITLINK:
            continue
        try:
            if stat.S_ISDIR(os.lstat(ws.path / p).st_mode):
                now_dirs.append(p)
        except OSError:
            continue
    # `diff`, not `diff-files`: it compares the content of stat-dirty files (handing
    # the tree to the sandbox user changed every file's owner and ctime).
    out = _git(["diff", "--name-only", "-z", "--no-renames", "--diff-filter=MT",
                "--ignore-submodules=all", "--no-ext-diff", "--no-textconv", "--", ".",
                *(f":(exclude,literal){p}" for p in now_dirs)], env=env, cwd=ws.path).stdout
    keep = set(paths)
    changed = [os.fsdecode(p) for p in out.split(b"\0") if p]
    return [p for p in paths if p not in tracked] + [p for p in changed if p in keep]


def _redact_files(ws: Workspace, redactor: Redactor, paths: Sequence[str]) -> list[str]:
    """Redact secrets in the files (contents, symlink targets, names) the run added or
    changed; returns the paths it had to touch. Reads only: no object is written.

    Every step is relative to a directory handle and never follows a link the agent
    made (`hostfs`): a rename or a new directory cannot land outside the workspace, and
    contents are streamed, so a huge file costs no memory."""
    touched: list[str] = []
    for rel in paths:
        raw = os.fsencode(rel)
        clean_name = redactor.bytes(raw)
        try:
            with hostfs.open_parent(ws.path, rel) as (dir_fd, name):
                hit = _redact_entry(dir_fd, name, redactor)
                if clean_name != raw:
                    with hostfs.open_parent(ws.path, os.fsdecode(clean_name),
                                            create=True) as (dest_fd, dest):
                        os.rename(name, dest, src_dir_fd=dir_fd, dst_dir_fd=dest_fd)
                    hit = True
        except (OSError, UnsafeFileError) as exc:
            # Better no commit and no patch at all than one that carries the secret.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise WorkspaceError(f"could not redact a secret from a changed file: "
                                 f"{why}") from None
        if hit:
            touched.append(os.fsdecode(clean_name))
    return touched


def _redact_entry(dir_fd: int, name: str, redactor: Redactor) -> bool:
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    if stat.S_ISLNK(st.st_mode):
        target = os.fsencode(os.readlink(name, dir_fd=dir_fd))
        if redactor.bytes(target) == target:
            return False
        os.unlink(name, dir_fd=dir_fd)
        os.symlink(redactor.bytes(target), name, dir_fd=dir_fd)
        return True
    if not stat.S_ISREG(st.st_mode):
        return False   # git records no FIFO, device or socket
    fd = hostfs.open_regular(name, dir_fd, name)
    try:
        if not redactor.contains(_chunks(fd)):
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        tmp = f".{name[:200]}.{os.getpid()}.redact"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                      stat.S_IMODE(st.st_mode), dir_fd=dir_fd)
        try:
            for piece in redactor.stream(_chunks(fd)):
                os.write(out, piece)
        finally:
            os.close(out)
        os.chmod(tmp, stat.S_IMODE(st.st_mode), dir_fd=dir_fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        return True
    finally:
        os.close(fd)


def _chunks(fd: int) -> Iterator[bytes]:
    while chunk := os.read(fd, hostfs.CHUNK):
        yield chunk


def _changes(ws: Workspace, commit: str, env: Mapping[str, str]) -> tuple[FileChange, ...]:
    out = _git(["diff-tree", "-r", "-z", "-M", "--no-ext-diff", "--no-textconv", "--raw",
                "--numstat", ws.base, commit], env=env, cwd=ws.path).stdout
    return parse_raw_numstat(out.decode("utf-8", errors="surrogateescape"))


def parse_raw_numstat(text: str) -> tuple[FileChange, ...]:
    """Parse `git diff-tree -z --raw --numstat` (raw records first, then numstat, in the
    same order; a rename carries two paths in both)."""
    tokens = text.split("\0")
    raw: list[tuple[str, str | None, str]] = []
    stats: list[tuple[int, int, bool]] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok:
            i += 1
            continue
        if tok.startswith(":"):
            status = tok.split()[-1][0]
            if status in "RC":
                raw.append((status, tokens[i + 1], tokens[i + 2]))
                i += 3
            else:
                raw.append((status, None, tokens[i + 1]))
                i += 2
            continue
        added, deleted, path = tok.split("\t", 2)
        binary = added == "-"
        stats.append((0 if binary else int(added), 0 if binary else int(deleted), binary))
        i += 1 if path else 3
    if len(raw) != len(stats):
        raise WorkspaceError("could not parse git diff-tree output")
    return tuple(FileChange(path=p, status=s, old_path=o, insertions=a, deletions=d,
                            binary=b) for (s, o, p), (a, d, b) in zip(raw, stats, strict=True))


_ref_locks: dict[str, threading.Lock] = {}
_ref_locks_guard = threading.Lock()


def _ref_lock(git_dir: Path) -> threading.Lock:
    """One lock per user repository: concurrent `update-ref`s in one repo would race on
    `packed-refs.lock` and on creating shared parent directories."""
    key = str(_common_dir(git_dir))
    with _ref_locks_guard:
        return _ref_locks.setdefault(key, threading.Lock())


def _create_branch(ws: Workspace, name: str, commit: str) -> str:
    zero = "0" * len(commit)
    user = {"GIT_DIR": str(ws.git_dir)}
    with _ref_lock(ws.git_dir):
        for n in range(1, _MAX_BRANCH_SUFFIX + 1):
            candidate = name if n == 1 else f"{name}-{n}"
            ref = f"refs/heads/{candidate}"
            # old value = zero id: create only; git refuses if the ref exists.
            # Another runner process may hold a ref lock for a moment: let git retry it.
            proc = _git(["update-ref", "--create-reflog", "-m", "runner: result", ref, commit,
                         zero], env=user, config=[("core.filesRefLockTimeout", "2000")],
                        check=False)
            if proc.returncode == 0:
                return candidate
            exists = _git(["show-ref", "--verify", "--quiet", ref], env=user,
                          check=False).returncode == 0
            if not exists:
                raise GitError(_argv(["update-ref", ref]), proc.returncode,
                               proc.stderr.decode(errors="replace"), ["update-ref", ref])
    raise WorkspaceError(f"branch {name!r}: {_MAX_BRANCH_SUFFIX} names taken")


# ---------------------------------------------------------------------------------------
# branch names

_BAD_CHARS = re.compile(r"[^A-Za-z0-9._+-]+")


def _component(text: str) -> str:
    """One ref path component that `git check-ref-format` accepts: ASCII letters, digits
    and `._+-`; no `..`, no leading `.` or `-`, no trailing `.`, no `.lock` ending."""
    s = _BAD_CHARS.sub("-", text)
    s = re.sub(r"\.{2,}", ".", s)
    s = re.sub(r"-{2,}", "-", s)
    s = s.strip(".-")[:_MAX_COMPONENT].rstrip(".-")
    while s.lower().endswith(".lock"):
        s = s[:-5].rstrip(".-") + "-lock"
    return s or "_"


def branch_name(template: str, fields: Mapping[str, str]) -> str:
    """Render a branch template (`{run}`, `{task}`, `{model}`, `{repeat}`) into a valid
    branch name. A field's value never adds hierarchy (`openai/gpt-5` becomes
    `openai-gpt-5`), so two runs cannot collide as a file and a directory; the template's
    own `/` do."""
    parts: list[str] = []
    allowed = ", ".join(f"{{{f}}}" for f in sorted(_TEMPLATE_FIELDS))
    try:
        pieces = list(Formatter().parse(template))
    except ValueError:  # an unbalanced brace
        raise WorkspaceError(f"branch template {template!r}: unbalanced braces; fields are "
                             f"written {allowed}, and a literal brace cannot be part of a "
                             "branch name") from None
    for literal, field, spec, conv in pieces:
        parts.append(literal)
        if field is None:
            continue
        if field not in _TEMPLATE_FIELDS:
            raise WorkspaceError(
                f"branch template {template!r}: unknown field {{{field}}}; use {allowed}")
        if spec or conv:
            raise WorkspaceError(
                f"branch template {template!r}: {{{field}}} takes no format spec or "
                "conversion (`:...`, `!r`); write it bare")
        if field not in fields:
            raise WorkspaceError(f"branch template {template!r}: no value for {{{field}}}")
        parts.append(_component(fields[field]))
    comps = [_component(c) for c in "".join(parts).split("/") if c.strip()]
    name = "/".join(comps) or "runner"
    return "runner-HEAD" if name == "HEAD" else name


# ---------------------------------------------------------------------------------------
# scope

def check_scope(changed_paths: Iterable[str], *, allowed: list[str] | None,
                forbidden: list[str], max_diff_lines: int | None, diff_lines: int
                ) -> list[str]:
    """Violations of a run's scope, one sentence each; empty when the run is in scope.

    Patterns are matched against the whole repository-relative path: `*` and `?` stay
    within one directory, `**` spans any number of them (`**/x`, `a/**`, `a/**/b`), and a
    trailing `/` means everything below. `allowed=None` allows every path. The
    `DEFAULT_FORBIDDEN` patterns apply too, unless an allowed pattern that starts with a
    literal (not a wildcard) matches the path: `.github/**` allows a workflow, `**` does not.
    """
    allow = [(p, _glob(p)) for p in allowed] if allowed is not None else None
    deny = [(p, _glob(p)) for p in forbidden]
    default_deny = [(p, _glob(p)) for p in DEFAULT_FORBIDDEN]
    out: list[str] = []
    for path in dict.fromkeys(changed_paths):
        hit = next((p for p, rx in deny if rx.fullmatch(path)), None)
        if hit is not None:
            out.append(f"{path}: matches forbidden pattern {hit!r}")
            continue
        if allow is not None and not any(rx.fullmatch(path) for _, rx in allow):
            out.append(f"{path}: outside the allowed paths ({', '.join(allowed or [])})")
            continue
        hit = next((p for p, rx in default_deny if rx.fullmatch(path)), None)
        if hit is not None and not any(
                rx.fullmatch(path) and not _starts_with_wildcard(p) for p, rx in allow or []):
            out.append(f"{path}: matches {hit!r}, which needs an explicit allowed pattern "
                       "such as '.github/workflows/**'")
    if max_diff_lines is not None and diff_lines > max_diff_lines:
        out.append(f"diff has {diff_lines} changed lines; the limit is {max_diff_lines}")
    return out


def _starts_with_wildcard(pattern: str) -> bool:
    p = _normalise_pattern(pattern)
    return not p or p[0] in "*?["


def _normalise_pattern(pattern: str) -> str:
    p = pattern.strip()
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    return p + "**" if p.endswith("/") else p


def _glob(pattern: str) -> re.Pattern[str]:
    p = _normalise_pattern(pattern)
    out: list[str] = []
    i = 0
    while i < len(p):
        if p.startswith("**", i):
            if p.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
        elif p[i] == "*":
            out.append("[^/]*")
            i += 1
        elif p[i] == "?":
            out.append("[^/]")
            i += 1
        elif p[i] == "[" and (end := p.find("]", i + 2)) != -1:
            body = p[i + 1:end]
            neg = body[0] in "!^"
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(p[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)


# ---------------------------------------------------------------------------------------
# push

async def push(repo: Path, branch: str, *, remote: str, token: str | None = None
               ) -> PushResult:
    """Push a result branch to `remote` (a remote name or URL), creating it there only.

    The token travels as an `http.extraHeader` in the child's environment
    (`GIT_CONFIG_COUNT`/`KEY`/`VALUE`), never in argv or a URL, so it shows up in no
    process list, error message or return value. `--force-with-lease=<ref>:` makes the
    push fail instead of moving a branch that already exists on the remote.
    """
    return await anyio.to_thread.run_sync(
        partial(push_sync, repo, branch, remote=remote, token=token))


def push_sync(repo: Path, branch: str, *, remote: str, token: str | None = None
              ) -> PushResult:
    """`push` without the thread hop."""
    if not remote or remote.startswith("-") or any(ord(c) < 0x20 for c in remote):
        raise WorkspaceError(f"remote {remote!r} is not a remote name or URL")
    ref = f"refs/heads/{branch}"
    if branch.startswith("-") or _git(["check-ref-format", ref], check=False).returncode:
        raise WorkspaceError(f"branch {branch!r} is not a valid branch name")
    env: dict[str, str] = {}
    secrets: list[str] = []
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        header = f"Authorization: Basic {basic}"
        env = config_env([("http.extraHeader", header)])
        secrets = [header, basic, token]
    repo = repo.resolve()
    try:
        _git(["show-ref", "--verify", "--quiet", ref], cwd=repo)
    except GitError as exc:
        raise WorkspaceError(f"branch {branch!r} does not exist in {repo}") from exc
    # A remote name is pushed to by its URL: pushing to the name would also write
    # refs/remotes/<name>/<branch> into the user's repository.
    named = _git(["remote", "get-url", "--push", remote], cwd=repo, check=False)
    url = named.stdout.decode().strip() if named.returncode == 0 else remote
    if url.startswith("-"):
        raise WorkspaceError(f"remote {remote!r} has an unusable push URL")
    _git(["push", "--porcelain", "--no-verify", f"--force-with-lease={ref}:", url,
          f"{ref}:{ref}"], cwd=repo, env=env, secrets=secrets, protocols=_PUSH_PROTOCOLS)
    return PushResult(remote=remote, branch=branch, ref=ref)


# ---------------------------------------------------------------------------------------
# cleanup

async def cleanup(ws: Workspace) -> None:
    """Remove the workspace and its private state. Safe to call twice."""
    await anyio.to_thread.run_sync(partial(cleanup_sync, ws))


def cleanup_sync(ws: Workspace) -> None:
    _remove(ws.path)
    _remove(ws.private_dir)


def _remove(path: Path) -> None:
    """Delete a tree the agent shaped: any depth, links not followed, permissions it
    took away given back first (`hostfs.remove_tree`)."""
    hostfs.remove_tree(path)


async def delete_branch(repo: Path, branch: str, commit: str) -> None:
    """Remove the branches a killed attempt of this batch made, and only those."""
    await anyio.to_thread.run_sync(partial(delete_branch_sync, repo, branch, commit))


def delete_branch_sync(repo: Path, branch: str, commit: str) -> None:
    """Compare-and-delete: `branch` (or the `branch-N` it became when the name was taken)
    is removed only while it still points at `commit`, the result the journal recorded
    before the branch was made. A branch that existed before (the user's own
    `agent/t1` under a custom template) points elsewhere and is never touched, and
    `update-ref -d <ref> <commit>` makes the check and the deletion one atomic step.

    A ref lock a runner killed inside `git update-ref` left is removed too, but only when
    it holds this commit or nothing (git had not written it yet)."""
    git_dir = Path(_out(["rev-parse", "--absolute-git-dir"], cwd=repo))
    common = _common_dir(git_dir)
    user = {"GIT_DIR": str(git_dir)}
    ours = re.compile(re.escape(f"refs/heads/{branch}") + r"(?:-\d+)?")
    with _ref_lock(git_dir):
        lock = common / "refs" / "heads" / f"{branch}.lock"
        try:
            held = hostfs.read_regular(lock, 200).decode(errors="replace").strip()
        except (OSError, UnsafeFileError):
            held = None
        if held is not None and held in ("", commit):
            lock.unlink(missing_ok=True)
        refs = _git(["for-each-ref", "--format=%(refname)", f"--points-at={commit}",
                     "refs/heads/"], env=user, check=False).stdout.decode().split()
        for ref in refs:
            if ours.fullmatch(ref):
                _git(["update-ref", "-d", ref, commit], env=user, check=False)



def branch_state(repo: Path, branch: str, commit: str) -> str:
    """`present` (the branch points at `commit`), `moved` (it points elsewhere: someone
    built on it), `checked-out`, `gone`, or `invalid` (not a branch name)."""
    ref = f"refs/heads/{branch}"
    if _git(["check-ref-format", ref], cwd=repo, check=False).returncode != 0:
        return "invalid"
    tip = _git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo,
               check=False)
    if tip.returncode != 0:
        return "gone"
    head = _git(["symbolic-ref", "--quiet", "HEAD"], cwd=repo, check=False)
    if head.stdout.decode(errors="replace").strip() == ref:
        return "checked-out"
    return "present" if tip.stdout.decode().strip() == commit else "moved"


def delete_branch_at(repo: Path, branch: str, commit: str) -> bool:
    """Compare-and-delete: remove the branch only if it still points at `commit` (git
    checks that atomically under the ref's lock), so a branch someone moved is kept."""
    if branch_state(repo, branch, commit) != "present":
        return False
    proc = _git(["update-ref", "-d", f"refs/heads/{branch}", commit], cwd=repo, check=False)
    return proc.returncode == 0
