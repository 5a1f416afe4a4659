"""The quickstart on the real embedded model (slow): the `make demo` promise, as a test."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import paths
from tests.support.cli import run_cli
from tests.support.fixtures import make_git_repo

ROOT = paths.ROOT

pytestmark = pytest.mark.slow


def _sample_repo(root: Path) -> Path:
    sample = ROOT / "examples" / "sample-repo"
    return make_git_repo(
        root / "build" / "sample-repo",
        {p.name: p.read_text() for p in sample.iterdir() if p.is_file()},
    )


def _check_demo_run(task: dict[str, Any], out: Path, repo: Path) -> None:
    """What `make demo` promises for one run: a shell call, its output fed back, a final
    answer, a real cache hit on the second request, the change as a branch and a patch."""
    assert task["status"] == "completed", (task["run"], task["error"], task.get("truncated_output"))
    requests = task["requests"]
    assert requests[0]["output_types"] == ["function_call"], task["run"]
    assert requests[-1]["output_types"] == ["message"] and task["final_message"]
    assert requests[1]["usage"]["cached_tokens"] > 0  # from the engine's KV cache
    events = [json.loads(line) for line in (out / task["events_file"]).read_text().splitlines()]
    done = [
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    ]
    assert done and done[0]["exit_code"] == 0, (task["run"], done)
    result = task["result"]
    assert result["files"] == ["hello.txt"] and result["files_changed"] == 1
    assert (out / result["patch"]).is_file()
    shown = subprocess.run(
        ["git", "ls-tree", "--name-only", result["branch"]],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert "hello.txt" in shown
    assert (
        subprocess.run(
            ["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True
        ).stdout
        == ""
    )


LOCATIONS = ["t", "a/b/c/d/e", "work dir", "x" * 60, "run-2026"]
"""Temporary directories the workspaces live under (their path is in the prompt)."""


@pytest.mark.parametrize("where", range(len(LOCATIONS)))
def test_quickstart_on_embedded_model(tmp_path: Path, where: int) -> None:
    """`configs/quickstart.yaml` itself, untouched, with the date pinned by `--date` and
    the workspace under five different temporary directories."""
    repo = _sample_repo(tmp_path)
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    out = tmp_path / "out"
    tmp = tmp_path / LOCATIONS[where]
    tmp.mkdir(parents=True)
    day = (dt.date(2026, 11, 23) + dt.timedelta(days=37 * where)).isoformat()
    res = run_cli(
        "run", configs / "quickstart.yaml", "--out", out, "--date", day, env={"TMPDIR": str(tmp)}
    )
    assert "Traceback" not in res.stderr
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    [task] = report["runs"]
    assert task["current_date"] == day
    _check_demo_run(task, out, repo)


WALK_START = dt.date(2026, 11, 1)
WALK_DAYS = 30


@pytest.mark.timeout(1800)  # under a minute on an idle 2-core machine; more on a busy one
def test_quickstart_on_thirty_consecutive_dates(tmp_path: Path) -> None:
    """The quickstart task on 30 consecutive pinned dates (every day of a month, each
    weekday four times or more) in one batch (one engine): the day in
    `<environment_context>` once decided whether SmolLM2 answered or rambled into its
    output cap. Every run must complete the whole loop. (It walked 60 days until the
    whole suite neared its 20-minute budget: this one test was 2 minutes of it.)

    One run at a time: the engine has one slot, and two runs at once pushed each other's
    conversation out of it, so each second request read most of its prompt again. In turn,
    a run's second request extends its first in the slot (a full cache hit): the same 30
    dates for about half the engine's work, each request meeting the same cache state on
    any machine."""
    repo = _sample_repo(tmp_path)
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    quick = yaml.safe_load((configs / "quickstart.yaml").read_text())
    [hello] = quick["tasks"]
    days = [(WALK_START + dt.timedelta(days=i)).isoformat() for i in range(WALK_DAYS)]
    quick["tasks"] = [{**hello, "id": f"hello-{d}", "current_date": d} for d in days]
    walk = configs / "walk.yaml"
    walk.write_text(yaml.safe_dump(quick, sort_keys=False))
    out = tmp_path / "out"
    res = run_cli("run", walk, "--out", out, "--concurrency", "1")
    assert "Traceback" not in res.stderr
    report = json.loads((out / "report.json").read_text())
    assert [t["current_date"] for t in report["runs"]] == days
    failed = [
        (t["run"], t["status"], t["error"]) for t in report["runs"] if t["status"] != "completed"
    ]
    assert not failed, failed
    for task in report["runs"]:
        _check_demo_run(task, out, repo)
    assert res.returncode == 0, res.stderr


def test_benchmark_config_on_embedded_model(tmp_path: Path) -> None:
    """`make benchmark`'s file, cut to one task with --only: 2 prompt variants x 2 repeats,
    the reports (report.html too), patches and no branch, and `report compare` of the two
    variants. Whether the small model passes is the benchmark's result, not this test's.
    One run at a time (`make benchmark` gives --concurrency 2): on the engine's one slot,
    two runs at once only push each other's prompts out of its cache."""
    import xml.etree.ElementTree as ET

    _sample_repo(tmp_path)
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    out = tmp_path / "out"
    res = run_cli(
        "run", configs / "benchmark.yaml", "--only", "touch", "--out", out, "--concurrency", "1"
    )
    assert res.returncode in (0, 1), res.stderr
    report = json.loads((out / "report.json").read_text())
    runs = sorted(t["run"] for t in report["runs"])
    assert runs == ["touch.plain.r1", "touch.plain.r2", "touch.steps.r1", "touch.steps.r2"]
    assert all(
        t["status"] in ("completed", "check_failed", "failed", "max_requests")
        for t in report["runs"]
    ), [t["error"] for t in report["runs"]]
    assert all(t["cost_usd"] == 0.0 for t in report["runs"])
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["local/smollm2"]
    summary = (out / "summary.md").read_text()
    assert "## By variant" in summary and "pass@n" in summary
    assert "<svg" in (out / "report.html").read_text()
    repo = tmp_path / "build" / "sample-repo"
    branches = subprocess.run(
        ["git", "branch", "--list", "runner/*"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert branches == ""  # git.keep: patch
    cmp = run_cli(
        "report", "compare", out, out, "--base-variant", "plain", "--new-variant", "steps"
    )
    assert cmp.returncode == 0, cmp.stderr
    assert "| local/smollm2 | " in cmp.stdout and "Fisher's exact test" in cmp.stdout
