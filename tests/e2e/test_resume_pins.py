"""`--resume` runs the rest of a batch on what the batch started with: the base commit,
the day and the zone recorded in its journal, not a commit made since or the `$TZ` of the
resuming shell; a changed `--date` is refused naming the date. The hints that tell how to
finish or retry a batch repeat its selection, so copying them works."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, reply_http_error, reply_message


def flaky_tasks(tmp_path: Path, base_url: str) -> Path:
    make_git_repo(tmp_path)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY, request_max_retries: 0}}\n"
        "defaults: {model: fake/test-model}\n"
        "tasks:\n"
        "  - {id: steady, prompt: say steady, repo: .}\n"
        "  - {id: flaky, prompt: say flaky, repo: .}\n"
    )
    return tasks


def outage_server(loopback_thread: ThreadFactory) -> tuple[Any, dict[str, bool]]:
    outage = {"on": True}

    def script(req: Any, i: int) -> Reply:
        if outage["on"] and "flaky" in json.dumps(req.input):
            return reply_http_error(503)
        return reply_message("done")

    return loopback_thread(script), outage


def test_resume_keeps_the_batchs_commit_day_and_zone(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv, outage = outage_server(loopback_thread)
    tasks = flaky_tasks(tmp_path, srv.base_url)
    out = tmp_path / "out"
    # 26 hours apart: the two zones never share a date.
    first = run_cli("run", tasks, "--out", out, env={"TZ": "Etc/GMT+12"})
    assert first.returncode == 3, first.stderr
    (tmp_path / "later.txt").write_text("a commit made after the batch began\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "later.txt"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-qm", "later"], cwd=tmp_path, check=True)
    outage["on"] = False
    again = run_cli(
        "run", tasks, "--out", out, "--resume", "--retry-errored", env={"TZ": "Etc/GMT-14"}
    )
    assert again.returncode == 0, again.stderr
    runs = {r["id"]: r for r in json.loads((out / "report.json").read_text())["runs"]}
    assert runs["flaky"]["status"] == "completed"
    for key in ("current_date", "timezone"):
        assert runs["flaky"][key] == runs["steady"][key], key
    assert runs["flaky"]["timezone"] == "Etc/GMT+12"
    assert runs["flaky"]["workspace"]["base"] == runs["steady"]["workspace"]["base"]
    assert "zone Etc/GMT+12 (here now: Etc/GMT-14)" in again.stderr
    assert runs["steady"]["workspace"]["base"][:12] in again.stderr


def test_a_changed_date_is_named(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv, _ = outage_server(loopback_thread)
    tasks = flaky_tasks(tmp_path, srv.base_url)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out, "--date", "2024-01-01").returncode == 3
    res = run_cli("run", tasks, "--out", out, "--resume", "--date", "2024-01-02")
    assert res.returncode == 2, res.stderr
    assert "2024-01-01" in res.stderr and "--date 2024-01-01" in res.stderr
    assert "--only, --tag" not in res.stderr


def test_hints_repeat_the_selection(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv, outage = outage_server(loopback_thread)
    tasks = flaky_tasks(tmp_path, srv.base_url)
    out = tmp_path / "out dir"
    first = run_cli("run", tasks, "--out", out, "--only", "flaky", "--date", "2024-01-01")
    assert first.returncode == 3, first.stderr
    hint = next(line for line in first.stderr.splitlines() if "--retry-errored" in line)
    command = hint.split("run them again with: ", 1)[1].split(" (", 1)[0]
    words = shlex.split(command)
    assert words[:2] == ["runner", "run"] and "--only" in words and "--date" in words
    outage["on"] = False
    again = run_cli(*words[1:])
    assert again.returncode == 0, again.stderr
    report = json.loads((out / "report.json").read_text())
    assert [(r["id"], r["status"]) for r in report["runs"]] == [("flaky", "completed")]
