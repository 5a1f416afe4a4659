"""Attacker review of issue 25, finding 1: a committed skill link must not carry the
user's work tree into the sandbox. The repository commits `skills/evil -> ..` and a
SKILL.md at its top, and the task file lists `<repo>/skills`: before the fix the runner's
copy of the skill held the repository's `.env` and untracked files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import SkillError
from runner.skills import load_skills, read_skill, stage
from tests.support.fixtures import make_git_repo
from tests.support.security import cli, tasks

SKILL = "---\nname: evil\ndescription: d\n---\nbody\n"
CANARY = "DB_PASSWORD=skill-link-canary-5e0a"


def _repo(tmp_path: Path) -> Path:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", "SKILL.md": SKILL})
    (repo / ".env").write_text(CANARY + "\n")
    (repo / "untracked.txt").write_text("untracked\n")
    return repo


def _copied(into: Path) -> str:
    return "\n".join(
        f"{p}: {p.read_text(errors='replace')}" for p in into.rglob("*") if p.is_file()
    )


def test_a_skill_folder_that_is_a_link_to_the_repository_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "skills").mkdir()
    os.symlink("..", repo / "skills" / "evil")
    with pytest.raises(SkillError, match=r"skills/evil: a skill folder may not be a link"):
        load_skills(repo / "skills")


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("repo", r"top of a repository \(it holds .git\)"),
        ("skills", r"top of a repository \(it holds .git\)"),
        ("up", "holds the repository"),
    ],
)
def test_a_skill_folder_holding_the_repository_is_refused(
    tmp_path: Path, entry: str, why: str
) -> None:
    """The entry is the repository itself, a committed `skills -> .` (the entry is the
    repository's top), or a committed `up -> ..` (the folder above the repository,
    holding a SKILL.md)."""
    repo = _repo(tmp_path)
    (tmp_path / "SKILL.md").write_text(SKILL)
    os.symlink(".", repo / "skills")
    os.symlink("..", repo / "up")
    folder = repo if entry == "repo" else repo / entry
    with pytest.raises(SkillError, match=why):
        load_skills(folder)


def test_staging_never_copies_a_folder_that_became_a_link(tmp_path: Path) -> None:
    """Loaded as a good skill, then swapped for a link to the repository before the run
    copies it: nothing of the repository is copied."""
    repo = _repo(tmp_path)
    good = repo / "skills" / "good"
    good.mkdir(parents=True)
    (good / "SKILL.md").write_text(SKILL)
    os.symlink("../..", good / "tree")  # a link to a folder inside: never followed
    [skill] = load_skills(repo / "skills")
    into = tmp_path / "private" / "skills"
    into.parent.mkdir()
    staged = stage([skill], into)
    assert CANARY not in _copied(into) and "untracked" not in _copied(into)
    assert staged.mounts and not (into / "0" / "tree").exists()
    good.rename(repo / "skills" / "old")
    os.symlink("../..", good)
    skill = read_skill(repo / "skills" / "old" / "SKILL.md")
    swapped = type(skill)(skill.name, skill.description, skill.path, good)
    again = tmp_path / "private" / "again"
    with pytest.raises(SkillError, match="may not be a link"):
        stage([swapped], again)
    assert not again.exists() or CANARY not in _copied(again)


def test_the_reviewers_layout_is_a_located_error_exit_2(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "skills").mkdir()
    os.symlink("..", repo / "skills" / "evil")
    task_file = tasks(
        tmp_path, "http://127.0.0.1:9", repo, ["t"], extra=f"  skills: ['{repo}/skills']"
    )
    res = cli("run", task_file, "--out", tmp_path / "out")
    assert res.returncode == 2, res.stderr
    assert "skills/evil: a skill folder may not be a link" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out" / "threads").exists()
