"""An out dir belongs to one batch: a second live writer is refused naming the first's
pid, a used dir is never emptied without `--force` (and `--force` deletes only a batch's
files), `runner report merge` keeps the same rules, and some places are never an out dir.
The runner is called in-process against the loopback server; the first of two live
writers is a real process, whose pid the second must name."""

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


def two_tasks(tmp_path: Path, base_url: str) -> Path:
    path = tasks_file(tmp_path, base_url)
    path.write_text(
        path.read_text().replace(
            "tasks:\n  - {id: one, prompt: hi, repo: .}\n",
            "tasks:\n  - {id: one, prompt: hi, repo: .}\n  - {id: two, prompt: yo, repo: .}\n",
        )
    )
    return path


def shards(tasks: Path, tmp_path: Path) -> list[Path]:
    dirs = [tmp_path / "s1", tmp_path / "s2"]
    for k, d in enumerate(dirs, 1):
        res = run_cli("run", tasks, "--out", d, "--shard", f"{k}/2")
        assert res.returncode == 0, res.stderr
    return dirs


def test_merge_into_a_live_batch_is_refused_naming_the_pid(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    asked, release = threading.Event(), threading.Event()

    async def script(req: Any, i: int) -> Reply:
        if "slow" in json.dumps(req.input):
            asked.set()
            await asyncio.to_thread(release.wait, 90)
        return reply_message("done")

    srv = loopback_thread(script)
    tasks = two_tasks(tmp_path, srv.base_url)
    dirs = shards(tasks, tmp_path)
    slow = tasks.parent / "slow.yaml"
    slow.write_text(tasks.read_text().replace("prompt: hi", "prompt: slow"))
    out = tmp_path / "out"
    first = subprocess.Popen(
        cli("run", slow, "--out", out), env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert asked.wait(60), "the batch never asked the model"
        merged = run_cli("report", "merge", *dirs, "--out", out)
        forced = run_cli("report", "merge", *dirs, "--out", out, "--force")
    finally:
        release.set()
        first.communicate(timeout=60)
    for res in (merged, forced):
        assert res.returncode == 2, res.stderr
        assert f"pid {first.pid}" in res.stderr and "Traceback" not in res.stderr
    assert first.returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert sorted(p.name for p in (out / "threads").iterdir()) == ["one.jsonl", "two.jsonl"]
    assert sorted(r["id"] for r in report["runs"]) == ["one", "two"]
    assert all(r["batch_id"] == report["batch_id"] for r in report["runs"] if "batch_id" in r)


def test_merge_keeps_a_finished_batch_unless_forced(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = two_tasks(tmp_path, srv.base_url)
    dirs = shards(tasks, tmp_path)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out, "--only", "one").returncode == 0
    (out / "notes.txt").write_text("mine\n")
    before = (out / "report.json").read_text()
    refused = run_cli("report", "merge", *dirs, "--out", out)
    assert refused.returncode == 2, refused.stderr
    assert "--force" in refused.stderr and str(out) in refused.stderr
    assert (out / "report.json").read_text() == before
    forced = run_cli("report", "merge", *dirs, "--out", out, "--force")
    assert forced.returncode == 0, forced.stderr
    merged = json.loads((out / "report.json").read_text())
    assert sorted(r["id"] for r in merged["runs"]) == ["one", "two"]
    assert not (out / "journal").exists()  # the earlier batch's journal went with it
    assert (out / "notes.txt").read_text() == "mine\n"  # a file no batch wrote stays
    for r in merged["runs"]:
        shard = next(d for d in dirs if (d / r["events_file"]).is_file())
        assert (out / r["events_file"]).read_bytes() == (shard / r["events_file"]).read_bytes()
    # The merged dir has no journal: --resume cannot continue it and says so.
    asked = len(srv.requests)
    resumed = run_cli("run", tasks, "--out", out, "--resume")
    assert resumed.returncode == 2, resumed.stderr
    assert "journal" in resumed.stderr and "--force" in resumed.stderr
    assert len(srv.requests) == asked


def test_a_fifo_as_the_lock_file_is_named(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, "http://127.0.0.1:9/v1")
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".runner.lock")
    res = run_cli("run", tasks, "--out", out, "--force")
    assert res.returncode == 2, res.stderr
    assert ".runner.lock" in res.stderr and "FIFO" in res.stderr
    assert "Traceback" not in res.stderr


def test_places_that_are_never_an_out_dir(tmp_path: Path) -> None:
    tasks = tasks_file(tmp_path, "http://127.0.0.1:9/v1")
    home = tmp_path / "home"
    home.mkdir()
    for out in (home, tmp_path / "repo", tmp_path, "/", "/usr"):
        res = run_cli("run", tasks, "--out", out, "--force", env={"HOME": str(home)})
        assert res.returncode == 2, (out, res.stderr)
        assert "an out dir is a folder of its own" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr
    assert not (home / ".runner.lock").exists() and not (tmp_path / "report.json").exists()
    assert not (tmp_path / "repo" / ".runner.lock").exists()


def test_force_keeps_files_no_batch_wrote_and_says_so(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = tasks_file(tmp_path, srv.base_url)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    refused = run_cli("run", tasks, "--out", out)
    assert refused.returncode == 2
    assert "notes.txt" in refused.stderr and "delete" not in refused.stderr
    assert "--force" in refused.stderr and "kept" in refused.stderr
    forced = run_cli("run", tasks, "--out", out, "--force")
    assert forced.returncode == 0, forced.stderr
    assert (out / "notes.txt").read_text() == "mine\n"
    again = run_cli("run", tasks, "--out", out)
    assert again.returncode == 2 and "keeps any other file" in again.stderr
    assert run_cli("run", tasks, "--out", out, "--force").returncode == 0
    assert (out / "notes.txt").read_text() == "mine\n"
