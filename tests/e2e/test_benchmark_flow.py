"""The benchmark workflow end to end, every number checked against a hand count: a batch is
interrupted, resumed, then sharded 3 ways and merged with one shard missing (refused, then
`--partial`) and complete; summary.md, report.json, junit.xml and report.html must all say
the same, and say it right. Also: patches-only runs, and cleaning a batch's branches."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from tests.support import paths
from tests.support.cli import run_cli, shell, write_tasks
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import Reply, last_user_text, per_conversation, reply_message

# 3 tasks x 2 models x 2 repeats, in task-file order. `pass` passes its check, `fail` never
# does, `hang` passes once the server stops hanging on it.
MATRIX = "matrix: {model: [fake/m1, fake/m2], repeat: 2}\n"
TASKS = (
    "  - {id: pass, prompt: pass it, repo: ., check: 'true'}\n"
    "  - {id: fail, prompt: fail it, repo: ., check: 'false'}\n"
    "  - {id: hang, prompt: HANG here, repo: ., check: 'true'}\n"
)
RUNS = [
    f"{t}.fake-{m}.r{r}" for t in ("pass", "fail", "hang") for m in ("m1", "m2") for r in (1, 2)
]


def report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data


def junit_counts(out: Path) -> dict[str, tuple[int, int, int, int]]:
    root = ET.parse(out / "junit.xml").getroot()
    return {
        s.attrib["name"]: (
            int(s.attrib["tests"]),
            int(s.attrib["failures"]),
            int(s.attrib["errors"]),
            int(s.attrib["skipped"]),
        )
        for s in root.findall("testsuite")
    }


def by_model_rows(summary: str) -> dict[str, list[str]]:
    section = summary.split("## By model\n\n", 1)[1].split("\n\n", 1)[0]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in section.splitlines()[2:]]
    return {r[0]: r[1:5] for r in rows}


def check_all(
    out: Path,
    *,
    runs: int,
    finished: int,
    passed: int,
    skipped: int,
    errored: int,
    per_model: dict[str, tuple[int, int, int, int]],
    why: str = "",
) -> None:
    """per_model: model -> (finished, passed, skipped, errored), counted by hand."""
    r = report(out)
    t = r["totals"]
    rate = round(passed / finished, 4) if finished else None
    assert (
        t["runs"],
        t["finished"],
        t["completed"],
        t["skipped"],
        t["errored"],
        t["pass_rate"],
    ) == (runs, finished, passed, skipped, errored, rate)
    assert t["not_completed"] == runs - passed
    first = f"{passed} of {finished} finished runs passed ({passed / finished:.1%})"
    rest = f" - {runs} runs: {finished} finished, {skipped} skipped{why}, {errored} errored"
    head = first + rest
    summary = (out / "summary.md").read_text()
    assert f"**{first}**{rest}" in summary
    rows = by_model_rows(summary)
    for model, (f, p, s, e) in per_model.items():
        assert rows[model][:3] == [str(f), str(s), str(e)]
        assert rows[model][3].startswith(f"{p}/{f} {p / f:.0%} (")
    # JUnit: a suite per model; failed checks are failures, a stopped run an error, runs
    # that never started skipped.
    assert junit_counts(out) == {
        model: (f + s + e, f - p, e, s) for model, (f, p, s, e) in per_model.items()
    }
    page = (out / "report.html").read_text()
    assert head in page
    for model, (f, p, s, e) in per_model.items():
        extra = f" (+{s} skipped, {e} errored)" if s or e else ""
        assert f">{p}/{f}{extra}</text>" in page, model
    assert page.count('"events":"threads/') == runs  # each run in the viewer's data


def test_interrupt_resume_shard_and_merge_by_hand_count(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    hanging = [True]

    async def script(req: Any, i: int) -> Reply:
        if hanging[0] and "HANG" in last_user_text(req):
            await asyncio.sleep(120)
        return shell("echo done > note.txt", f"c{i}") if i == 0 else reply_message("Done.")

    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(tmp_path, srv.base_url, TASKS, defaults="  git: {keep: patch}\n" + MATRIX)
    assert run_cli("validate", tasks).stdout.splitlines()[:-1] == [
        f"{name}: fake/{name.split('.')[1][5:]}, 1 turn(s), repo {tmp_path}" for name in RUNS
    ]

    # 1. Interrupted once the first `hang` run is under way: 8 runs finished, one stopped,
    # three never started.
    out = tmp_path / "out"
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
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**__import__("os").environ, "FAKE_API_KEY": "sk-x-0123456789"},
    )
    events = out / "threads" / "hang.fake-m1.r1.jsonl"
    deadline = time.monotonic() + 60
    while not (events.exists() and "turn.started" in events.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith(
        "runner: 3 run(s) never started, 1 stopped; finish the batch "
        f"with: runner run {tasks} --out {out} --resume"
    )
    assert any(
        line.startswith("runner: 9/12 runs done, 0 running, 4 failed, 1 errored, 3 not started")
        for line in lines
    )
    r = report(out)
    assert [t["run"] for t in r["runs"]] == RUNS
    assert [t["index"] for t in r["runs"]] == list(range(12))
    assert [t["status"] for t in r["runs"]] == (
        ["completed"] * 4 + ["check_failed"] * 4 + ["interrupted"] + ["skipped"] * 3
    )
    assert [t["skip_reason"] for t in r["runs"][9:]] == ["interrupted"] * 3
    check_all(
        out,
        runs=12,
        finished=8,
        passed=4,
        skipped=3,
        errored=1,
        per_model={"fake/m1": (4, 2, 1, 1), "fake/m2": (4, 2, 2, 0)},
        why=" (interrupted 3)",
    )
    assert "[2/4 50%]" not in (out / "summary.md").read_text()
    # Skipped runs cost nothing and count in no median: each finished run made 2 requests.
    assert [len(t["requests"]) for t in r["runs"][:8]] == [2] * 8
    assert all(t["usage"]["total_tokens"] == 0 for t in r["runs"][9:])

    # 2. Resumed: the 8 finished runs are kept, the 4 others run now.
    hanging[0] = False
    res = run_cli("run", tasks, "--out", out, "--resume", "--concurrency", "2", timeout=120)
    assert res.returncode == 1, res.stderr
    assert "resuming batch" in res.stderr and "keeping 8 of 12 runs (8 finished" in res.stderr
    assert "--resume" not in res.stderr.splitlines()[-1]
    full = report(out)
    assert [t["run"] for t in full["runs"]] == RUNS
    check_all(
        out,
        runs=12,
        finished=12,
        passed=8,
        skipped=0,
        errored=0,
        per_model={"fake/m1": (6, 4, 0, 0), "fake/m2": (6, 4, 0, 0)},
    )
    # Patches only: every run left its patch and no branch.
    assert sorted(p.name for p in (out / "patches").iterdir()) == sorted(f"{n}.patch" for n in RUNS)
    assert all(t["result"]["branch"] is None for t in full["runs"])
    assert git(tmp_path, "branch", "--list", "runner/*") == ""

    # 3. Sharded 3 ways (4 runs each); shard 2 missing, then complete.
    shards = []
    for k in (1, 2, 3):
        d = tmp_path / f"shard{k}"
        res = run_cli("run", tasks, "--out", d, "--shard", f"{k}/3", timeout=120)
        # Which runs a shard gets follows their fingerprints: exit 1 iff one of its own
        # runs failed its check.
        failed = any(t["status"] != "completed" for t in report(d)["runs"])
        assert res.returncode == (1 if failed else 0), res.stderr
        b = report(d)["batch"]
        assert (b["shard"], b["shards"], b["runs"]) == (k, 3, 12)
        assert b["run_set"] == full["batch"]["run_set"]
        assert len(report(d)["runs"]) == 4
        shards.append(d)
    refused = run_cli("report", "merge", shards[0], shards[2], "--out", tmp_path / "m")
    assert refused.returncode == 2 and "shard(s) 2 of 3 missing" in refused.stderr
    assert not (tmp_path / "m").exists()
    part = run_cli("report", "merge", shards[0], shards[2], "--out", tmp_path / "p", "--partial")
    assert part.returncode == 1 and "PARTIAL merge: shard(s) 2 of 3 missing" in part.stderr
    p = report(tmp_path / "p")
    assert p["partial"] is True and p["missing_shards"] == [2]
    kept = set(t["run"] for d in (shards[0], shards[2]) for t in report(d)["runs"])
    assert [t["run"] for t in p["runs"]] == [n for n in RUNS if n in kept]
    passed_kept = sum(n.startswith(("pass", "hang")) for n in kept)
    assert p["totals"]["runs"] == 8 and p["totals"]["completed"] == passed_kept
    assert "**PARTIAL: shard(s) 2 of 3 missing" in (tmp_path / "p" / "summary.md").read_text()
    assert 'name="partial" value="true"' in (tmp_path / "p" / "junit.xml").read_text()
    assert 'class="partial">PARTIAL' in (tmp_path / "p" / "report.html").read_text()

    merged_dir = tmp_path / "merged"
    done = run_cli("report", "merge", shards[2], shards[0], shards[1], "--out", merged_dir)
    assert done.returncode == 1, done.stderr
    assert (
        "merged 3 shard(s): 12 run(s): 12 finished (8 passed), 0 skipped, 0 errored" in done.stderr
    )
    merged = report(merged_dir)
    assert merged["partial"] is False
    assert [(t["run"], t["status"], t["index"], len(t["requests"])) for t in merged["runs"]] == [
        (t["run"], t["status"], t["index"], len(t["requests"])) for t in full["runs"]
    ]
    assert merged["batch"] == full["batch"]
    # The same results; only the full batch's history differs: its stopped run was done
    # again on --resume, which its totals keep apart as `redone` (the shards never were).
    assert full["totals"]["redone"]["attempts"] == 1
    assert merged["totals"]["redone"] is None
    # Its totals keep the redone attempt's resends and waits too (a wait of a millisecond
    # when the machine is slow): take them out to compare with the shards'.
    redone = full["totals"]["redone"]
    without = {
        **full["totals"],
        "redone": None,
        "retries": full["totals"]["retries"] - redone["retries"],
        "retry_wait_s": round(full["totals"]["retry_wait_s"] - redone["retry_wait_s"], 3),
    }
    assert {**merged["totals"], "redone": None} == without
    check_all(
        merged_dir,
        runs=12,
        finished=12,
        passed=8,
        skipped=0,
        errored=0,
        per_model={"fake/m1": (6, 4, 0, 0), "fake/m2": (6, 4, 0, 0)},
    )
    # The same matrix, cell for cell, in the unsharded and the merged summary.
    matrix = re.compile(r"## Task x model\n\n(.*?)\n\n", re.S)
    unsharded_md = (out / "summary.md").read_text()
    m1, m2 = matrix.search(unsharded_md), matrix.search((merged_dir / "summary.md").read_text())
    assert m1 is not None and m2 is not None and m1.group(1) == m2.group(1)
    assert "| pass | 2/2 | 2/2 |" in m1.group(1) and "| fail | 0/2 | 0/2 |" in m1.group(1)


def test_branches_of_a_batch_are_listed_and_only_unmoved_ones_deleted(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo x > note.txt", f"c{i}") if i == 0 else reply_message("ok")
        )
    )
    repo = make_git_repo(tmp_path)
    git(repo, "branch", "runner/unrelated")
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: go, repo: .}\n  - {id: b, prompt: go, repo: .}\n",
    )
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    branches = {t["id"]: t["result"]["branch"] for t in report(out)["runs"]}
    # Someone builds on b's branch: it must survive the clean-up.
    git(repo, "checkout", "-q", branches["b"])
    (repo / "more.txt").write_text("mine\n")
    git(repo, "add", "more.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "on top")
    git(repo, "checkout", "-q", "-")
    listed = run_cli("report", "branches", out, "--repo", repo)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[::2] for line in listed.stdout.splitlines()] == [
        [branches["a"], "present"],
        [branches["b"], "moved"],
    ]
    deleted = run_cli("report", "branches", out, "--repo", repo, "--delete")
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.splitlines()[0].endswith(" deleted")
    assert deleted.stdout.splitlines()[1].endswith(" moved, kept")
    left = git(repo, "branch", "--list", "runner/*").split()
    assert sorted(left) == sorted([branches["b"], "runner/unrelated"])
    bad = run_cli("report", "branches", out, "--repo", tmp_path / "nope")
    assert bad.returncode == 2 and "--repo" in bad.stderr and "Traceback" not in bad.stderr


def test_shard_from_a_kubernetes_completion_index(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path, "http://127.0.0.1:9/v1", TASKS, defaults=MATRIX)
    second = run_cli("validate", tasks, "--shard", "2/3")
    auto = run_cli("validate", tasks, "--shard", "auto/3", env={"JOB_COMPLETION_INDEX": "1"})
    assert auto.returncode == 0 and auto.stdout == second.stdout
    unset = run_cli("validate", tasks, "--shard", "auto/3", env={"JOB_COMPLETION_INDEX": ""})
    assert unset.returncode == 2 and "JOB_COMPLETION_INDEX" in unset.stderr
    late = run_cli("validate", tasks, "--shard", "auto/3", env={"JOB_COMPLETION_INDEX": "3"})
    assert late.returncode == 2 and "1 <= K <= N" in late.stderr
    example = paths.ROOT / "examples" / "kubernetes" / "benchmark-indexed-job.yaml"
    import yaml

    job = yaml.safe_load(example.read_text())
    assert job["spec"]["completionMode"] == "Indexed"
    n = job["spec"]["completions"]
    assert f"--shard auto/{n}" in job["spec"]["template"]["spec"]["containers"][0]["args"][0]
