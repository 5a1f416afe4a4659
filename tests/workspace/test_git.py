"""The one place the runner starts git: a scratch environment, forced config, scrubbed
errors, and the few helpers around it, against real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import GitError
from runner.workspace.git import (
    common_dir,
    config_env,
    git_env,
    read_git,
    ref_lock,
    run_git,
    run_git_to_file,
    user_filter_blanks,
)
from tests.support.fixtures import git, make_git_repo


def test_git_env_drops_what_was_inherited_and_sets_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", "/elsewhere/.git")
    monkeypatch.setenv("GIT_SSH_COMMAND", "touch pwned")
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.pager=evil'")
    monkeypatch.setenv("PAGER", "evil")
    monkeypatch.setenv("KEPT_FOR_GIT", "yes")
    env = git_env({"GIT_INDEX_FILE": "/mine"}, protocols="file:https")
    assert not {"GIT_DIR", "GIT_SSH_COMMAND", "GIT_CONFIG_PARAMETERS", "PAGER"} & set(env)
    assert env["KEPT_FOR_GIT"] == "yes" and env["GIT_INDEX_FILE"] == "/mine"
    assert env["GIT_ALLOW_PROTOCOL"] == "file:https" and git_env()["GIT_ALLOW_PROTOCOL"] == "file"
    assert (env["GIT_CONFIG_GLOBAL"], env["GIT_TERMINAL_PROMPT"]) == (os.devnull, "0")


def test_the_repository_s_hooks_and_fsmonitor_never_run(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r")
    marker = tmp_path / "ran"
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\necho hook >> '{marker}'\n")
    hook.chmod(0o755)
    git(repo, "config", "core.fsmonitor", f"echo fsmonitor >> '{marker}'; false")
    (repo / "new.txt").write_text("x\n")
    run_git(["add", "new.txt"], cwd=repo)
    run_git(["status"], cwd=repo)
    run_git(["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m"], cwd=repo)
    assert not marker.exists()
    git(
        repo,
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "n",
    )
    assert "hook" in marker.read_text()  # plain git runs them: the check above can fail


def test_a_command_transport_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(GitError) as err:
        run_git(["ls-remote", f"ext::sh -c touch% {marker}"], cwd=tmp_path)
    assert err.value.returncode != 0 and not marker.exists()


def test_a_failure_names_the_command_and_keeps_no_secret(tmp_path: Path) -> None:
    secret = "s3cr3t-token-value"
    with pytest.raises(GitError) as err:
        run_git(["ls-remote", str(tmp_path / secret / "repo")], cwd=tmp_path, secrets=[secret, ""])
    text = str(err.value)
    assert text.startswith("`git ls-remote ") and "failed (exit 128)" in text
    assert secret not in err.value.stderr and "[REDACTED]" in err.value.stderr
    assert run_git(["rev-parse", "--verify", "nope"], cwd=tmp_path, check=False).returncode != 0


def test_config_env_carries_keys_with_an_equals_sign(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r")
    pairs = [("url.file:///a=b/.insteadOf", "x:"), ("user.name", "a=b c")]
    env = config_env(pairs)
    assert env["GIT_CONFIG_COUNT"] == "2" and env["GIT_CONFIG_KEY_0"] == pairs[0][0]
    shown = run_git(["config", "--get-regexp", "^(url|user)\\."], cwd=repo, env=env).stdout
    assert shown.decode().splitlines() == ["url.file:///a=b/.insteadof x:", "user.name a=b c"]


def test_every_filter_driver_of_the_user_is_blanked(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r")
    git(repo, "config", "filter.lfs.clean", "git-lfs clean -- %f")
    git(repo, "config", "filter.lfs.required", "true")
    git(repo, "config", "filter.my.dotted.smudge", "touch smudged")
    git(repo, "config", "filter.noseparator", "x")
    assert user_filter_blanks(repo) == [
        ("filter.lfs.clean", ""),
        ("filter.lfs.smudge", ""),
        ("filter.lfs.process", ""),
        ("filter.lfs.required", "false"),
        ("filter.my.dotted.clean", ""),
        ("filter.my.dotted.smudge", ""),
        ("filter.my.dotted.process", ""),
        ("filter.my.dotted.required", "false"),
    ]
    assert user_filter_blanks(make_git_repo(tmp_path / "plain")) == []


def test_a_linked_worktree_shares_its_main_repository_s_ref_lock(tmp_path: Path) -> None:
    main = make_git_repo(tmp_path / "main")
    git(main, "worktree", "add", "-q", str(tmp_path / "linked"))
    linked_git = Path(git(tmp_path / "linked", "rev-parse", "--absolute-git-dir").strip())
    assert linked_git != main / ".git"
    assert common_dir(linked_git) == (main / ".git").resolve()
    assert common_dir(main / ".git") == main / ".git"
    assert ref_lock(linked_git) is ref_lock(main / ".git")
    assert ref_lock(make_git_repo(tmp_path / "other") / ".git") is not ref_lock(main / ".git")


def test_output_to_a_file_is_whole_or_absent(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r", {"a.txt": "hello\n"})
    out = tmp_path / "out" / "a.txt"
    run_git_to_file(["show", "HEAD:a.txt"], out, env={}, cwd=repo)
    assert out.read_text() == "hello\n"
    with pytest.raises(GitError):
        run_git_to_file(["show", "HEAD:missing.txt"], out, env={}, cwd=repo)
    assert out.read_text() == "hello\n" and os.listdir(out.parent) == ["a.txt"]


def test_read_git_never_raises(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r")
    done = read_git(repo, "rev-parse", "--abbrev-ref", "HEAD")
    assert (done.returncode, done.stdout) == (0, "main\n")
    assert read_git(repo, "rev-parse", "--verify", "no-such-ref").returncode != 0
