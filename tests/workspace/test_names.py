"""Branch names from templates and the scope rules on changed paths
(runner/workspace/names.py): every name is one git accepts, whatever the fields hold, and
each path of a run is matched against its allowed and forbidden patterns. Pure, but for
git's own check of the names."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.errors import WorkspaceError
from runner.workspace.names import branch_name, check_scope

TEMPLATE = "runner/{run}/{task}-{model}"
GIT_ENV = {"PATH": os.environ["PATH"], "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


# ---------------------------------------------------------------------------------------
# branch names


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"run": "r1", "task": "fix", "model": "openai/gpt-5.5"}, "runner/r1/fix-openai-gpt-5.5"),
        ({"run": "..", "task": "-x", "model": "a b"}, "runner/_/x-a-b"),
        (
            {"run": "@{u}", "task": "x.lock", "model": "ollama/gpt-oss:20b"},
            "runner/u/x-lock-ollama-gpt-oss-20b",
        ),
        (
            {"run": "a..b~1^2:c?*[d]\\e", "task": ".hidden.", "model": "m\x7f\n"},
            "runner/a.b-1-2-c-d-e/hidden-m",
        ),
        ({"run": "", "task": "", "model": ""}, "runner/_/_-_"),
        ({"run": "héllo wörld", "task": "t", "model": "m" * 300}, None),
    ],
)
def test_branch_names_are_valid_refs(
    fields: dict[str, str], expected: str | None, tmp_path: Path
) -> None:
    name = branch_name(TEMPLATE, fields)
    if expected is not None:
        assert name == expected
    proc = subprocess.run(
        ["git", "check-ref-format", "--branch", name],
        env=GIT_ENV,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, (name, proc.stderr)
    assert all(len(c) <= 100 for c in name.split("/"))


@pytest.mark.parametrize("template", ["{run}/../{task}", "/{run}//x.lock/", " @ ", "HEAD"])
def test_template_literals_are_sanitised(template: str, tmp_path: Path) -> None:
    name = branch_name(template, {"run": "r", "task": "t"})
    assert name != "HEAD"
    assert (
        subprocess.run(
            ["git", "check-ref-format", "--branch", name],
            env=GIT_ENV,
            capture_output=True,
            cwd=tmp_path,
        ).returncode
        == 0
    ), name


def test_template_with_unknown_or_missing_field_is_an_error() -> None:
    with pytest.raises(WorkspaceError, match="unknown field"):
        branch_name("runner/{user}", {"user": "x"})
    with pytest.raises(WorkspaceError, match="no value"):
        branch_name("runner/{run}", {})
    with pytest.raises(WorkspaceError, match="takes no format spec or conversion"):
        branch_name("runner/{run!r}", {"run": "x"})
    for unbalanced in ("x/{run", "x/}", "{run}}", "{run!}"):
        with pytest.raises(WorkspaceError, match="unbalanced braces"):
            branch_name(unbalanced, {"run": "x"})


# ---------------------------------------------------------------------------------------
# scope


def scope(
    paths: list[str],
    allowed: list[str] | None = None,
    forbidden: list[str] | None = None,
    max_lines: int | None = None,
    lines: int = 0,
) -> list[str]:
    return check_scope(
        paths,
        allowed=allowed,
        forbidden=forbidden or [],
        max_diff_lines=max_lines,
        diff_lines=lines,
    )


def test_scope_globs() -> None:
    assert scope(["src/a.py", "docs/x/y.md"]) == []
    assert scope(["src/a.py", "src/deep/b.py"], allowed=["src/**"]) == []
    assert scope(["src/a.py", "src/deep/b.py"], allowed=["src/*"]) == [
        "src/deep/b.py: outside the allowed paths (src/*)"
    ]
    assert scope(["README.md", "docs/a/README.md"], allowed=["**/README.md"]) == []
    assert scope(["a/x/y/b", "a/b"], allowed=["a/**/b"]) == []
    assert scope(["docs/a.md"], allowed=["docs/"]) == []
    assert scope(["./x.py", "x.py"], allowed=["./x.py"]) == [
        "./x.py: outside the allowed paths (./x.py)"
    ]
    assert scope(["f1.py", "f2.py", "fa.py"], allowed=["f[0-9].py"]) == [
        "fa.py: outside the allowed paths (f[0-9].py)"
    ]
    assert scope(["f1.py", "fa.py"], allowed=["f[!0-9].py"]) == [
        "f1.py: outside the allowed paths (f[!0-9].py)"
    ]
    assert scope(["a.py"], allowed=[]) == ["a.py: outside the allowed paths ()"]
    assert scope(["secrets/key.pem", "src/a.py"], forbidden=["secrets/**", "*.pem"]) == [
        "secrets/key.pem: matches forbidden pattern 'secrets/**'"
    ]
    assert scope(["src/a.py"], allowed=["src/**"], forbidden=["src/a.py"]) == [
        "src/a.py: matches forbidden pattern 'src/a.py'"
    ]


def test_scope_workflows_forbidden_unless_explicitly_allowed() -> None:
    wf = ".github/workflows/ci.yml"
    assert len(scope([wf])) == 1
    assert len(scope([wf], allowed=["**"])) == 1  # a wildcard is not explicit
    assert len(scope([wf], allowed=["**/*.yml"])) == 1
    assert scope([wf], allowed=[".github/workflows/**"]) == []
    assert scope([wf], allowed=[".github/**"]) == []
    assert "needs an explicit allowed pattern" in scope([wf])[0]


@pytest.mark.parametrize(
    ("path", "pattern"),
    [
        (".github/actions/setup/action.yml", ".github/actions/**"),
        ("CODEOWNERS", "CODEOWNERS"),
        (".github/CODEOWNERS", ".github/CODEOWNERS"),
        ("docs/CODEOWNERS", "docs/CODEOWNERS"),
        (".github/dependabot.yml", ".github/dependabot.yml"),
        (".github/dependabot.yaml", ".github/dependabot.yaml"),
    ],
)
def test_scope_forbids_what_decides_ci_and_review(path: str, pattern: str) -> None:
    """Local actions run with CI secrets, CODEOWNERS (all three places GitHub reads it)
    picks reviewers, dependabot.yml picks registries: none is a model's to change."""
    assert scope([path]) == [
        f"{path}: matches {pattern!r}, which needs an explicit allowed pattern such as {pattern!r}"
    ]
    assert len(scope([path], allowed=["**"])) == 1
    assert scope([path], allowed=[path]) == []
    assert scope(["src/CODEOWNERS", "docs/CODEOWNERS.md", ".github/dependabot.json"]) == []


def test_scope_diff_size() -> None:
    assert scope(["a"], max_lines=10, lines=10) == []
    assert scope(["a"], max_lines=10, lines=11) == ["diff has 11 changed lines; the limit is 10"]
