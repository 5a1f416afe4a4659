"""What git treats as its own, attacked through a whole run: names that are `.git` to git,
NTFS or HFS+, a `.gitmodules` link, and repositories the agent makes inside the
workspace. None of them may lose a run's work, and the runner's git never reads an
agent-made `.git` below the top. (The name rule itself: tests/test_gitnames.py.)"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message
from tests.support.security import cli, patch, runs, sh, tasks


def _outputs(requests: list[RecordedRequest]) -> str:
    return "\n".join(str(v) for v in requests[-1].call_outputs().values())


def _events(out: Path, run: str) -> list[dict[str, object]]:
    path = out / "threads" / f"{run}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_git_alias_names_are_left_out_and_the_rest_is_committed(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Each of these made `git add` fail and the run lose all its work (exit 3). Now each
    is left out with its reason in the report, and everything else is on the branch;
    apply_patch refuses the same names by the same rule."""
    repo = make_git_repo(tmp_path / "repo")
    made = [
        "mkdir -p '.git /d' .git. 'd/.git ' && echo a > '.git /d/a' && echo b > .git./b",
        "echo c > 'd/.git /c' && echo x > git~1 && mkdir GIT~1 && echo y > GIT~1/y",
        "echo z > $'.g\\xe2\\x80\\x8cit' && ln -s README.md .gitmodules",
        "echo kept > kept.txt && mkdir -p d && echo kept > d/kept.txt",
    ]
    steps: list[Reply] = [
        sh(" && ".join(made), "c0"),
        patch("*** Add File: .git /x\n+x", "p1"),
        patch("*** Add File: .git./x\n+x", "p2"),
        patch("*** Add File: sub/git~1/x\n+x", "p3"),
        patch("*** Add File: .GIT  ./x\n+x", "p4"),
        sh("ln -s .git. dots", "c5"),
        patch("*** Add File: dots/x\n+x", "p6"),  # the alias reached through a link
        patch("*** Add File: ok/fine.txt\n+fine", "p7"),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, len(steps) - 1)]))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    said = _outputs(srv.requests)
    assert said.count("is `.git` in another case or spelling") == 5, said
    run = runs(out)["t"]
    assert run["status"] == "completed"
    branch = run["result"]["branch"]
    files = sorted(git(repo, "ls-tree", "-r", "--name-only", branch).splitlines())
    assert files == ["README.md", "d/kept.txt", "dots", "kept.txt", "ok/fine.txt"]
    for name in (".git ", ".git.", "d/.git ", "git~1", "GIT~1", ".g\u200cit", ".gitmodules"):
        assert f"{name}: " in run["error"], (name, run["error"])
    assert "not captured in the result" in run["error"]
    notes = [e for e in _events(out, "t") if e["type"] == "note"]
    assert len(notes) == 1 and ".gitmodules" in str(notes[0]["message"])


def test_agent_made_repositories_are_plain_files_and_gitdir_is_never_followed(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`git init` inside the sandbox made `sub` a gitlink (its files lost); a `.git` FILE
    saying `gitdir: <a host repository>` put that repository's HEAD into the result. Now
    both directories' files are committed as plain files, and the host repository's
    commit id appears nowhere."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", "src/app.py": "v1\n"})
    host = make_git_repo(tmp_path / "host-secret", {"secret.txt": "s\n"})
    host_head = git(host, "rev-parse", "HEAD").strip()
    steps: list[Reply] = [
        sh(
            "mkdir sub && cd sub && git init -q && echo one > one.txt && git add one.txt && "
            "git -c user.name=a -c user.email=a@a commit -qm one && echo two > two.txt",
            "c0",
        ),
        sh("mkdir -p build/pkg && git -C build/pkg init -q && echo build/ > .gitignore", "c1a"),
        sh(
            f"mkdir linked && printf 'gitdir: {host}/.git\\n' > linked/.git && "
            f"echo mine > linked/mine.txt && printf 'gitdir: {host}/.git\\n' > src/.git && "
            "echo v2 > src/app.py",
            "c1",
        ),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, len(steps) - 1)]))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    run = runs(out)["t"]
    assert run["status"] == "completed", run["error"]
    branch = run["result"]["branch"]
    tree = git(repo, "ls-tree", "-r", branch)
    assert "160000" not in tree and " commit " not in tree, tree
    assert git(repo, "show", f"{branch}:sub/one.txt") == "one\n"
    assert git(repo, "show", f"{branch}:sub/two.txt") == "two\n"
    assert git(repo, "show", f"{branch}:linked/mine.txt") == "mine\n"
    assert git(repo, "show", f"{branch}:src/app.py") == "v2\n"
    for entry in ("sub/.git", "linked/.git", "src/.git"):
        assert f"{entry}: a nested repository's `.git`" in run["error"], run["error"]
    assert "build/" not in run["error"]  # ignored: no loss, so not reported
    everything = [
        (out / "report.json").read_text(),
        (out / run["result"]["patch"]).read_text(),
        (out / "threads" / "t.jsonl").read_text(),
        tree,
    ]
    assert not any(host_head in text for text in everything)


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox user differs only for a root runner")
def test_what_apply_patch_makes_belongs_to_the_sandbox_user(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A root runner's apply_patch made root-owned files and directories the sandboxed
    agent (another uid) could then neither change nor delete."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n", "old.txt": "old\n"})
    steps: list[Reply] = [
        patch("*** Add File: new/dir/f.txt\n+made by apply_patch", "p0"),
        patch("*** Update File: old.txt\n*** Move to: moved/here/old.txt\n@@\n-old\n+new", "p1"),
        sh(
            "echo more >> new/dir/f.txt && touch new/dir/g.txt && mv new/dir/f.txt new/f.txt"
            " && echo again >> moved/here/old.txt && rm -r moved; ls -R new moved 2>&1",
            "c2",
        ),
        reply_message("done"),
    ]
    srv = loopback_thread(per_conversation(lambda req, i: steps[min(i, len(steps) - 1)]))
    out = tmp_path / "o"
    res = cli("run", tasks(tmp_path, srv.base_url, repo, ["t"]), "--out", out)
    assert res.returncode == 0, res.stderr
    said = _outputs(srv.requests)
    assert "Permission denied" not in said, said
    run = runs(out)["t"]
    branch = run["result"]["branch"]
    files = sorted(git(repo, "ls-tree", "-r", "--name-only", branch).splitlines())
    assert files == ["README.md", "new/dir/g.txt", "new/f.txt"], (files, said)
    assert git(repo, "show", f"{branch}:new/f.txt") == "made by apply_patch\nmore\n"
