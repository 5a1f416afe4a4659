"""A provider that never answers is noticed: after `budget.max_connect_failures` requests
in a row got no answer, its runs still to start are skipped, naming it and its URL, while
the other providers' runs go on. Real sockets: a closed port on 127.0.0.1 and a loopback
server."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import per_conversation, reply_message

DEAD = "http://127.0.0.1:9/v1"
"""The discard port: nothing listens on loopback, so every connect is refused at once."""


def _tasks(tmp_path: Path, live_url: str, n: int, budget: str = "") -> Path:
    make_git_repo(tmp_path)
    body = "".join(f"  - {{id: t{i}, prompt: task {i}, repo: .}}\n" for i in range(n))
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  dead: {{base_url: '{DEAD}', env_key: FAKE_API_KEY}}\n"
        f"  fake: {{base_url: '{live_url}', env_key: FAKE_API_KEY}}\n"
        f"{budget}"
        "matrix:\n"
        "  model: [dead/m, fake/test-model]\n"
        f"tasks:\n{body}"
    )
    return path


def _runs(out: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads((out / "report.json").read_text())["runs"]
    return runs


def test_a_dead_provider_is_skipped_and_the_others_go_on(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = _tasks(tmp_path, srv.base_url, 8)
    out = tmp_path / "out"
    began = time.monotonic()
    res = run_cli("run", tasks, "--out", out, "--concurrency", "1")
    took = time.monotonic() - began
    assert res.returncode == 3, res.stderr
    runs = _runs(out)
    live = [r for r in runs if r["model"] == "fake/test-model"]
    dead = [r for r in runs if r["model"] == "dead/m"]
    assert [r["status"] for r in live] == ["completed"] * 8
    errored = [r for r in dead if r["status"] == "error"]
    skipped = [r for r in dead if r["status"] == "skipped"]
    # The first run spends the three attempts; every later one is never started.
    assert len(errored) == 1 and len(skipped) == 7
    assert "provider 'dead' at http://127.0.0.1:9/v1 is down" in errored[0]["error"]
    # Its failed request is on record with the attempts it resent and the time it waited.
    (request,) = errored[0]["requests"]
    assert "is down" in request["error"] and request["retries"] == 2, request
    assert errored[0]["retries"] == 2 and errored[0]["retry_wait_s"] > 0
    assert request["retry_wait_s"] == errored[0]["retry_wait_s"]
    for r in skipped:
        assert r["skip_reason"] == "provider_down"
        assert "provider 'dead' at http://127.0.0.1:9/v1 is down" in r["error"]
        assert "3 requests in a row got no answer" in r["error"]
    # Not eight runs times the full retry schedule.
    assert took < 30, took


def test_a_connection_failure_names_the_provider_and_url(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = _tasks(tmp_path, srv.base_url, 1, budget="budget: {max_connect_failures: 100}\n")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 3, res.stderr
    (dead,) = [r for r in _runs(out) if r["model"] == "dead/m"]
    assert dead["status"] == "error"
    error = dead["error"]
    assert "provider 'dead'" in error and "127.0.0.1:9/v1/responses" in error, error
    assert "is down" not in error  # 5 attempts, under the limit of 100


def test_max_connect_failures_is_checked(tmp_path: Path) -> None:
    tasks = _tasks(tmp_path, DEAD, 1, budget="budget: {max_connect_failures: 0}\n")
    res = run_cli("validate", tasks)
    assert res.returncode == 2
    assert "tasks.yaml:" in res.stderr and "max_connect_failures" in res.stderr
    assert "Traceback" not in res.stderr


def test_runs_in_flight_keep_their_unanswered_requests(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Runs sending at once share the count: a run whose first attempt made the provider
    down still reports that request, its error and its waits, not `requests: []`."""
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = _tasks(tmp_path, srv.base_url, 4)
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out, "--concurrency", "8")
    assert res.returncode == 3, res.stderr
    started = [r for r in _runs(out) if r["model"] == "dead/m" and r["status"] == "error"]
    assert started, res.stderr
    for r in started:
        assert "requests in a row got no answer" in r["error"]
        assert r["requests"], r  # what it sent, though nobody answered
        assert r["requests"][-1]["error"] in r["error"]
        assert r["retries"] == sum(q["retries"] for q in r["requests"])
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["requests"] >= len(started) + 4  # the dead ones and the live ones
