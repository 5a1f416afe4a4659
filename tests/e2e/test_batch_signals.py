"""Ctrl-C and SIGTERM end a batch within seconds in every state, a task's `check` too."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.support import paths
from tests.support.cli import tasks_file
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import per_conversation, reply_custom_tool_call, reply_message


def _alive(pattern: str) -> str:
    return subprocess.run(
        ["pgrep", "-f", "-r", "R,S,D", pattern], capture_output=True, text=True
    ).stdout.strip()


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_signal_kills_a_running_check_and_keeps_the_work(
    loopback_thread: ThreadFactory, tmp_path: Path, signame: str
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                reply_custom_tool_call(
                    "apply_patch",
                    "*** Begin Patch\n*** Add File: done.txt\n+done\n*** End Patch",
                    call_id="p",
                )
                if i == 0
                else reply_message("all done")
            )
        )
    )
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("slow", "add done.txt")])
    marker = f"sleep 30.{uuid.uuid4().int % 10**9:09d}"
    # The check forks a child: the whole process group must go, not only bash.
    tasks.write_text(
        tasks.read_text().replace("{id: slow,", f"{{id: slow, check: '{marker} & wait',")
    )
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not _alive(marker):
        assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
        time.sleep(0.05)
    t0 = time.monotonic()
    proc.send_signal(getattr(signal, signame))
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.monotonic() - t0 < 5, err
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    run = json.loads((out / "report.json").read_text())["runs"][0]
    # A check that did not finish neither passes nor fails the run: `--resume` redoes it.
    assert run["status"] == "interrupted"
    assert run["check"] is None
    assert git(repo, "show", f"{run['result']['branch']}:done.txt") == "done\n"
    assert "check.completed" not in (out / "threads" / "slow.jsonl").read_text()
    assert _alive(marker) == ""


def test_report_html_is_written_at_checkpoints_while_runs_go_on(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    from tests.support.loopback import last_user_text, reply_function_call

    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                reply_message("quick answer")
                if "quick" in json.dumps(req.input)
                else reply_function_call(
                    "shell",
                    {"command": ["bash", "-c", "sleep 60"], "timeout_ms": 120_000},
                    call_id=f"c{i}",
                )
                if last_user_text(req)
                else reply_message("x")
            )
        )
    )
    tasks = tasks_file(tmp_path, srv.base_url, repo, [("quick", "quick"), ("long", "long")])
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
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page = out / "report.html"
        deadline = time.monotonic() + 60
        while not page.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        assert proc.poll() is None  # written before the batch ended
        html = page.read_text()
        assert "Written while the batch runs: 1 runs" in html and "quick answer" in html
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_a_closed_stderr_does_not_stop_the_batch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`runner run ... 2>&1 1>out | head -1`: the reader of stderr goes away; progress
    lines then fail with EPIPE, and that must cost nothing: every run, every report, the
    exit code of the runs."""
    import os

    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = tasks_file(tmp_path, srv.base_url, repo, [(f"t{i}", f"say {i}") for i in range(3)])
    out = tmp_path / "o"
    read, write = os.pipe()
    os.close(read)  # nobody will ever read stderr
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=write,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert [t["status"] for t in report["runs"]] == ["completed"] * 3
    assert report["pending"] == 0
    assert (out / "summary.md").is_file() and (out / "junit.xml").is_file()
    assert proc.stdout.count("done") == 3


def _holds_four(out: Path) -> bool:
    """Every report a checkpoint writes has the four quick runs (report.json first)."""
    try:
        runs = json.loads((out / "report.json").read_text())["runs"]
        junit = (out / "junit.xml").read_text()
        summary = (out / "summary.md").read_text()
    except FileNotFoundError:
        return False
    return len(runs) == 4 and 'tests="4"' in junit and "1 more runs not finished" in summary


def test_checkpoints_keep_up_with_finished_runs_and_say_partial(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Four quick runs finish within a second of each other while a fifth goes on; after
    the checkpoint interval the reports hold all four, so kill -9 then loses none, and
    junit.xml says it is partial."""
    import xmlschema

    from runner.batch import CHECKPOINT_S
    from tests.support.loopback import last_user_text, reply_function_call

    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                reply_message("quick answer")
                if "quick" in json.dumps(req.input)
                else reply_function_call(
                    "shell",
                    {"command": ["bash", "-c", "sleep 60"], "timeout_ms": 120_000},
                    call_id=f"c{i}",
                )
                if last_user_text(req)
                else reply_message("x")
            )
        )
    )
    tasks = tasks_file(
        tmp_path, srv.base_url, repo, [*((f"q{i}", "quick") for i in range(4)), ("long", "long")]
    )
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
            "5",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while sum('"finished"' in p.read_text() for p in (out / "journal/runs").glob("*.json")) < 4:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        # Within the interval and the write itself: report.json, then junit.xml and
        # summary.md, each hold the four (polled, so the test ends when they do).
        deadline = time.monotonic() + CHECKPOINT_S + 2
        while not _holds_four(out):
            assert time.monotonic() < deadline, "no checkpoint with the four runs in time"
            time.sleep(0.05)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait(timeout=30)
    report = json.loads((out / "report.json").read_text())
    assert sorted(t["id"] for t in report["runs"]) == ["q0", "q1", "q2", "q3"]
    assert report["pending"] == 1
    junit = (out / "junit.xml").read_text()
    assert "<testsuites name=" in junit and 'tests="4"' in junit
    assert '<property name="partial" value="true" />' in junit
    assert '<property name="pending" value="1" />' in junit
    xsd = paths.GOLDEN / "reports" / "junit.xsd"
    xmlschema.XMLSchema(str(xsd)).validate(str(out / "junit.xml"))
    assert "4 more runs" not in (out / "summary.md").read_text()
    assert "1 more runs not finished yet" in (out / "summary.md").read_text()
