"""Which commit is running, read from `.git` without a git binary: a plain checkout, a
worktree, packed refs and a detached HEAD name their commit; anything odd names none
rather than a wrong one, and a build's recorded commit wins over the checkout."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from runner.checkout import BUILD_MODULE, head_commit, runner_commit
from tests.support import paths
from tests.support.fixtures import git, make_git_repo


def test_a_checkout_on_a_branch_names_its_commit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    assert head_commit(repo) == git(repo, "rev-parse", "HEAD").strip()


def test_packed_refs_and_a_detached_head_are_read(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "pack-refs", "--all", "--prune")
    assert not (repo / ".git/refs/heads/main").exists()
    assert head_commit(repo) == sha
    git(repo, "checkout", "-q", "--detach")
    assert (repo / ".git/HEAD").read_text().strip() == sha
    assert head_commit(repo) == sha


def test_a_worktree_follows_its_git_file_to_the_common_refs(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "worktree", "add", "-q", "-b", "side", str(tmp_path / "wt"))
    (tmp_path / "wt/new.txt").write_text("new\n")
    git(tmp_path / "wt", "add", "new.txt")
    git(tmp_path / "wt", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "side")
    side = git(tmp_path / "wt", "rev-parse", "HEAD").strip()
    assert (tmp_path / "wt/.git").is_file()
    assert head_commit(tmp_path / "wt") == side != head_commit(repo)


@pytest.mark.parametrize(
    ("git_file", "head"),
    [
        ("not a gitdir line\n", None),
        (None, "ref: refs/heads/nowhere\n"),
        (None, "0123\n"),  # a short, not a whole, sha
        (None, b"ref: refs/heads/\xff\xfe\n"),
    ],
)
def test_an_odd_git_dir_names_no_commit(
    tmp_path: Path, git_file: str | None, head: str | bytes | None
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    if git_file is not None:
        (tmp_path / "other").mkdir()
        (tmp_path / "other/.git").write_text(git_file)
        repo = tmp_path / "other"
    if isinstance(head, bytes):
        (repo / ".git/HEAD").write_bytes(head)
    elif head is not None:
        (repo / ".git/HEAD").write_text(head)
    assert head_commit(repo) is None


def test_a_ref_that_holds_no_sha_names_no_commit(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    (repo / ".git/refs/heads/main").write_text("garbage\n")
    assert head_commit(repo) is None
    assert head_commit(tmp_path / "not-a-checkout") is None


def test_a_builds_recorded_commit_wins_and_a_bad_one_is_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`runner/_build.py` is written by the build; here it is made as the build makes it."""
    built = types.ModuleType(BUILD_MODULE)
    built.COMMIT = "f" * 40  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, BUILD_MODULE, built)
    assert runner_commit() == "f" * 40
    built.COMMIT = "not a commit; rm -rf /"  # type: ignore[attr-defined]
    here = head_commit(paths.ROOT)
    assert runner_commit() == here
