"""The `.git` name rule (runner/gitnames.py), checked against git itself: what git refuses
to record with `core.protectNTFS` and `core.protectHFS` on, and nothing else, is an alias."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.gitnames import component_is_dotgit, git_refuses, path_has_dotgit
from tests.support.fixtures import make_git_repo

ALIASES = [
    ".git ",
    ".git.",
    ".git. . ",
    "git~1",
    "GIT~1",
    ".GiT",
    ".git:x",
    ".git::$INDEX",
    ".g\u200cit",
    "\ufeff.git",
    ".gi\u200dT",
    "a\\.git",
    "b\\git~1\\c",
]
FINE = [
    ".gitx",
    "git~2",
    "git",
    ".github",
    "x.git",
    ".gitignore",
    ".git~1",
    "a\\b",
    ".gitmodules",
    "git~1x",
]


def _git_refuses(tmp: Path, name: str, *, link: bool) -> bool:
    """git's own verdict, with the protections the runner turns on."""
    top = tmp / ("l" if link else "f")
    if not (top / ".git").exists():
        make_git_repo(top)
    entry = top / name
    if link:
        os.symlink("README.md", entry)
    else:
        entry.write_text("x")
    proc = subprocess.run(
        [
            "git",
            "-c",
            "core.protectNTFS=true",
            "-c",
            "core.protectHFS=true",
            "update-index",
            "--add",
            "--",
            name,
        ],
        cwd=top,
        capture_output=True,
        text=True,
        check=True,
    )
    os.unlink(entry)
    return "Ignoring path" in proc.stderr


@pytest.mark.parametrize("name", ALIASES + FINE)
def test_the_alias_rule_is_gits_own(tmp_path: Path, name: str) -> None:
    """One rule, checked against git itself: what git refuses to record, and nothing
    else, is a `.git` alias (and `.gitmodules` aliases only as links)."""
    expected = _git_refuses(tmp_path, name, link=False)
    assert (git_refuses(name) is not None) == expected == (name in ALIASES)
    assert component_is_dotgit(name) == expected
    for link_name in (".gitmodules", ".GITMODULES. ", "gitmod~1", "gi7eba~3"):
        assert git_refuses(link_name, symlink=True) is not None
        assert _git_refuses(tmp_path, link_name, link=True)


def test_path_has_dotgit_names_the_first_alias_component() -> None:
    assert path_has_dotgit("src/GIT~1/x/.git/y") == "GIT~1"
    assert path_has_dotgit("a//b/./c") is None
    assert path_has_dotgit("a/.github/workflows/ci.yml") is None


def test_git_refuses_says_why() -> None:
    assert git_refuses("d/.Git /x") == "'.Git ' is a name git, NTFS or HFS+ treats as `.git`"
    for bad in ("a//b", "./a", "a/../b", "a/"):
        assert git_refuses(bad) == "it has an empty, `.` or `..` component", bad
    assert git_refuses("src/app.py") is None


def test_a_gitmodules_name_is_refused_only_for_a_link_and_only_as_the_last_component() -> None:
    assert git_refuses("sub/.gitmodules") is None
    assert "symbolic link" in (git_refuses("sub/.gitmodules", symlink=True) or "")
    assert git_refuses(".gitmodules/x", symlink=True) is None
    assert git_refuses("\u200c.gitmodules\ufeff", symlink=True) is not None  # HFS+ ignorables
    assert git_refuses("gitmod~5", symlink=True) is None  # only ~1..~4 are short names
