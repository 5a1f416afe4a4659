"""Whatever a run changed, kept: the work tree walked without following links,
hostile names left out, secrets redacted, one commit, a patch, a branch.

Why one module: capturing a result is one ordered procedure (walk, stage, redact, commit,
patch, branch) whose safety depends on the order.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

import anyio

from runner import gitnames, hostfs
from runner.errors import GitError, UnsafeFileError, WorkspaceError
from runner.redact import Redactor
from runner.sizes import PATCH_FILE_MAX_BYTES
from runner.workspace.git import (
    IDENTITY,
    MAX_BRANCH_SUFFIX,
    git_argv,
    git_out,
    publish,
    ref_lock,
    run_git,
    run_git_to_file,
    staging_env,
)
from runner.workspace.names import branch_name, check_scope
from runner.workspace.types import FileChange, Result, Scope, Workspace


async def finish(
    ws: Workspace,
    *,
    branch_template: str,
    fields: Mapping[str, str],
    message: str,
    patch_path: Path,
    create_branch: bool = True,
    scope: Scope | None = None,
    redact: Redactor | None = None,
    on_left_out: Callable[[list[str]], None] | None = None,
) -> Result | None:
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
    return await anyio.to_thread.run_sync(
        partial(
            finish_sync,
            ws,
            branch_template=branch_template,
            fields=fields,
            message=message,
            patch_path=patch_path,
            create_branch=create_branch,
            scope=scope,
            redact=redact,
            on_left_out=on_left_out,
        )
    )


def finish_sync(
    ws: Workspace,
    *,
    branch_template: str,
    fields: Mapping[str, str],
    message: str,
    patch_path: Path,
    create_branch: bool = True,
    scope: Scope | None = None,
    redact: Redactor | None = None,
    on_left_out: Callable[[list[str]], None] | None = None,
) -> Result | None:
    """`finish` without the thread hop."""
    name = branch_name(branch_template, fields) if create_branch else None
    env = staging_env(ws)
    tracked = _index_modes(ws, env)
    paths, left_out = _worktree(ws, env, tracked)
    # Before anything is staged, since staging writes the blobs.
    redacted = (
        _redact_files(ws, redact, _touched(ws, env, paths, tracked)) if redact is not None else []
    )
    if redacted:
        paths, left_out = _worktree(ws, env, tracked)
    _stage(ws, env, paths, tracked)
    if left_out and on_left_out is not None:
        on_left_out(left_out)
    tree = git_out(["write-tree"], env=env, cwd=ws.path)
    if tree == ws.base_tree:
        return None
    ident = {
        "GIT_AUTHOR_NAME": IDENTITY[0],
        "GIT_AUTHOR_EMAIL": IDENTITY[1],
        "GIT_COMMITTER_NAME": IDENTITY[0],
        "GIT_COMMITTER_EMAIL": IDENTITY[1],
    }
    commit = git_out(
        ["commit-tree", "--no-gpg-sign", "-p", ws.base, "-F", "-", tree],
        env={**env, **ident},
        cwd=ws.path,
        input=message.encode(),
    )
    files = _changes(ws, commit, env)
    # Straight from git to the file: a patch of a 1 GiB file never passes through memory.
    # A file over PATCH_FILE_MAX_BYTES is left out of the patch (the commit and branch
    # hold it): git builds a file's diff in memory (3 GB for one 1 GiB file) and takes
    # seconds per 100 MiB, which a batch stopping on SIGTERM cannot afford.
    big = _too_big_for_patch(ws, files)
    run_git_to_file(
        [
            "format-patch",
            "-1",
            "--stdout",
            "--binary",
            "--full-index",
            "-M",
            "--no-signature",
            "--no-thread",
            "--no-attach",
            "--no-notes",
            "--no-ext-diff",
            "--no-textconv",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            commit,
            "--",
            ".",
            *(f":(exclude,literal){p}" for p in big),
        ],
        patch_path,
        env=env,
        cwd=ws.path,
    )
    publish(ws, env, commit)
    ins = sum(f.insertions for f in files)
    dels = sum(f.deletions for f in files)
    result = Result(
        commit=commit,
        base=ws.base,
        branch=None,
        files=files,
        insertions=ins,
        deletions=dels,
        patch_path=patch_path,
    )
    violations: list[str] = []
    if scope is not None:
        violations = check_scope(
            result.changed_paths,
            allowed=scope.allowed,
            forbidden=scope.forbidden or [],
            max_diff_lines=scope.max_diff_lines,
            diff_lines=ins + dels,
        )
    violations += [
        f"{path}: held the value of a secret (redacted in the commit and the patch)"
        for path in redacted
    ]
    branch = _create_branch(ws, name, commit) if name is not None and not violations else None
    return replace(result, branch=branch, violations=tuple(violations))


async def make_branch(ws: Workspace, result: Result, name: str) -> Result:
    """The branch of a result `finish` made without one: for a caller that first writes
    down (in its journal) which branch it is about to make, so a resume may delete it."""
    branch = await anyio.to_thread.run_sync(_create_branch, ws, name, result.commit)
    return replace(result, branch=branch)


ADD_CONFIG = (
    ("core.compression", "1"),
    ("core.bigFileThreshold", "16m"),
    ("pack.compression", "0"),
)
"""How `git add` stores what the agent wrote: small files deflated fast (level 1); a file
over 16 MiB streamed straight into one pack, not compressed (hashing 1 GiB takes seconds,
deflating it a minute, and a batch stopping on SIGTERM waits for it)."""


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
    out = run_git(["ls-files", "-z", "--stage"], env=env, cwd=ws.path).stdout
    modes: dict[str, str] = {}
    for rec in filter(None, out.split(b"\0")):
        meta, _, path = rec.partition(b"\t")
        modes[os.fsdecode(path)] = meta.split(b" ", 1)[0].decode()
    return modes


_GITLINK = "160000"


def _worktree(
    ws: Workspace, env: Mapping[str, str], tracked: Mapping[str, str]
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
                continue  # the agent's own repository: the runner never reads it
            link = e.is_symlink()
            why = gitnames.git_refuses(e.name, symlink=link)
            if why is not None:
                if e.name == ".git":
                    why = (
                        "a nested repository's `.git`: never read; the files beside "
                        "it are committed as plain files"
                    )
                left_out.append(f"{path}: {why}")
                continue
            if tracked.get(path) == _GITLINK and e.is_dir(follow_symlinks=False):
                continue  # a submodule of the base: its gitlink stays as it was
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
    return (
        [p for p in paths if p not in ignored],
        sorted(e for p, e in names.items() if p not in ignored),
    )


def _ignored(ws: Workspace, env: Mapping[str, str], paths: Sequence[str]) -> set[str]:
    """Which of these untracked paths `.gitignore` rules (and info/exclude) exclude."""
    proc = run_git(
        ["check-ignore", "-z", "--stdin"],
        env=env,
        cwd=ws.path,
        check=False,
        input=b"".join(os.fsencode(p) + b"\0" for p in paths),
    )
    if proc.returncode not in (0, 1):
        raise GitError(
            git_argv(["check-ignore"]),
            proc.returncode,
            proc.stderr.decode(errors="replace"),
            ["check-ignore"],
        )
    return {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}


def _stage(
    ws: Workspace, env: Mapping[str, str], paths: Sequence[str], tracked: Mapping[str, str]
) -> None:
    """Make the private index hold exactly `paths` (plus the base's submodules that are
    still directories): entries no longer there are removed, the rest added or
    refreshed. Only files and links are named, never a directory, so git never looks
    for a repository inside one."""
    keep = set(paths)
    gone = [
        p
        for p, mode in tracked.items()
        if p not in keep
        and not (mode == _GITLINK and (ws.path / p).is_dir() and not (ws.path / p).is_symlink())
    ]
    if gone:
        run_git(
            ["update-index", "-z", "--force-remove", "--stdin"],
            env=env,
            cwd=ws.path,
            input=b"".join(os.fsencode(p) + b"\0" for p in gone),
        )
    if paths:
        run_git(
            ["update-index", "-z", "--add", "--replace", "--stdin"],
            env=env,
            cwd=ws.path,
            config=ADD_CONFIG,
            input=b"".join(os.fsencode(p) + b"\0" for p in paths),
        )


def _touched(
    ws: Workspace, env: Mapping[str, str], paths: Sequence[str], tracked: Mapping[str, str]
) -> list[str]:
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
    out = run_git(
        [
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
            "--diff-filter=MT",
            "--ignore-submodules=all",
            "--no-ext-diff",
            "--no-textconv",
            "--",
            ".",
            *(f":(exclude,literal){p}" for p in now_dirs),
        ],
        env=env,
        cwd=ws.path,
    ).stdout
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
                    with hostfs.open_parent(ws.path, os.fsdecode(clean_name), create=True) as (
                        dest_fd,
                        dest,
                    ):
                        os.rename(name, dest, src_dir_fd=dir_fd, dst_dir_fd=dest_fd)
                    hit = True
        except (OSError, UnsafeFileError) as exc:
            # Better no commit and no patch at all than one that carries the secret.
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise WorkspaceError(f"could not redact a secret from a changed file: {why}") from None
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
        return False  # git records no FIFO, device or socket
    fd = hostfs.open_regular(name, dir_fd, name)
    try:
        if not redactor.contains(_chunks(fd)):
            return False
        os.lseek(fd, 0, os.SEEK_SET)
        tmp = f".{name[:200]}.{os.getpid()}.redact"
        out = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
            stat.S_IMODE(st.st_mode),
            dir_fd=dir_fd,
        )
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
    out = run_git(
        [
            "diff-tree",
            "-r",
            "-z",
            "-M",
            "--no-ext-diff",
            "--no-textconv",
            "--raw",
            "--numstat",
            ws.base,
            commit,
        ],
        env=env,
        cwd=ws.path,
    ).stdout
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
    return tuple(
        FileChange(path=p, status=s, old_path=o, insertions=a, deletions=d, binary=b)
        for (s, o, p), (a, d, b) in zip(raw, stats, strict=True)
    )


def _create_branch(ws: Workspace, name: str, commit: str) -> str:
    """Create-only; the reflog entry is the runner's (`IDENTITY`, "runner: result"), which
    `report branches` reads as the fact that the runner made the branch."""
    zero = "0" * len(commit)
    user = {
        "GIT_DIR": str(ws.git_dir),
        "GIT_COMMITTER_NAME": IDENTITY[0],
        "GIT_COMMITTER_EMAIL": IDENTITY[1],
    }
    with ref_lock(ws.git_dir):
        for n in range(1, MAX_BRANCH_SUFFIX + 1):
            candidate = name if n == 1 else f"{name}-{n}"
            ref = f"refs/heads/{candidate}"
            # old value = zero id: create only; git refuses if the ref exists.
            # Another runner process may hold a ref lock for a moment: let git retry it.
            proc = run_git(
                ["update-ref", "--create-reflog", "-m", "runner: result", ref, commit, zero],
                env=user,
                config=[("core.filesRefLockTimeout", "2000")],
                check=False,
            )
            if proc.returncode == 0:
                return candidate
            exists = (
                run_git(["show-ref", "--verify", "--quiet", ref], env=user, check=False).returncode
                == 0
            )
            if not exists:
                raise GitError(
                    git_argv(["update-ref", ref]),
                    proc.returncode,
                    proc.stderr.decode(errors="replace"),
                    ["update-ref", ref],
                )
    raise WorkspaceError(f"branch {name!r}: {MAX_BRANCH_SUFFIX} names taken")
