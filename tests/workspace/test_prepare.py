"""A run's checkout (runner/workspace/prepare.py): the base it starts from, whether the
user's tree was dirty, the one store of what the base reaches that the sandbox may read
(and nothing else of the user's repository), and the names and bases it refuses. Real
repositories in temp dirs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from runner.errors import WorkspaceError
from runner.workspace.prepare import check_base, prepare, prepare_sync
from tests.support.fixtures import make_git_repo
from tests.support.threads import git

pytestmark = pytest.mark.anyio


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    files = {"README.md": "# sample\n", "src/app.py": "x = 1\n", ".gitignore": "*.log\n"}
    return make_git_repo(tmp_path / "user", files)


@pytest.mark.parametrize("dirt", ["modified", "staged", "untracked"])
async def test_each_kind_of_dirt_is_seen(repo: Path, tmp_path: Path, dirt: str) -> None:
    if dirt == "modified":
        (repo / "README.md").write_text("# changed\n")
    elif dirt == "staged":
        (repo / "x.py").write_text("x\n")
        git(repo, "add", "x.py")
    else:
        (repo / "x.py").write_text("x\n")
    assert (await prepare(repo, root=tmp_path / "ws", name="d")).base_dirty


async def test_clean_tree_is_not_dirty_and_ignored_files_do_not_count(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "noise.log").write_text("ignored\n")
    ws = await prepare(repo, root=tmp_path / "ws", name="c")
    assert not ws.base_dirty


async def test_base_other_than_head_and_bad_bases(repo: Path, tmp_path: Path) -> None:
    first = git(repo, "rev-parse", "HEAD").strip()
    (repo / "later.txt").write_text("later\n")
    commit(repo, "later")
    git(repo, "tag", "-a", "-m", "t", "v1", first)
    ws = await prepare(repo, base="v1", root=tmp_path / "ws", name="old")
    assert ws.base == first
    assert not (ws.path / "later.txt").exists()
    for bad in ("nope", "--output=/tmp/x", "HEAD:README.md", ""):
        with pytest.raises(WorkspaceError):
            await prepare(repo, base=bad, root=tmp_path / "ws", name="bad")
    assert not (tmp_path / "ws" / "bad").exists()
    with pytest.raises(WorkspaceError, match="already exists"):
        await prepare(repo, root=tmp_path / "ws", name="old")
    for name in ("", ".", "..", "a/b", ".hidden"):
        with pytest.raises(WorkspaceError):
            await prepare(repo, root=tmp_path / "ws", name=name)


def test_check_base_names_the_commit_or_says_why_there_is_none(repo: Path, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    assert check_base(repo) == head
    git(repo, "tag", "-a", "-m", "t", "v1")
    assert check_base(repo, "v1") == head  # an annotated tag names its commit
    with pytest.raises(WorkspaceError, match=r"'--all' is not a revision"):
        check_base(repo, "--all")
    with pytest.raises(WorkspaceError, match=r"'HEAD:README.md' is not a commit there"):
        check_base(repo, "HEAD:README.md")
    empty = tmp_path / "empty"
    git(tmp_path, "init", "-q", str(empty))
    with pytest.raises(WorkspaceError, match=r"empty: 'HEAD' is not a commit there .*git commit"):
        check_base(empty)


def test_the_sandbox_reads_only_what_the_base_reaches(repo: Path, tmp_path: Path) -> None:
    base = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "switch", "-q", "-c", "other")
    (repo / "secret.txt").write_text("not for the run\n")
    later = commit(repo, "later work")
    git(repo, "switch", "-q", "main")
    ws = prepare_sync(repo, base="main", root=tmp_path / "ws", name="a")
    assert ws.base == base
    (store,) = ws.sandbox_objects
    assert (ws.path / ".git/objects/info/alternates").read_text() == f"{store}\n"
    seen = subprocess.run(["git", "cat-file", "-e", later], cwd=ws.path, check=False)
    assert seen.returncode != 0, "the workspace's git reaches a commit past its base"
    assert git(ws.path, "cat-file", "-t", base) == "commit"
    again = prepare_sync(repo, base="main", root=tmp_path / "ws", name="b")
    assert again.sandbox_objects == ws.sandbox_objects  # one store per repository and base


def test_the_users_repository_and_what_it_borrows_are_named_to_hide(
    repo: Path, tmp_path: Path
) -> None:
    """A `clone --shared` reads another repository's objects: the sandbox must hide that
    one too. Alternates that loop back are followed once."""
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(shared))
    (repo / ".git/objects/info/alternates").write_text(f"{shared}/.git/objects\n")
    ws = prepare_sync(shared, root=tmp_path / "ws", name="s")
    assert {shared, shared / ".git", repo, repo / ".git"} <= set(ws.user_paths)
    assert not ws.private_dir.is_relative_to(ws.path)
    assert git(ws.path, "status", "--porcelain") == ""
