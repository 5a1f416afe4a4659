"""The refs the runner writes and reads (runner/workspace/refs.py): pushes that only
create, the compare-and-swap on a remote branch and its record, compare-and-delete of a
killed attempt's branch, the read-only queries, and removing a workspace. Real
repositories and bare remotes in temp dirs. (Pushing to HTTP with a token, through the
forwarder, is in test_package.py and tests/security.)"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import pytest

from runner.errors import WorkspaceError
from runner.workspace.prepare import prepare
from runner.workspace.refs import (
    branch_tip,
    checked_out_branches,
    cleanup,
    delete_branch_at,
    delete_branch_sync,
    has_path_at,
    is_http,
    push_sync,
    reflog,
    remote_tip,
    run_trailers,
    swap_branch_sync,
)
from tests.support.fixtures import make_git_repo
from tests.support.threads import git


def bare(path: Path) -> Path:
    subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
    return path


def test_swap_refuses_when_the_branch_moved_since_it_was_read(tmp_path: Path) -> None:
    """The lease itself: the remote refuses an update whose expected commit is stale."""
    origin = tmp_path / "origin.git"
    subprocess.run(["git", "init", "-q", "--bare", str(origin)], check=True)
    repo = make_git_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    second = git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "third")
    third = git(repo, "rev-parse", "HEAD")
    swap_branch_sync(repo, first, "b", remote=str(origin), expected=None)
    with pytest.raises(WorkspaceError):  # it exists now: a create-only swap is refused
        swap_branch_sync(repo, second, "b", remote=str(origin), expected=None)
    swap_branch_sync(repo, second, "b", remote=str(origin), expected=first, recorded=first)
    with pytest.raises(WorkspaceError):  # someone moved it to `second` meanwhile
        swap_branch_sync(repo, third, "b", remote=str(origin), expected=first, recorded=second)
    with pytest.raises(WorkspaceError):  # the record moved: neither ref is updated
        swap_branch_sync(repo, third, "b", remote=str(origin), expected=second, recorded=first)
    assert git(origin, "rev-parse", "refs/heads/b") == second
    assert git(origin, "rev-parse", "refs/runner/wrote/b") == second


def test_resume_clears_the_ref_lock_of_a_killed_attempt(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    lock = repo / ".git" / "refs" / "heads" / "runner" / "abc" / "t1.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    head = git(repo, "rev-parse", "HEAD")
    delete_branch_sync(repo, "runner/abc/t1", head)
    assert not lock.exists()
    git(repo, "branch", "runner/abc/t1")  # git can make the branch again


@pytest.mark.anyio
async def test_cleanup_removes_everything_even_read_only_dirs(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    ws = await prepare(repo, root=tmp_path / "ws", name="c")
    locked = ws.path / "locked"
    (locked / "deep").mkdir(parents=True)
    (locked / "deep" / "f").write_text("x")
    (locked / "deep").chmod(0)
    locked.chmod(stat.S_IRUSR | stat.S_IXUSR)
    await cleanup(ws)
    await cleanup(ws)
    # Only the runs' store of the base's objects is left, kept until the root goes.
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [".objects"]
    assert git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads") == "main"


def test_a_push_creates_a_branch_and_never_moves_one(tmp_path: Path) -> None:
    origin = bare(tmp_path / "origin.git")
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "branch", "result")
    done = push_sync(repo, "result", remote=str(origin))
    assert (done.branch, done.ref) == ("result", "refs/heads/result")
    assert git(origin, "rev-parse", "refs/heads/result") == git(repo, "rev-parse", "HEAD")
    git(repo, "commit", "-q", "--allow-empty", "-m", "more")
    git(repo, "branch", "-f", "result")
    with pytest.raises(WorkspaceError):
        push_sync(repo, "result", remote=str(origin))
    with pytest.raises(WorkspaceError, match=r"branch 'absent' does not exist in"):
        push_sync(repo, "absent", remote=str(origin))
    with pytest.raises(WorkspaceError, match=r"branch '-f' is not a valid branch name"):
        push_sync(repo, "-f", remote=str(origin))
    with pytest.raises(WorkspaceError, match=r"remote '--upload-pack=x' is not a remote"):
        push_sync(repo, "result", remote="--upload-pack=x")


def test_remote_tip_reads_the_branch_and_its_record(tmp_path: Path) -> None:
    origin = bare(tmp_path / "origin.git")
    repo = make_git_repo(tmp_path / "repo")
    head = git(repo, "rev-parse", "HEAD")
    assert remote_tip(repo, "b", remote=str(origin)) == (None, None)
    swap_branch_sync(repo, head, "b", remote=str(origin), expected=None)
    assert remote_tip(repo, "b", remote=str(origin)) == (head, head)
    with pytest.raises(WorkspaceError, match="not a full commit id"):
        swap_branch_sync(repo, "HEAD", "b", remote=str(origin), expected=head)


def test_the_read_only_queries_answer_or_say_none(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a/b.txt": "x\n"})
    git(repo, "commit", "-q", "--allow-empty", "-m", "result\n\nText.\n\nRunner-Run: batch-1")
    head = git(repo, "rev-parse", "HEAD")
    assert branch_tip(repo, "main") == head
    assert branch_tip(repo, "absent") is None
    assert run_trailers(repo, head) == ["batch-1"]
    assert run_trailers(repo, "0" * 40) is None
    assert has_path_at(repo, head, "a/b.txt") and not has_path_at(repo, head, "a/c.txt")
    assert checked_out_branches(repo) == {"refs/heads/main"}
    log = reflog(repo, "main")
    assert log is not None and [e.commit for e in log][-1] == head
    assert log[0].message.startswith("commit (initial)")
    assert reflog(repo, "absent") is None


def test_delete_branch_at_removes_only_a_branch_still_at_that_commit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", "kept")
    git(repo, "branch", "moved")
    git(repo, "commit", "-q", "--allow-empty", "-m", "later")
    git(repo, "branch", "-f", "moved")
    assert not delete_branch_at(repo, "moved", base)
    assert branch_tip(repo, "moved") is not None
    assert delete_branch_at(repo, "kept", base)
    assert branch_tip(repo, "kept") is None


def test_a_killed_attempts_branches_go_and_the_users_own_stay(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    result = git(repo, "rev-parse", "HEAD")
    for name in ("runner/abc/t1", "runner/abc/t1-2", "runner/abc/t1-x", "runner/abc/t10"):
        git(repo, "branch", name)
    git(repo, "commit", "-q", "--allow-empty", "-m", "the user's")
    git(repo, "branch", "runner/abc/t1-3")
    delete_branch_sync(repo, "runner/abc/t1", result)
    left = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/runner")
    assert left.split() == ["runner/abc/t1-3", "runner/abc/t1-x", "runner/abc/t10"]


def test_only_http_urls_go_through_the_forwarder() -> None:
    assert is_http("https://github.com/o/r.git") and is_http("http://127.0.0.1:1/r")
    assert not any(map(is_http, ["file:///r", "git@github.com:o/r.git", "ssh://h/r", "HTTPS:x"]))
