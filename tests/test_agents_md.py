"""Tests for runner.agents_md: which AGENTS.md files apply and what the model sees of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.agents_md import agents_md
from tests.support.prompts import check_golden, git_init, write


def test_agents_md_nested_dirs_in_git_repo(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "above the repo: never read\n")
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "root rules\n")
    write(repo / "a" / "AGENTS.md", "a rules\n")
    write(repo / "a" / "b" / "README.md", "not an agents file\n")  # b contributes nothing
    write(repo / "a" / "b" / "c" / "AGENTS.md", "c rules\n")
    write(repo / "a" / "b" / "c" / "d" / "AGENTS.md", "below cwd: never read\n")
    write(repo / "other" / "AGENTS.md", "sibling: never read\n")
    cwd = repo / "a" / "b" / "c"
    text = agents_md(cwd=cwd, runner_home=None)[0]
    assert text == "root rules\n\n\na rules\n\n\nc rules\n"
    check_golden("agents_md_nested.txt", text)


def test_agents_md_cwd_is_repo_root(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "root rules")
    assert agents_md(cwd=repo, runner_home=None)[0] == "root rules"


def test_agents_md_git_file_marks_root(tmp_path: Path) -> None:
    """A worktree or submodule has a `.git` file, not a directory; it still marks the root."""
    write(tmp_path / "AGENTS.md", "outer")
    wt = tmp_path / "wt"
    write(wt / ".git", "gitdir: /elsewhere\n")
    write(wt / "AGENTS.md", "worktree")
    write(wt / "src" / "AGENTS.md", "src")
    assert agents_md(cwd=wt / "src", runner_home=None)[0] == "worktree\n\nsrc"


def test_agents_md_without_git_reads_only_cwd(no_git_above: Path) -> None:
    top = no_git_above
    write(top / "AGENTS.md", "parent: never read")
    write(top / "proj" / "AGENTS.md", "cwd rules")
    assert agents_md(cwd=top / "proj", runner_home=None)[0] == "cwd rules"
    assert agents_md(cwd=top / "empty", runner_home=None)[0] is None


def test_agents_md_override_precedence(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.override.md", "root override")
    write(repo / "AGENTS.md", "root plain")
    write(repo / "sub" / "AGENTS.md", "sub plain")
    text = agents_md(cwd=repo / "sub", runner_home=None)[0]
    assert text == "root override\n\nsub plain"


def test_agents_md_first_existing_even_if_blank(tmp_path: Path) -> None:
    """Codex picks the first existing name per directory; a blank one then adds nothing."""
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.override.md", "  \n")
    write(repo / "AGENTS.md", "shadowed by the blank override")
    assert agents_md(cwd=repo, runner_home=None)[0] is None


def test_agents_md_truncates_on_utf8_boundary(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    budget = 32 * 1024
    # "é" is two bytes and straddles the cut: the budget ends after its first byte.
    write(repo / "AGENTS.md", ("a" * (budget - 1) + "é" + "tail").encode())
    write(repo / "sub" / "AGENTS.md", "no budget left")
    text = agents_md(cwd=repo / "sub", runner_home=None)[0]
    assert text == "a" * (budget - 1)
    assert "\ufffd" not in text


@pytest.mark.parametrize(
    ("char", "keep"),
    [("€", 0), ("€", 1), ("€", 2), ("€", 3), ("😀", 1), ("😀", 3), ("😀", 4), ("x", 1)],
)
def test_agents_md_cut_inside_each_multibyte_width(tmp_path: Path, char: str, keep: int) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", ("ab" + char + "z").encode())
    text = agents_md(cwd=repo, runner_home=None, max_bytes=2 + keep)[0]
    expected = "ab" + char if keep == len(char.encode()) else "ab"
    assert text == expected


def test_agents_md_budget_shared_across_files(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "0123456789")
    write(repo / "a" / "AGENTS.md", "   ")  # blank: skipped, charges nothing
    write(repo / "a" / "b" / "AGENTS.md", "abcdefghij")
    cwd = repo / "a" / "b"
    assert agents_md(cwd=cwd, runner_home=None, max_bytes=15)[0] == "0123456789\n\nabcde"
    assert agents_md(cwd=cwd, runner_home=None, max_bytes=10)[0] == "0123456789"
    assert agents_md(cwd=cwd, runner_home=None, max_bytes=0)[0] is None


def test_agents_md_global_and_project_join(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / "AGENTS.md", "\n  global rules  \n\n")
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "project rules\n")
    text = agents_md(cwd=repo, runner_home=home)[0]
    assert text == "global rules\n\n--- project-doc ---\n\nproject rules\n"
    check_golden("agents_md_global_and_project.txt", text)
    # The global file is not charged to the project budget, and survives max_bytes=0.
    assert agents_md(cwd=repo, runner_home=home, max_bytes=0)[0] == "global rules"
    assert agents_md(cwd=repo, runner_home=None)[0] == "project rules\n"


def test_agents_md_global_override_precedence(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / "AGENTS.md", "global plain")
    cwd = tmp_path / "nowhere"
    cwd.mkdir()
    assert agents_md(cwd=cwd, runner_home=home)[0] == "global plain"
    write(home / "AGENTS.override.md", "global override")
    assert agents_md(cwd=cwd, runner_home=home)[0] == "global override"
    write(home / "AGENTS.override.md", " \n")  # blank override: the first non-empty wins
    assert agents_md(cwd=cwd, runner_home=home)[0] == "global plain"
    assert agents_md(cwd=cwd, runner_home=tmp_path / "missing")[0] is None


# --- initial context -------------------------------------------------------------------
