"""A batch's changes land as branches and patches; the user's repository is never touched."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli, tasks_file
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import (
    Reply,
    last_user_text,
    per_conversation,
    reply_custom_tool_call,
    reply_function_call,
    reply_message,
)


def snapshot(repo: Path) -> dict[str, str]:
    """Everything about the user's repository that a run must not change."""
    gitdir = repo / ".git"
    files = sorted(
        p
        for p in repo.rglob("*")
        if p.is_file() and (gitdir not in p.parents or p.parent == gitdir or "hooks" in p.parts)
    )
    digest = hashlib.sha256()
    for p in files:  # the work tree, .git/index, HEAD, config, hooks
        digest.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes())
    refs = [r for r in git(repo, "for-each-ref").splitlines() if "refs/heads/runner/" not in r]
    return {
        "status": git(repo, "status", "--porcelain=v2", "--branch"),
        "head": git(repo, "rev-parse", "HEAD"),
        "stash": git(repo, "stash", "list"),
        "refs": "\n".join(refs),
        "files": digest.hexdigest(),
    }


def patch_script(req: Any, i: int) -> Reply:
    task = last_user_text(req) if i == 0 else ""
    if i == 0:
        if task.startswith("add "):
            name = task.split()[1]
            return reply_custom_tool_call(
                "apply_patch",
                f"*** Begin Patch\n*** Add File: {name}\n+made by {name}\n*** End Patch",
                call_id="p",
            )
        if task.startswith("workflow"):
            return reply_function_call(
                "shell",
                {
                    "command": [
                        "bash",
                        "-c",
                        "mkdir -p .github/workflows && echo x > .github/workflows/a.yml",
                    ]
                },
                call_id="s",
            )
        if task.startswith("nothing"):
            return reply_message("nothing to do")
    if i < 3 and task.startswith("forever") or (i > 0 and "forever" in json.dumps(req.input[-3:])):
        return reply_function_call(
            "shell", {"command": ["bash", "-c", f"echo {i} >> log.txt"]}, call_id=f"c{i}"
        )
    return reply_message("done")


def test_eight_runs_on_one_repo_become_eight_branches(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (repo / "a.txt").write_text("stashed change\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "stash")
    (repo / "a.txt").write_text("uncommitted user change\n")  # dirty, must stay as is
    git(repo, "add", "a.txt")
    (repo / "a.txt").write_text("unstaged on top\n")
    before = snapshot(repo)
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(
        tmp_path, srv.base_url, repo, [(f"t{i}", f"add file{i}.txt") for i in range(8)]
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out, "--concurrency", "8")
    assert res.returncode == 0, res.stderr
    assert snapshot(repo) == before
    report = json.loads((out / "report.json").read_text())
    branches = set()
    for t in report["runs"]:
        r = t["result"]
        assert t["workspace"]["base_dirty"] is True
        assert r["files"] == [f"file{t['id'][1:]}.txt"] and r["insertions"] == 1
        assert r["files_changed"] == 1 and r["deletions"] == 0
        branches.add(r["branch"])
        assert git(repo, "rev-parse", r["branch"]).strip() == r["commit"]
        shown = git(repo, "show", f"{r['branch']}:file{t['id'][1:]}.txt")
        assert shown == f"made by file{t['id'][1:]}.txt\n"
        # The uncommitted change was not part of the run.
        assert git(repo, "show", f"{r['branch']}:a.txt") == "a\n"
        patch = (out / r["patch"]).read_text()
        assert f"+made by file{t['id'][1:]}.txt" in patch
        assert "completed" in git(repo, "log", "-1", "--format=%B", r["branch"])
    assert len(branches) == 8
    assert all(b.startswith(f"runner/{report['batch_id']}/t") for b in branches)


def test_patch_applies_to_base(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("one", "add new.txt")])
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    git(clone, "apply", str(tmp_path / "o" / report["runs"][0]["result"]["patch"]))
    assert (clone / "new.txt").read_text() == "made by new.txt\n"


def test_no_change_no_branch(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    refs = git(repo, "for-each-ref")
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("one", "nothing")])
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode == 0
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["runs"][0]["result"] is None
    assert git(repo, "for-each-ref") == refs


def test_limit_keeps_work_on_its_branch(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: reply_function_call(
                "shell", {"command": ["bash", "-c", f"echo {i} >> log.txt"]}, call_id=f"c{i}"
            )
        )
    )
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("loop", "forever")])
    text = tasks.read_text().replace("repo:", "limits: {max_requests: 3}, repo:")
    tasks.write_text(text)
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 1
    t = json.loads((tmp_path / "o" / "report.json").read_text())["runs"][0]
    assert t["status"] == "max_requests"
    branch = t["result"]["branch"]
    assert git(repo, "show", f"{branch}:log.txt") == "0\n1\n2\n"
    assert "max_requests" in git(repo, "log", "-1", "--format=%B", branch)


def test_scope_violation_keeps_patch_but_no_branch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    refs = git(repo, "for-each-ref")
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("wf", "workflow")])
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 1
    t = json.loads((tmp_path / "o" / "report.json").read_text())["runs"][0]
    assert t["status"] == "scope_violation"
    assert t["result"]["branch"] is None and t["result"]["violations"]
    assert ".github/workflows/a.yml" in (tmp_path / "o" / t["result"]["patch"]).read_text()
    assert git(repo, "for-each-ref") == refs


