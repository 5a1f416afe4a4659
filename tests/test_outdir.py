"""An out dir belongs to one batch: a second live writer is refused naming the first's
pid, and a used dir is never emptied without `--force`. The runner is called in-process
against the loopback server; the first of two live writers is a real process, whose pid
the second must name."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, reply_message

KEY = "sk-canary-outdir-0123456789"


def tasks_file(tmp_path: Path, base_url: str) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    make_git_repo(repo)
    path = repo / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults: {model: fake/test-model}\n"
        "tasks:\n  - {id: one, prompt: hi, repo: .}\n"
    )
    return path


def cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "runner", *map(str, args)]


ENV = {**os.environ, "FAKE_API_KEY": KEY}


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"FAKE_API_KEY": KEY})


def test_second_live_writer_is_refused_naming_the_pid(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    asked, release = threading.Event(), threading.Event()

    async def slow(req: Any, i: int) -> Reply:
        asked.set()
        await asyncio.to_thread(release.wait, 90)
        return reply_message("done")

    srv = loopback_thread(slow)
    tasks = tasks_file(tmp_path, srv.base_url)
    out = tmp_path / "out"
    first = subprocess.Popen(
        cli("run", tasks, "--out", out),
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert asked.wait(60), "the first batch never asked the model"
        second = run("run", tasks, "--out", out)
        resumed = run("run", tasks, "--out", out, "--resume")
    finally:
        release.set()
        stdout, stderr = first.communicate(timeout=60)
    assert second.returncode == 2, second.stderr
    assert f"pid {first.pid}" in second.stderr
    assert "--out" in second.stderr and "Traceback" not in second.stderr
    assert resumed.returncode == 2 and f"pid {first.pid}" in resumed.stderr
    assert first.returncode == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert [r["status"] for r in report["runs"]] == ["completed"]
    assert (out / report["runs"][0]["events_file"]).is_file()
    assert len(srv.requests) == 1  # the refused runners asked nothing


def test_used_out_dir_is_kept_without_force(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = tasks_file(tmp_path, srv.base_url)
    out = tmp_path / "out"
    assert run("run", tasks, "--out", out).returncode == 0
    before = (out / "report.json").read_text()
    thread = out / json.loads(before)["runs"][0]["events_file"]
    again = run("run", tasks, "--out", out)
    assert again.returncode == 2, again.stderr
    assert "--force" in again.stderr and "--resume" in again.stderr
    assert str(out) in again.stderr and "Traceback" not in again.stderr
    assert (out / "report.json").read_text() == before and thread.is_file()
    assert len(srv.requests) == 1
    forced = run("run", tasks, "--out", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (
        json.loads((out / "report.json").read_text())["batch_id"] != json.loads(before)["batch_id"]
    )


def test_empty_or_foreign_out_dir(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = tasks_file(tmp_path, srv.base_url)
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("run", tasks, "--out", empty)
    assert res.returncode == 0, res.stderr
    assert (empty / "report.json").is_file()
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep me\n")
    refused = run("run", tasks, "--out", foreign)
    assert refused.returncode == 2 and "mine.txt" in refused.stderr
    assert (foreign / "mine.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in foreign.iterdir()) == [".runner.lock", "mine.txt"]


def test_resume_of_a_used_dir_needs_no_force(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = tasks_file(tmp_path, srv.base_url)
    out = tmp_path / "out"
    assert run("run", tasks, "--out", out).returncode == 0
    res = run("run", tasks, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == 1  # the finished run was kept
