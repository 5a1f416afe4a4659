"""Classes 1, 3 and 4 of issue 14: the runner's own writes (secret redaction, apply_patch,
its git) never follow what the agent made: symbolic links, `.git` aliases, case variants
of `.git`, FIFOs."""

from __future__ import annotations

import os
import time
from functools import partial
from pathlib import Path

import anyio

from runner import workspace
from runner.sandbox import make_executor, make_policy
from runner.sandbox.env import child_env
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message
from tests.support.security import KEY, cli, patch, runs, sh, tasks


def _outputs(requests: list[RecordedRequest]) -> str:
    """Every tool output the model was sent (the last request carries them all)."""
    return "\n".join(str(v) for v in requests[-1].call_outputs().values())


def test_redaction_never_renames_through_an_agent_symlink(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A file under a directory named like the key must be renamed to `[REDACTED]/...`;
    the agent made `[REDACTED]` a link to the user's `.git/hooks`. The old rename followed
    it and planted an executable hook in the user's repository."""
    repo = make_git_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    before = sorted(hooks.iterdir())
    steps = [
        sh(
            f"mkdir {KEY} && printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > {KEY}/pre-commit"
            f" && chmod +x {KEY}/pre-commit && ln -s {hooks} '[REDACTED]'"
            " && echo fine > fine.txt",
            "c0",
        ),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, 1)]))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert "Traceback" not in res.stderr
    assert not (hooks / "pre-commit").exists() and sorted(hooks.iterdir()) == before
    run = runs(out)["t"]
    # Better no commit than one carrying the secret, or one written through the link.
    assert run["status"] == "error" and "symbolic link" in run["error"], run["error"]
    assert KEY not in (out / "report.json").read_text()


def test_apply_patch_refuses_git_through_an_alias_or_another_case(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    steps: list[Reply] = [
        sh("ln -s .git g && ln -s .git/hooks h", "c0"),
        patch("*** Add File: g/hooks/pre-commit\n+#!/bin/sh\n+touch /tmp/pwned", "p1"),
        patch("*** Add File: h/post-checkout\n+#!/bin/sh", "p2"),
        patch("*** Add File: g/objects/info/alternates\n+/", "p3"),
        patch("*** Add File: .GIT/config\n+[core]", "p4"),
        patch("*** Add File: sub/.Git/x\n+x", "p5"),
        # Made by the agent's own shell: git refuses to commit it, so it is left out
        # instead of failing the commit and losing the rest of the work.
        sh(
            "mkdir -p .GIT deep/.gIt && echo x > .GIT/x && echo y > deep/.gIt/y"
            " && echo kept > kept.txt",
            "c6",
        ),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, len(steps) - 1)]))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    said = _outputs(srv.requests)
    assert said.count("apply_patch failed: refused path") == 5, said
    assert said.count(".git is read-only in the sandbox") == 3
    assert said.count("in another case") == 2
    run = runs(out)["t"]
    branch = run["result"]["branch"]
    assert git(repo, "show", f"{branch}:kept.txt") == "kept\n"
    files = git(repo, "ls-tree", "-r", "--name-only", branch).split()
    assert sorted(files) == ["README.md", "g", "h", "kept.txt"]  # the links, as links
    assert not (repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (repo / ".git" / "hooks" / "post-checkout").exists()


def test_the_check_mounts_the_runners_object_store_not_the_agents_alternates(
    tmp_path: Path,
) -> None:
    """Whatever `.git/objects/info/alternates` says when the check runs (here doctored to
    name the user's whole `.git`, whose config holds a token), the sandbox shows only the
    object store the runner recorded when it made the workspace."""
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "config", "remote.origin.url", "https://x-access-token:ghp_leak@github.com/o/r")
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    try:
        (ws.path / ".git" / "objects" / "info" / "alternates").write_text(f"{repo / '.git'}\n")
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        executor = make_executor(policy, objects=[ws.objects])
        res = anyio.run(
            partial(
                executor.run,
                [
                    "bash",
                    "-c",
                    "ls /tmp/.runner/objects/0; cat "
                    "/tmp/.runner/objects/0/config; git log --oneline | wc -l",
                ],
                cwd=ws.path,
                timeout_s=20,
                env=child_env(os.environ),
            )
        )
        text = res.output.decode()
        assert "ghp_leak" not in text and "pack" in text and "info" in text
        assert text.strip().endswith("1"), text  # git still reads the real objects
    finally:
        workspace.cleanup_sync(ws)


def test_fifos_never_block_the_runner(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    """apply_patch on a FIFO (read for an update, written for an add) and a FIFO left in
    the tree at commit time: each is refused at once, with the reason, and the run and its
    report finish normally."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", "f": "old\n"})
    steps: list[Reply] = [
        sh("rm f && mkfifo f g && echo kept > kept.txt", "c0"),
        patch("*** Update File: f\n@@\n-old\n+new", "p1"),
        patch("*** Add File: g\n+x", "p2"),
        patch("*** Delete File: README.md\n*** Add File: g\n+x", "p3"),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, len(steps) - 1)]))
    out = tmp_path / "o"
    t0 = time.monotonic()
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out, timeout=60)
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stderr
    assert took < 30
    said = _outputs(srv.requests)
    assert "failed: f: is a FIFO, not a regular file" in said, said
    assert said.count("writing failed: g: is a FIFO, not a regular file") == 2
    assert "No files were changed." in said
    run = runs(out)["t"]
    branch = run["result"]["branch"]
    assert git(repo, "show", f"{branch}:README.md") == "x\n"  # the failed patch undone
    assert sorted(git(repo, "ls-tree", "-r", "--name-only", branch).split()) == [
        "README.md",
        "kept.txt",
    ]
    for fifo in ("f", "g"):  # left out, and the report says why
        assert f"{fifo}: a FIFO, which git cannot record" in run["error"], run["error"]
