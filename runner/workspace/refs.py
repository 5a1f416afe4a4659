"""After a run: pushing its branch, removing its workspace, and deleting only a branch
that still points at the commit recorded for it (compare-and-delete)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio

from runner import hostfs
from runner.errors import GitError, UnsafeFileError, WorkspaceError
from runner.frozen import frozen
from runner.workspace.git import (
    PUSH_PROTOCOLS,
    common_dir,
    git_argv,
    git_env,
    git_out,
    read_git,
    ref_lock,
    run_git,
)
from runner.workspace.types import PushResult, Workspace


async def push(repo: Path, branch: str, *, remote: str, token: str | None = None) -> PushResult:
    """Push a result branch to `remote` (a remote name or URL), creating it there only.

    The token never reaches git: git talks to a forwarder inside the runner that adds it
    (`authproxy`), so no process list, `/proc/<pid>/environ` or fd, error message or
    return value shows it. `--force-with-lease=<ref>:` makes the
    push fail instead of moving a branch that already exists on the remote.
    """
    return await anyio.to_thread.run_sync(
        partial(push_sync, repo, branch, remote=remote, token=token)
    )


def push_sync(repo: Path, branch: str, *, remote: str, token: str | None = None) -> PushResult:
    """`push` without the thread hop."""
    ref = f"refs/heads/{branch}"
    _check_branch(branch)
    repo = repo.resolve()
    try:
        run_git(["show-ref", "--verify", "--quiet", ref], cwd=repo)
    except GitError as exc:
        raise WorkspaceError(f"branch {branch!r} does not exist in {repo}") from exc
    _push(repo, remote, f"{ref}:{ref}", leases=f"{ref}:", token=token)
    return PushResult(remote=remote, branch=branch, ref=ref)


RECORD_PREFIX = "refs/runner/wrote/"
"""Where `swap_branch_sync` records, next to each branch it moves, the commit it moved it
to: `refs/runner/wrote/<branch>`. The branch is the runner's while its tip is that
commit; a commit's author or trailer proves nothing, anyone can write them."""


def swap_branch_sync(
    repo: Path,
    commit: str,
    branch: str,
    *,
    remote: str,
    expected: str | None,
    recorded: str | None = None,
    token: str | None = None,
) -> None:
    """Compare-and-swap on the remote: point `branch` at `commit` only while it still
    points at `expected` (None: only while it does not exist), and its record
    (RECORD_PREFIX) at `commit` too, only while that is still `recorded`. One atomic
    push: git sends the old values with the updates, and the server refuses both if
    either moved in between, so a commit someone pushed meanwhile is never overwritten
    and the record never names a commit the branch did not get. Raises WorkspaceError
    if refused."""
    _check_branch(branch)
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", commit):
        raise WorkspaceError(f"commit {commit!r} is not a full commit id")
    ref = f"refs/heads/{branch}"
    record = f"{RECORD_PREFIX}{branch}"
    _push(
        repo.resolve(),
        remote,
        [f"{commit}:{ref}", f"{commit}:{record}"],
        leases=[f"{ref}:{expected or ''}", f"{record}:{recorded or ''}"],
        token=token,
    )


def remote_tip(
    repo: Path, branch: str, *, remote: str, token: str | None = None
) -> tuple[str | None, str | None]:
    """(the commit `branch` points at on the remote, the commit its record names: the
    one the runner last moved it to); None for what does not exist."""
    _check_branch(branch)
    ref = f"refs/heads/{branch}"
    record = f"{RECORD_PREFIX}{branch}"
    url = _remote(repo, remote)
    listed = _remote_git(
        lambda u: ["ls-remote", "--", u, ref, record],
        url,
        token,
        cwd=repo,
    )
    found: dict[str, str] = {}
    for line in listed.decode().splitlines():
        sha, _, name = line.partition("\t")
        found[name] = sha
    return found.get(ref), found.get(record)


