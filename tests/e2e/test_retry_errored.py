"""`--resume --retry-errored` reruns a batch's errored runs and keeps the rest, and what
`--resume` says uses the report's words (finished, passed, failed, errored)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, reply_http_error, reply_message


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env={"FAKE_API_KEY": "sk-canary-retry-0123456789"})


def test_retry_errored_reruns_only_the_errored_runs(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    outage = {"status": 503}

    def script(req: Any, i: int) -> Reply:
        if "flaky" in json.dumps(req.input) and outage["status"]:
            return reply_http_error(outage["status"])
        return reply_message("done")

    srv = loopback_thread(script)
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY, "
        "request_max_retries: 0}\n"
        "defaults: {model: fake/test-model}\n"
        "tasks:\n"
        "  - {id: steady, prompt: say steady, repo: .}\n"
        "  - {id: flaky, prompt: say flaky, repo: .}\n"
    )
    out = tmp_path / "out"
    first = run("run", tasks, "--out", out, "--concurrency", "1")
    assert first.returncode == 3, first.stderr
    report = json.loads((out / "report.json").read_text())
    assert {r["id"]: r["status"] for r in report["runs"]} == {
        "steady": "completed",
        "flaky": "error",
    }
    assert "--resume --retry-errored" in first.stderr
    asked = len(srv.requests)

    # Plain --resume keeps the errored run and says so in the report's words.
    kept = run("run", tasks, "--out", out, "--resume")
    assert kept.returncode == 3, kept.stderr
    assert "keeping 2 of 2 runs (1 finished: 1 passed, 0 failed; 1 errored)" in kept.stderr
    assert "running 0" in kept.stderr and "--retry-errored" in kept.stderr
    assert "already finished" not in kept.stderr
    assert len(srv.requests) == asked

    # --retry-errored without --resume would start a new batch: refused.
    alone = run("run", tasks, "--out", out, "--retry-errored")
    assert alone.returncode == 2 and "--resume" in alone.stderr
    assert "Traceback" not in alone.stderr

    outage["status"] = 0
    again = run("run", tasks, "--out", out, "--resume", "--retry-errored")
    assert again.returncode == 0, again.stderr
    assert "keeping 1 of 2 runs (1 finished: 1 passed, 0 failed; 0 errored), running 1" in (
        again.stderr
    )
    new = [r for r in srv.requests[asked:] if r.index >= 0]
    assert len(new) == 1 and "flaky" in json.dumps(new[0].input)
    final = json.loads((out / "report.json").read_text())
    assert final["batch_id"] == report["batch_id"]
    assert {r["id"]: r["status"] for r in final["runs"]} == {
        "steady": "completed",
        "flaky": "completed",
    }
    assert final["totals"]["errored"] == 0 and final["totals"]["completed"] == 2


def test_rate_limited_and_quota_runs_are_retried(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    outage = {"on": True}

    def script(req: Any, i: int) -> Reply:
        text = json.dumps(req.input)
        if outage["on"] and "limited" in text:
            return reply_http_error(429, headers={"retry-after": "0"})
        if outage["on"] and "broke" in text:
            body = {"error": {"message": "no quota", "type": "insufficient_quota"}}
            return reply_http_error(429, body)
        return reply_message("done")

    srv = loopback_thread(script)
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY, "
        "request_max_retries: 0}\n"
        "defaults: {model: fake/test-model}\n"
        "tasks:\n"
        "  - {id: limited, prompt: say limited, repo: .}\n"
        "  - {id: broke, prompt: say broke, repo: .}\n"
    )
    out = tmp_path / "out"
    first = run("run", tasks, "--out", out)
    statuses = {r["id"]: r["status"] for r in json.loads((out / "report.json").read_text())["runs"]}
    assert statuses == {"limited": "rate_limited", "broke": "quota_exhausted"}, first.stderr
    outage["on"] = False
    again = run("run", tasks, "--out", out, "--resume", "--retry-errored")
    assert again.returncode == 0, again.stderr
    final = json.loads((out / "report.json").read_text())
    assert [r["status"] for r in final["runs"]] == ["completed", "completed"]