def test_push_with_token_never_leaks(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "remote", "add", "origin", str(remote))
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(
        tmp_path,
        srv.base_url,
        repo,
        [("one", "add pushed.txt")],
        git_settings="{push: {remote: origin, token_env: PUSH_TOKEN}}",
    )
    out = tmp_path / "o"
    res = run_cli("run", tasks, "--out", out, env={"PUSH_TOKEN": "ghs_canarytoken1234567890"})
    assert res.returncode == 0, res.stderr
    t = json.loads((out / "report.json").read_text())["runs"][0]
    branch = t["result"]["branch"]
    assert t["result"]["pushed"]
    assert git(remote, "rev-parse", branch).strip() == t["result"]["commit"]
    for f in out.rglob("*"):
        if f.is_file():
            assert "ghs_canarytoken" not in f.read_text(errors="replace")
    assert "ghs_canarytoken" not in res.stderr + res.stdout


def test_check_decides_pass_or_fail(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(
        tmp_path,
        srv.base_url,
        repo,
        [("good", "add ok.txt"), ("bad", "add other.txt"), ("slow", "nothing")],
    )
    text = tasks.read_text()
    text = text.replace("{id: good,", "{id: good, check: 'test -f ok.txt && echo fine',")
    text = text.replace("{id: bad,", "{id: bad, check: 'echo no ok.txt here >&2; exit 3',")
    text = text.replace("{id: slow,", "{id: slow, check: 'sleep 20', check_timeout_s: 0.5,")
    tasks.write_text(text)
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 1
    by_id = {t["id"]: t for t in json.loads((tmp_path / "o" / "report.json").read_text())["runs"]}
    assert by_id["good"]["status"] == "completed"
    assert by_id["good"]["check"]["passed"] and by_id["good"]["check"]["output_tail"] == "fine\n"
    bad = by_id["bad"]
    assert bad["status"] == "check_failed" and bad["check"]["exit_code"] == 3
    assert "no ok.txt here" in bad["check"]["output_tail"]
    assert bad["result"]["branch"]  # the work is kept all the same
    slow = by_id["slow"]
    assert slow["status"] == "check_failed" and slow["check"]["exit_code"] == 124
    # Files the check makes never land on the branch.
    assert git(repo, "ls-tree", "--name-only", by_id["good"]["result"]["branch"]).split() == [
        "README.md",
        "ok.txt",
    ]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_stops_cleanly_and_keeps_work(
    loopback_thread: ThreadFactory, tmp_path: Path, signame: str
) -> None:
    import signal
    import sys
    import time

    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: reply_function_call(
                "shell",
                {
                    "command": ["bash", "-c", "echo partial > work.txt; sleep 60"],
                    "timeout_ms": 120_000,
                },
                call_id=f"c{i}",
            )
        )
    )
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("long", "forever"), ("queued", "x")])
    tasks.write_text(tasks.read_text().replace("{id: long,", "{id: long, check: 'true',"))
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(tasks),
            "--out",
            str(out),
            "--concurrency",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    events = out / "threads" / "long.jsonl"
    deadline = time.monotonic() + 30
    while not (events.exists() and "item.started" in events.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)
    t0 = time.monotonic()
    proc.send_signal(getattr(signal, signame))
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 10
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    by_id = {t["id"]: t for t in json.loads((out / "report.json").read_text())["runs"]}
    long = by_id["long"]
    assert long["status"] == "interrupted"
    assert long["check"] is None  # a run stopped mid-turn never starts its check
    assert git(repo, "show", f"{long['result']['branch']}:work.txt") == "partial\n"
    assert by_id["queued"]["status"] == "skipped" and by_id["queued"]["result"] is None
    assert by_id["queued"]["skip_reason"] == "interrupted"
    assert "--resume" in err.splitlines()[-1]
    assert "turn.failed" in events.read_text()
    # No process of the run survives it.
    ps = subprocess.run(
        ["pgrep", "-f", "-r", "R,S,D", "partial > work.txt; sleep 60"],
        capture_output=True,
        text=True,
    )
    assert ps.stdout.strip() == ""


def test_matrix_runs_each_task_per_model_and_repeat(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(per_conversation(patch_script))
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("one", "add m.txt")])
    text = tasks.read_text().replace(
        "tasks:\n", "matrix: {model: [fake/a, fake/b], repeat: 2}\ntasks:\n"
    )
    text = text.replace(
        "  apply_patch_tool: freeform",
        "  apply_patch_tool: freeform\n  git: {branch: 'agent/{task}/{model}/{repeat}'}",
    )
    tasks.write_text(text)
    out = tmp_path / "o"
    res = run_cli("run", tasks, "--out", out, "--concurrency", "4")
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    runs = {t["run"]: t for t in report["runs"]}
    assert sorted(runs) == ["one.fake-a.r1", "one.fake-a.r2", "one.fake-b.r1", "one.fake-b.r2"]
    assert sorted(t["result"]["branch"] for t in runs.values()) == [
        "agent/one/fake-a/1",
        "agent/one/fake-a/2",
        "agent/one/fake-b/1",
        "agent/one/fake-b/2",
    ]
    assert {r.model for r in srv.requests} == {"a", "b"}
    assert len({r.prompt_cache_key for r in srv.requests}) == 4
    assert (out / "threads" / "one.fake-b.r2.jsonl").is_file()
    assert (out / "patches" / "one.fake-a.r1.patch").is_file()
    assert (out / "junit.xml").read_text().count("<testsuite ") == 2
    # --model replaces the matrix.
    res = run_cli("run", tasks, "--out", tmp_path / "o2", "--model", "fake/c")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert [t["run"] for t in report["runs"]] == ["one.r1", "one.r2"]