def fetch_detached_sync(dest: Path, url: str, ref: str, *, token: str | None = None) -> str:
    """A new repository at `dest` holding only `ref` of `url` (depth 1), checked out
    detached; its commit. The token, if any, is used for this fetch only: `dest` keeps
    no credentials and no remote, so nothing the agent runs there can push."""
    if url.startswith("-") or any(ord(c) < 0x20 for c in url):
        raise WorkspaceError(f"{url!r} is not a repository URL")
    dest.mkdir(parents=True)
    run_git(["init", "--quiet", str(dest)])
    _remote_git(
        lambda u: ["fetch", "--quiet", "--no-tags", "--depth=1", "--", u, ref],
        url,
        token,
        cwd=dest,
    )
    run_git(["checkout", "--quiet", "--detach", "FETCH_HEAD"], cwd=dest)
    (dest / ".git" / "FETCH_HEAD").unlink(missing_ok=True)
    return git_out(["rev-parse", "HEAD"], cwd=dest)


def _check_branch(branch: str) -> None:
    ref = f"refs/heads/{branch}"
    if branch.startswith("-") or run_git(["check-ref-format", ref], check=False).returncode:
        raise WorkspaceError(f"branch {branch!r} is not a valid branch name")


def _remote(repo: Path, remote: str) -> str:
    """The URL of `remote` (a name or URL). A name is used by its URL: pushing to the name
    would also write refs/remotes/<name>/<branch> into the user's repository."""
    if not remote or remote.startswith("-") or any(ord(c) < 0x20 for c in remote):
        raise WorkspaceError(f"remote {remote!r} is not a remote name or URL")
    if "://" in remote:
        # A URL is used as given: `git remote get-url` would apply the repository's
        # url.*.pushInsteadOf, so whoever wrote its config could choose where a token goes.
        return remote
    named = run_git(["remote", "get-url", "--push", remote], cwd=repo, check=False)
    url = named.stdout.decode().strip() if named.returncode == 0 else remote
    if url.startswith("-"):
        raise WorkspaceError(f"remote {remote!r} has an unusable push URL")
    return url


def is_http(url: str) -> bool:
    """A URL git reaches over HTTP(S): the only kind a token goes with (the forwarder)."""
    return url.startswith(("http://", "https://"))


def _remote_git(
    args_for: Callable[[str], list[str]],
    url: str,
    token: str | None,
    *,
    cwd: Path,
    timeout: float | None = None,
) -> bytes:
    """Its stdout. A git command that talks to `url`. With a token and an HTTP(S) URL, git is given
    the runner's forwarder instead of `url` (see `authproxy`); other URLs (file, ssh)
    get no token."""
    if not token or not is_http(url):
        return run_git(args_for(url), cwd=cwd, protocols=PUSH_PROTOCOLS, timeout=timeout).stdout
    # The forwarder (a local HTTP server) loads with the first push that needs it.
    from runner.workspace.authproxy import local_urls, run_git_via_forwarder

    proc, local = run_git_via_forwarder(
        lambda u: git_argv(args_for(u)),
        url=url,
        token=token,
        cwd=str(cwd),
        env=git_env(protocols=PUSH_PROTOCOLS),
        timeout=timeout,
    )
    shown = args_for(url)
    if proc.returncode == -1:
        raise GitError(["git", *shown], -1, f"no answer within {timeout:g} s; stopped", shown)
    if proc.returncode != 0:
        err = local_urls(
            proc.stderr.decode(errors="replace"), [local, local.rsplit("/", 1)[0]], url
        )
        raise GitError(["git", *shown], proc.returncode, err.replace(token, "[REDACTED]"), shown)
    return proc.stdout


def _push(
    repo: Path,
    remote: str,
    refspecs: str | list[str],
    *,
    leases: str | list[str],
    token: str | None,
) -> None:
    """One push; several refspecs go together or not at all (`--atomic`)."""
    url = _remote(repo, remote)
    specs = [refspecs] if isinstance(refspecs, str) else refspecs
    leased = [
        f"--force-with-lease={lease}" for lease in ([leases] if isinstance(leases, str) else leases)
    ]
    atomic = ["--atomic"] if len(specs) > 1 else []
    _remote_git(
        lambda u: ["push", "--porcelain", "--no-verify", *atomic, *leased, u, *specs],
        url,
        token,
        cwd=repo,
        timeout=PUSH_TIMEOUT_S,
    )


PUSH_TIMEOUT_S = 600.0
"""A push that has not finished in 10 minutes is stopped and counts as failed (the run's
work stays in its local branch and patch)."""


async def cleanup(ws: Workspace) -> None:
    """Remove the workspace and its private state. Safe to call twice."""
    await anyio.to_thread.run_sync(partial(cleanup_sync, ws))


