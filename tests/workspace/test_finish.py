"""A run's result captured from its work tree: what git cannot or must not record left
out (and said), one commit by the runner's identity, its patch, a create-only branch."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from runner.errors import WorkspaceError
from runner.workspace.finish import finish_sync, make_branch, parse_raw_numstat
from runner.workspace.prepare import prepare_sync
from runner.workspace.types import FileChange, Result, Scope, Workspace
from tests.support.fixtures import git, make_git_repo


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    repo = make_git_repo(
        tmp_path / "repo", {".gitignore": "*.log\n", "a.txt": "a\n", "src/b.txt": "b\n"}
    )
    return prepare_sync(repo, root=tmp_path / "work", name="r1")


def finish(ws: Workspace, tmp_path: Path, **kw: object) -> tuple[Result | None, list[str]]:
    told: list[str] = []
    result = finish_sync(
        ws,
        branch_template="runner/{task}",
        fields={"task": "t"},
        message="Result\n",
        patch_path=tmp_path / "out" / "r1.patch",
        on_left_out=told.extend,
        **kw,  # type: ignore[arg-type]
    )
    return result, told


def test_an_unchanged_tree_gives_no_commit_no_patch_no_branch(
    ws: Workspace, tmp_path: Path
) -> None:
    (ws.path / "ignored.log").write_text("x")  # .gitignore: no change
    (ws.path / "a.txt").write_text("a\n")  # rewritten as it was: no change
    assert finish(ws, tmp_path) == (None, [])
    assert not (tmp_path / "out" / "r1.patch").exists()
    assert git(ws.repo, "branch", "--list", "runner/*") == ""


def test_hostile_entries_are_left_out_and_said_the_rest_committed(
    ws: Workspace, tmp_path: Path
) -> None:
    os.mkfifo(ws.path / "pipe")
    nested = ws.path / "vendor" / "lib"
    (nested / ".git").mkdir(parents=True)
    (nested / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (nested / "code.py").write_text("print(1)\n")
    (ws.path / "src" / ".GIT").write_text("not a repository\n")
    (ws.path / "passwd").symlink_to("/etc/passwd")
    result, told = finish(ws, tmp_path)
    assert result is not None and result.branch == "runner/t"
    assert told == [
        "pipe: a FIFO, which git cannot record",
        "src/.GIT: '.GIT' is a name git, NTFS or HFS+ treats as `.git`",
        "vendor/lib/.git: a nested repository's `.git`: never read; the files beside it are "
        "committed as plain files",
    ]
    tree = git(ws.repo, "ls-tree", "-r", result.commit).splitlines()
    assert [line.split("\t")[1] for line in tree] == [
        ".gitignore",
        "a.txt",
        "passwd",
        "src/b.txt",
        "vendor/lib/code.py",
    ]
    assert tree[2].startswith("120000 ")  # the link itself, never what it points at
    assert git(ws.repo, "cat-file", "-p", f"{result.commit}:passwd") == "/etc/passwd"
    author = git(ws.repo, "log", "-1", "--format=%an <%ae>|%s", result.commit).strip()
    assert author == "runner <runner@localhost>|Result"


def test_an_out_of_scope_change_keeps_its_patch_but_gets_no_branch(
    ws: Workspace, tmp_path: Path
) -> None:
    (ws.path / "src" / "b.txt").write_text("B\n")
    (ws.path / "a.txt").write_text("A\n")
    result, _ = finish(ws, tmp_path, scope=Scope(allowed=["src/**"]))
    assert result is not None and result.branch is None
    assert len(result.violations) == 1 and result.violations[0].startswith("a.txt")
    assert "+A" in result.patch_path.read_text()


def test_a_branch_made_later_never_moves_an_existing_one(ws: Workspace, tmp_path: Path) -> None:
    (ws.path / "a.txt").write_text("changed\n")
    result, _ = finish(ws, tmp_path, create_branch=False)
    assert result is not None and result.branch is None
    git(ws.repo, "branch", "taken", "HEAD")
    before = git(ws.repo, "rev-parse", "taken")

    async def both() -> tuple[Result, Result]:
        return await make_branch(ws, result, "taken"), await make_branch(ws, result, "taken")

    first, second = anyio.run(both)
    assert (first.branch, second.branch) == ("taken-2", "taken-3")
    assert git(ws.repo, "rev-parse", "taken") == before
    assert git(ws.repo, "rev-parse", "taken-2").strip() == result.commit


def test_raw_numstat_is_parsed_with_renames_and_binaries() -> None:
    text = "\0".join(
        [
            ":100644 100644 aaa bbb M",
            "a.txt",
            ":100644 100644 ccc ccc R100",
            "old name.txt",
            "new\tname.txt",
            ":000000 100644 000 ddd A",
            "blob.bin",
            "3\t1\ta.txt",
            "0\t0\t",
            "old name.txt",
            "new\tname.txt",
            "-\t-\tblob.bin",
            "",
        ]
    )
    assert parse_raw_numstat(text) == (
        FileChange("a.txt", "M", None, 3, 1, False),
        FileChange("new\tname.txt", "R", "old name.txt", 0, 0, False),
        FileChange("blob.bin", "A", None, 0, 0, True),
    )
    assert parse_raw_numstat("") == ()
    with pytest.raises(WorkspaceError, match="could not parse git diff-tree output"):
        parse_raw_numstat(":100644 100644 aaa bbb M\0a.txt\0")
