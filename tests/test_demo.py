"""The quickstart on the real embedded model (slow): the `make demo` promise, as a test."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_git_repo

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_quickstart_on_embedded_model(tmp_path: Path) -> None:
    sample = ROOT / "examples" / "sample-repo"
    repo = make_git_repo(tmp_path / "build" / "sample-repo",
                         {p.name: p.read_text() for p in sample.iterdir() if p.is_file()})
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "runner", "run", str(configs / "quickstart.yaml"),
                          "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert "Traceback" not in res.stderr
    report = json.loads((out / "report.json").read_text())
    task = report["tasks"][0]
    assert task["status"] == "completed", (task["error"], res.stderr)
    requests = task["requests"]
    assert len(requests) >= 2
    assert requests[0]["output_types"] == ["function_call"]
    assert requests[-1]["output_types"] == ["message"] and task["final_message"]
    # A real number from the engine's KV cache, not an estimate.
    assert any(r["usage"]["cached_tokens"] > 0 for r in requests[1:])
    events = [json.loads(line) for line in (out / task["events_file"]).read_text().splitlines()]
    done = [e["item"] for e in events if e["type"] == "item.completed"
            and e["item"]["type"] == "command_execution"]
    assert done and "exit_code" in done[0]
    assert subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True,
                          text=True).stdout == ""
    # The change the model made comes back as a branch and a patch, with diff stats. (The
    # quickstart is deterministic for a given day, since the date is in the prompt; a 135M
    # model may still get the command wrong some day, and then there is nothing to keep.)
    result = task["result"]
    if done[0]["exit_code"] != 0:
        assert result is None
        return
    assert result["files"] == ["hello.txt"] and result["files_changed"] == 1
    assert (out / result["patch"]).is_file()
    shown = subprocess.run(["git", "ls-tree", "--name-only", result["branch"]], cwd=repo,
                           capture_output=True, text=True, check=True).stdout.split()
    assert "hello.txt" in shown


def test_benchmark_config_on_embedded_model(tmp_path: Path) -> None:
    """`make benchmark`'s file, cut to one task with --only: 2 prompt variants x 2 repeats,
    the reports (report.html too), patches and no branch, and `report compare` of the two
    variants. Whether the small model passes is the benchmark's result, not this test's."""
    import xml.etree.ElementTree as ET

    sample = ROOT / "examples" / "sample-repo"
    make_git_repo(tmp_path / "build" / "sample-repo",
                  {p.name: p.read_text() for p in sample.iterdir() if p.is_file()})
    configs = tmp_path / "configs"
    shutil.copytree(ROOT / "configs", configs)
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "runner", "run",
                          str(configs / "benchmark.yaml"), "--only", "touch", "--out", str(out),
                          "--concurrency", "2"], capture_output=True, text=True, timeout=600)
    assert res.returncode in (0, 1), res.stderr
    report = json.loads((out / "report.json").read_text())
    runs = sorted(t["run"] for t in report["tasks"])
    assert runs == ["touch.plain.r1", "touch.plain.r2", "touch.steps.r1", "touch.steps.r2"]
    assert all(t["status"] in ("completed", "check_failed", "failed", "max_turns")
               for t in report["tasks"]), [t["error"] for t in report["tasks"]]
    assert all(t["cost_usd"] == 0.0 for t in report["tasks"])
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert sorted(s.get("name") for s in suites) == ["local/smollm2"]
    summary = (out / "summary.md").read_text()
    assert "## By variant" in summary and "pass@n" in summary
    assert "<svg" in (out / "report.html").read_text()
    repo = tmp_path / "build" / "sample-repo"
    branches = subprocess.run(["git", "branch", "--list", "runner/*"], cwd=repo,
                              capture_output=True, text=True, check=True).stdout
    assert branches == ""   # git.keep: patch
    cmp = subprocess.run([sys.executable, "-m", "runner", "report", "compare", str(out),
                          str(out), "--base-variant", "plain", "--new-variant", "steps"],
                         capture_output=True, text=True, timeout=60)
    assert cmp.returncode == 0, cmp.stderr
    assert "| local/smollm2 | " in cmp.stdout and "Fisher's exact test" in cmp.stdout