def cleanup_sync(ws: Workspace) -> None:
    hostfs.remove_tree(ws.path)
    hostfs.remove_tree(ws.private_dir)


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
    git_dir = Path(git_out(["rev-parse", "--absolute-git-dir"], cwd=repo))
    common = common_dir(git_dir)
    user = {"GIT_DIR": str(git_dir)}
    ours = re.compile(re.escape(f"refs/heads/{branch}") + r"(?:-\d+)?")
    with ref_lock(git_dir):
        lock = common / "refs" / "heads" / f"{branch}.lock"
        try:
            held = hostfs.read_regular(lock, 200).decode(errors="replace").strip()
        except (OSError, UnsafeFileError):
            held = None
        if held is not None and held in ("", commit):
            lock.unlink(missing_ok=True)
        refs = (
            run_git(
                ["for-each-ref", "--format=%(refname)", f"--points-at={commit}", "refs/heads/"],
                env=user,
                check=False,
            )
            .stdout.decode()
            .split()
        )
        for ref in refs:
            if ours.fullmatch(ref):
                run_git(["update-ref", "-d", ref, commit], env=user, check=False)


# Queries on a repository the runner only reads or compare-and-deletes in (`report
# branches`, the Action's checks): hardened git like every other call, never raising.


def is_branch_name(repo: Path, branch: str) -> bool:
    return read_git(repo, "check-ref-format", f"refs/heads/{branch}").returncode == 0


def branch_tip(repo: Path, branch: str) -> str | None:
    """The commit the branch points at; None when there is no such branch."""
    tip = read_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}")
    return tip.stdout.strip() if tip.returncode == 0 else None


def commit_identity(repo: Path, commit: str) -> list[str] | None:
    """Author name and email, committer name and email, parents: who made the commit on
    what. None when git cannot show it."""
    info = read_git(repo, "show", "-s", "--format=%an%x00%ae%x00%cn%x00%ce%x00%P", commit)
    return info.stdout.rstrip("\n").split("\0") if info.returncode == 0 else None


RUN_TRAILER = "Runner-Run"
"""The trailer naming the batch on every result commit (see `run.keep`)."""


def run_trailers(repo: Path, commit: str) -> list[str] | None:
    """The values of the commit's `Runner-Run` trailers (git's own trailer parsing: only
    the message's last paragraph counts, so an agent's answer above it cannot add one).
    None when git cannot show the commit."""
    info = read_git(repo, "show", "-s", f"--format=%(trailers:key={RUN_TRAILER},valueonly)", commit)
    return info.stdout.split() if info.returncode == 0 else None


@frozen
class ReflogEntry:
    commit: str
    message: str
    name: str
    email: str
    time: int
    """Seconds since the epoch, when git wrote the entry."""


def reflog(repo: Path, branch: str) -> list[ReflogEntry] | None:
    """The branch's reflog, oldest entry first; None when git cannot read it."""
    proc = read_git(
        repo,
        "log",
        "-g",
        "--date=unix",
        "--format=%H%x00%gs%x00%gn%x00%ge%x00%gd",
        f"refs/heads/{branch}",
        "--",
    )
    if proc.returncode != 0:
        return None
    out = []
    for line in reversed(proc.stdout.splitlines()):
        fields = line.split("\0")
        when = re.search(r"@\{(\d+)\}$", fields[-1])
        if len(fields) != 5 or when is None:
            return None
        out.append(ReflogEntry(fields[0], fields[1], fields[2], fields[3], int(when[1])))
    return out


def checked_out_branches(repo: Path) -> set[str] | None:
    """Every branch ref a worktree of the repository (the main one included) has checked
    out; None when git cannot say."""
    proc = read_git(repo, "worktree", "list", "--porcelain")
    if proc.returncode != 0:
        return None
    return {
        line.removeprefix("branch ")
        for line in proc.stdout.splitlines()
        if line.startswith("branch ")
    }


def delete_branch_at(repo: Path, branch: str, commit: str) -> bool:
    """Compare-and-delete: git removes the branch only if it still points at `commit`
    (checked atomically under the ref's lock), so a branch someone moved is kept."""
    return read_git(repo, "update-ref", "-d", f"refs/heads/{branch}", commit).returncode == 0


def has_path_at(repo: Path, commit: str, path: str) -> bool:
    """Whether `path` (relative to the top) exists in `commit`'s tree."""
    return read_git(repo, "cat-file", "-e", f"{commit}:{path}").returncode == 0
