"""What a workspace and a result are (runner/workspace/types.py): the values computed from
them, and that a result handed to reports cannot be changed on the way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from runner.workspace.types import FileChange, Result, Scope, Workspace


def change(path: str, status: str = "M", old: str | None = None) -> FileChange:
    return FileChange(path, status, old, insertions=1, deletions=0, binary=False)


def result(*files: FileChange) -> Result:
    return Result("c" * 40, "b" * 40, None, files, 1, 0, Path("run.patch"))


def test_changed_paths_name_both_sides_of_a_rename_in_order() -> None:
    res = result(change("a.py"), change("new/b.py", "R", "old/b.py"), change("c.bin", "D"))
    assert res.changed_paths == ["a.py", "old/b.py", "new/b.py", "c.bin"]
    assert res.files_changed == 3
    assert (result().changed_paths, result().files_changed) == ([], 0)


def test_a_result_and_its_changes_are_frozen() -> None:
    res = result(change("a.py"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.branch = "main"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.files[0].path = "elsewhere"  # type: ignore[misc]
    assert res.violations == ()


def test_a_default_scope_limits_nothing_and_a_workspace_keeps_its_private_parts_apart() -> None:
    assert Scope() == Scope(allowed=None, forbidden=None, max_diff_lines=None)
    ws = Workspace(
        path=Path("/w/run/work"),
        repo=Path("/r"),
        git_dir=Path("/r/.git"),
        objects=Path("/r/.git/objects"),
        base="b" * 40,
        base_tree="t" * 40,
        base_dirty=False,
        setup_s=0.1,
        private_dir=Path("/w/run/private"),
    )
    assert (ws._private_git, ws._index) == (
        Path("/w/run/private/git"),
        Path("/w/run/private/index"),
    )
    assert (ws.sandbox_objects, ws.user_paths) == ((), ())
