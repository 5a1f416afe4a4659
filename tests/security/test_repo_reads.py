"""Class 2 of issue 14: files the runner reads from a repository on the host (AGENTS.md
and its overrides, skills, instruction files) are hostile. A committed link out of the
repository is refused with the reason in the report, never followed; only regular files
are opened, never more than their limit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from runner.prompt import load_instructions
from runner.skills import SkillError, read_skill
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import per_conversation, reply_message
from tests.support.security import cli, runs, tasks

CANARY = "canary-env-value-5f1c2e9a"


def _commit(repo: Path) -> None:
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(repo),
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "links",
        ],
        check=True,
    )


def test_committed_agents_md_link_to_environ_is_refused(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", "docs/rules.md": "Use tabs.\n"})
    os.symlink("/proc/self/environ", repo / "AGENTS.md")
    os.symlink("../docs/rules.md", repo / "docs" / "AGENTS.override.md")  # inside: fine
    _commit(repo)
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    out = tmp_path / "o"
    res = cli(
        "run",
        tasks(tmp_path, srv.base_url, repo, ["t"]),
        "--out",
        out,
        env={"SOME_SETTING": CANARY},
    )
    assert "Traceback" not in res.stderr
    assert all(CANARY not in r.raw.decode(errors="replace") for r in srv.requests)
    run = runs(out)["t"]
    assert run["status"] == "error"
    assert "AGENTS.md: is a symbolic link to /proc/self/environ" in run["error"], run["error"]
    assert "outside" in run["error"] and CANARY not in (out / "report.json").read_text()


def test_an_agents_md_link_inside_the_repository_is_read(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(
        tmp_path / "repo", {"README.md": "x\n", "docs/rules.md": "Use tabs always.\n"}
    )
    os.symlink("docs/rules.md", repo / "AGENTS.md")
    _commit(repo)
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    assert "Use tabs always." in srv.requests[0].raw.decode()


def test_instruction_files_and_skills_that_are_fifos_are_located_errors(tmp_path: Path) -> None:
    """A FIFO named as an instruction file or a skill is refused at once (nobody writes
    it, so reading it would block forever): a config error naming it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    from runner.errors import ConfigError

    with pytest.raises(ConfigError, match="FIFO"):
        load_instructions(fifo)
    (tmp_path / "skill").mkdir()
    os.mkfifo(tmp_path / "skill" / "SKILL.md")
    with pytest.raises(SkillError, match="FIFO"):
        read_skill(tmp_path / "skill" / "SKILL.md")


def test_agents_md_never_reads_the_git_directory(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A link inside the repository, but into `.git` (its config can hold a remote URL
    with a token): refused like a link out of it."""
    repo = make_git_repo(tmp_path / "repo")
    os.symlink(".git/config", repo / "AGENTS.md")
    _commit(repo)
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert "Traceback" not in res.stderr
    assert all(b"repositoryformatversion" not in r.raw for r in srv.requests)
    run = runs(out)["t"]
    assert run["status"] == "error"
    assert "AGENTS.md: leads into .git/" in run["error"], run["error"]


@pytest.mark.parametrize("target", ["AGENTS.md", "missing.md"])
def test_a_looping_or_dangling_agents_md_is_ignored_with_a_note(
    loopback_thread: ThreadFactory, tmp_path: Path, target: str
) -> None:
    """A self-loop made the run fail (exit 3) while a dangling link was skipped: both are
    links that lead nowhere, skipped alike, and the report says so."""
    repo = make_git_repo(tmp_path / "repo")
    os.symlink(target, repo / "AGENTS.md")
    _commit(repo)
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    run = runs(out)["t"]
    assert run["status"] == "completed"
    assert "AGENTS.md: a symbolic link that leads nowhere" in run["error"], run["error"]


def test_a_skill_linked_out_of_its_repository_is_refused(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """SKILL.md is read as AGENTS.md is: `-> /proc/self/environ` (or any file outside
    the repository holding the skill) is refused before anything runs, and nothing of
    the target reaches the model or the output."""
    repo = make_git_repo(tmp_path / "repo")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "SKILL.md").write_text(f"---\nname: x\ndescription: {CANARY}\n---\n")
    for name, target in (("environ", "/proc/self/environ"), ("other", outside / "SKILL.md")):
        (repo / "skills" / name).mkdir(parents=True)
        os.symlink(target, repo / "skills" / name / "SKILL.md")
    _commit(repo)
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    for name in ("environ", "other"):
        extra = f"  skills: ['{repo / 'skills' / name}']"
        res = cli(
            "run",
            tasks(tmp_path, srv.base_url, repo, ["t"], extra=extra),
            "--out",
            tmp_path / f"o-{name}",
            env={"SOME_SETTING": CANARY},
        )
        assert res.returncode == 2, res.stderr
        assert "SKILL.md: is a symbolic link to" in res.stderr and "outside" in res.stderr
        assert CANARY not in res.stderr + res.stdout
    assert srv.requests == []
