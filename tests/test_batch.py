"""Batches: matrix with variants, tags, shards, limits, per-provider connections, resume."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli, shell, write_tasks
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import (
    Reply,
    last_user_text,
    message_item,
    per_conversation,
    reply_incomplete,
    reply_message,
    reply_sse_bytes,
)


def _runs(out: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads((out / "report.json").read_text())["runs"]
    return runs


def test_matrix_variants_and_tags_expand_and_select(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path,
        "http://127.0.0.1:9/v1",
        (
            "  - {id: a, prompt: fix it, repo: ., tags: [nightly, bugs]}\n"
            "  - {id: b, prompt: explain, repo: .}\n"
        ),
        defaults=(
            "matrix:\n"
            "  model: [fake/m1, fake/m2]\n"
            "  variant:\n"
            "    - {name: terse, prompt_template: 'Be brief. {prompt}', reasoning_effort: low}\n"
            "    - {name: plain}\n"
            "  repeat: 2\n"
        ),
    )
    res = run_cli("validate", tasks)
    assert res.returncode == 0, res.stderr
    names = [line.split(":")[0] for line in res.stdout.splitlines()[:-1]]
    assert len(names) == 2 * 2 * 2 * 2 and len(set(names)) == 16
    assert "a.fake-m1.terse.r1" in names and "b.fake-m2.plain.r2" in names
    assert res.stdout.splitlines()[-1].endswith("2 task(s), 16 run(s)")
    tagged = run_cli("validate", tasks, "--tag", "nightly")
    assert tagged.stdout.splitlines()[-1].endswith("1 task(s), 8 run(s)")
    bad = run_cli("validate", tasks, "--tag", "weekly")
    assert bad.returncode == 2
    assert "--tag: no task has tag weekly; tags in" in bad.stderr and "bugs, nightly" in bad.stderr


def _validate_names(*args: str | Path) -> list[str]:
    res = run_cli("validate", *args)
    assert res.returncode == 0, res.stderr
    return [line.split(":")[0] for line in res.stdout.splitlines()[:-1]]


def test_shards_are_disjoint_balanced_and_independent_of_the_machine(tmp_path: Path) -> None:
    body = "".join(f"  - {{id: t{i}, prompt: task {i}, repo: .}}\n" for i in range(7))
    matrix = "matrix:\n  model: [fake/m1, fake/m2]\n  repeat: 3\n"
    # The same task file in two places (two "machines"): same slices.
    first = write_tasks(tmp_path / "one", "http://127.0.0.1:9/v1", body, defaults=matrix)
    second = write_tasks(tmp_path / "two", "http://127.0.0.1:9/v1", body, defaults=matrix)
    everything = set(_validate_names(first))
    assert len(everything) == 42
    slices = [_validate_names(first, "--shard", f"{k}/4") for k in range(1, 5)]
    assert [len(s) for s in slices] in ([11, 11, 10, 10],)
    assert set().union(*map(set, slices)) == everything
    assert sum(map(len, slices)) == len(everything)
    assert _validate_names(second, "--shard", "3/4") == slices[2]
    bad = run_cli("validate", first, "--shard", "5/4")
    assert bad.returncode == 2 and "--shard: got '5/4'; must be K/N" in bad.stderr


def looping(req: Any, i: int) -> Reply:
    """A model that never stops calling the shell tool."""
    return shell(f"echo {i} >> log.txt", f"c{i}")


def test_limits_stop_runs_with_their_own_status(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(looping))
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        (
            "  - {id: calls, prompt: go, repo: ., limits: {max_tool_calls: 3}}\n"
            "  - {id: inp, prompt: go, repo: ., limits: {max_input_tokens: 2000}}\n"
            "  - {id: cost, prompt: go, repo: ., limits: {max_cost_usd: 0.01}}\n"
            "  - {id: turns, prompt: go, repo: ., limits: {max_requests: 2}}\n"
        ),
        defaults=(
            "models:\n  fake/test-model: {price: {input: 2.0, cached_input: 0.5, output: 8.0}}\n"
        ),
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 1, res.stderr
    by_id = {t["id"]: t for t in _runs(out)}
    assert by_id["calls"]["status"] == "max_tool_calls"
    assert by_id["calls"]["tool_calls"] == 3
    assert "max_tool_calls" in by_id["calls"]["error"]
    assert by_id["inp"]["status"] == "budget"
    inp = by_id["inp"]["usage"]["input_tokens"]
    # Stopped at the first check after crossing the limit, never before.
    before_last = inp - by_id["inp"]["requests"][-1]["usage"]["input_tokens"]
    assert before_last < 2000 <= inp
    assert by_id["cost"]["status"] == "budget" and "limits.max_cost_usd" in by_id["cost"]["error"]
    assert by_id["cost"]["cost_usd"] >= 0.01
    assert by_id["turns"]["status"] == "max_requests" and len(by_id["turns"]["requests"]) == 2
    for t in by_id.values():
        u = t["usage"]
        expected = (
            u["uncached_tokens"] * 2.0 + u["cached_tokens"] * 0.5 + u["output_tokens"] * 8.0
        ) / 1e6
        assert t["cost_usd"] == pytest.approx(expected, abs=1e-6)
        # The work done before the limit is kept on the run's branch.
        assert t["result"]["branch"], t
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["cost_usd"] == pytest.approx(
        sum(t["cost_usd"] for t in by_id.values()), abs=1e-5
    )


def test_unknown_price_is_null_and_a_cost_limit_needs_one(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("ok")))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert report["runs"][0]["cost_usd"] is None and report["totals"]["cost_usd"] is None
    capped = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: go, repo: .}\n",
        defaults="budget: {max_cost_usd: 1.5}\n",
    )
    res = run_cli("run", capped, "--out", tmp_path / "out2")
    assert res.returncode == 2
    assert "budget.max_cost_usd: fake/test-model has no known price" in res.stderr
    assert "Traceback" not in res.stderr


def test_batch_budget_skips_runs_not_started(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(lambda req, i: shell("echo hi", "c0") if i == 0 else reply_message("done"))
    )
    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(5))
    tasks = write_tasks(tmp_path, srv.base_url, body, defaults="budget: {max_input_tokens: 1}\n")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out, "--concurrency", "1")
    assert res.returncode == 1
    statuses = [t["status"] for t in _runs(out)]
    # The first run's second request is refused; nothing else starts.
    assert statuses == ["budget"] + ["skipped"] * 4
    assert [t["skip_reason"] for t in _runs(out)] == [None] + ["budget"] * 4
    assert [len(t["requests"]) for t in _runs(out)] == [1, 0, 0, 0, 0]
    assert "not started: the batch used" in _runs(out)[1]["error"]


def test_max_connections_caps_requests_in_flight(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    in_flight = [0]
    peak = [0]

    async def slow(req: Any, i: int) -> Reply:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.15)
        in_flight[0] -= 1
        return reply_message("done")

    srv = loopback_thread(per_conversation(slow))
    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(6))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    text = tasks.read_text().replace(
        "env_key: FAKE_API_KEY}", "env_key: FAKE_API_KEY, max_connections: 2}"
    )
    tasks.write_text(text)
    assert run_cli("run", tasks, "--out", tmp_path / "o", "--concurrency", "6").returncode == 0
    assert peak[0] == 2
    tasks.write_text(text.replace("max_connections: 2", "max_connections: 6"))
    peak[0] = 0
    assert run_cli("run", tasks, "--out", tmp_path / "o2", "--concurrency", "6").returncode == 0
    assert peak[0] > 2


def test_resume_skips_finished_runs(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                shell(f"echo {last_user_text(req)} > out.txt", "c0")
                if i == 0
                else reply_message("done")
            )
        )
    )
    body = "".join(f"  - {{id: t{i}, prompt: run{i}, repo: .}}\n" for i in range(3))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    first = json.loads((out / "report.json").read_text())
    sent = len(srv.requests)
    res = run_cli("run", tasks, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    assert len(srv.requests) == sent  # nothing was run again
    again = json.loads((out / "report.json").read_text())
    assert again["batch_id"] == first["batch_id"]
    assert again["runs"] == first["runs"]
    # Without --resume, --force makes the same out dir start a new batch.
    assert run_cli("run", tasks, "--out", out, "--force").returncode == 0
    assert len(srv.requests) == sent * 2
    assert json.loads((out / "report.json").read_text())["batch_id"] != first["batch_id"]


def _start(tasks: Path, out: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "FAKE_API_KEY": "sk-canary-0123456789abcdef"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runner",
            "run",
            str(tasks),
            "--out",
            str(out),
            "--concurrency",
            "4",
            *extra,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def _journal(out: Path) -> dict[str, str]:
    """State of every run record the journal holds (`started` or `finished`)."""
    states = {}
    for f in (out / "journal" / "runs").glob("*.json"):
        try:
            states[f.stem] = json.loads(f.read_text())["state"]
        except (OSError, ValueError):
            continue  # being replaced right now: os.replace makes that atomic
    return states


def _wait_for(cond: Any, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, "the runner exited before the kill point"
        assert time.monotonic() < end, "kill point never reached"
        time.sleep(0.005)


def test_kill_9_at_ten_points_then_resume_gives_one_result_per_run(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    async def script(req: Any, i: int) -> Reply:
        await asyncio.sleep(0.05)
        if i < 2:
            return shell(f"echo {last_user_text(req)} step {i} >> work.txt", f"c{i}")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    body = "".join(f"  - {{id: t{i:02d}, prompt: run{i}, repo: '{repo}'}}\n" for i in range(20))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    out = tmp_path / "out"
    rng = random.Random(20261122)
    # Kill points are moments of the batch, not wall times (a busy machine would make
    # every kill land before the first run): before any run starts, while runs are in
    # flight, just after a run's result is kept.
    points = ["start", "running", "finished"] * 3 + ["running"]
    in_flight_at_kill = []
    for point in points:
        before = _journal(out)
        done_before = sum(v == "finished" for v in before.values())
        proc = _start(tasks, out, "--resume")
        if point == "start":
            _wait_for(lambda: (out / "journal" / "batch.json").exists(), proc)
        elif point == "running":
            _wait_for(
                lambda old=before: any(
                    v == "started" for k, v in _journal(out).items() if old.get(k) != "started"
                ),
                proc,
            )
            time.sleep(rng.uniform(0, 0.15))
        else:
            _wait_for(
                lambda n=done_before: sum(v == "finished" for v in _journal(out).values()) > n, proc
            )
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        in_flight_at_kill.append(sum(v == "started" for v in _journal(out).values()))
        # Whatever the kill left behind is readable or absent, never half a file.
        for f in (out / "journal").rglob("*.json"):
            json.loads(f.read_text())
        for f in (out / "threads").glob("*.jsonl"):
            for line in f.read_text().splitlines():
                json.loads(line)
        if (out / "report.json").exists():
            partial = json.loads((out / "report.json").read_text())
            assert partial["pending"] + len(partial["runs"]) == 20
            ET.parse(out / "junit.xml")
            assert (out / "summary.md").read_text().startswith("# Run ")
    assert sum(n > 0 for n in in_flight_at_kill) >= 4, in_flight_at_kill
    final = _start(tasks, out, "--resume")
    assert final.wait(timeout=120) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["pending"] == 0
    runs = report["runs"]
    assert sorted(t["run"] for t in runs) == [f"t{i:02d}" for i in range(20)]
    assert all(t["status"] == "completed" for t in runs)
    branches = git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/runner/").split()
    assert sorted(branches) == sorted(t["result"]["branch"] for t in runs)
    assert all(b.startswith(f"runner/{report['batch_id']}/") for b in branches)
    for t in runs:
        prompt = f"run{int(t['id'][1:])}"
        shown = git(repo, "show", f"{t['result']['branch']}:work.txt")
        assert shown == f"{prompt} step 0\n{prompt} step 1\n"
        assert (out / t["result"]["patch"]).is_file()


def _comparable(run: dict[str, Any]) -> dict[str, Any]:
    """A run's report entry without what differs between two executions of it (times,
    ids made up by the server, and the batch id inside branch names and commits)."""
    res = run["result"] or {}
    return {
        "id": run["id"],
        "run": run["run"],
        "model": run["model"],
        "variant": run["variant"],
        "repeat": run["repeat"],
        "status": run["status"],
        "fingerprint": run["fingerprint"],
        "final": run["final_message"],
        "usage": run["usage"],
        "cost": run["cost_usd"],
        "tool_calls": run["tool_calls"],
        "requests": len(run["requests"]),
        "files": res.get("files"),
        "patch": res.get("patch"),
        "events": run["events_file"],
    }


def test_merged_shards_equal_one_unsharded_batch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                shell(f"echo {last_user_text(req)} > out.txt", "c0")
                if i == 0
                else reply_message(f"done with {last_user_text(req)}")
            )
        )
    )
    body = "".join(f"  - {{id: t{i}, prompt: job{i}, repo: ., tags: [x]}}\n" for i in range(4))
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        body,
        defaults=(
            "models:\n  fake/m1: {price: {input: 1.0, cached_input: 0.1, output: 4.0}}\n"
            "  fake/m2: {price: {input: 3.0, cached_input: 0.3, output: 9.0}}\n"
            "matrix:\n  model: [fake/m1, fake/m2]\n  repeat: 2\n"
        ),
    )
    whole = tmp_path / "whole"
    assert run_cli("run", tasks, "--out", whole).returncode == 0
    shards = [tmp_path / f"shard{k}" for k in (1, 2, 3)]
    for k, d in enumerate(shards, 1):
        res = run_cli("run", tasks, "--out", d, "--shard", f"{k}/3")
        assert res.returncode == 0, res.stderr
    merged = tmp_path / "merged"
    res = run_cli("report", "merge", *shards, "--out", merged)
    assert res.returncode == 0, res.stderr
    one = json.loads((whole / "report.json").read_text())
    many = json.loads((merged / "report.json").read_text())
    assert len(many["runs"]) == len(one["runs"]) == 16
    assert sorted(map(_comparable, many["runs"]), key=lambda r: r["run"]) == sorted(
        map(_comparable, one["runs"]), key=lambda r: r["run"]
    )
    for key in (
        "runs",
        "completed",
        "not_completed",
        "requests",
        "tool_calls",
        "usage",
        "cost_usd",
    ):
        assert many["totals"][key] == one["totals"][key], key
    for t in many["runs"]:
        assert (merged / t["events_file"]).is_file()
        assert (merged / t["result"]["patch"]).is_file()
    junit = (merged / "junit.xml").read_text()
    assert junit.count("<testcase ") == 16
    summary = (merged / "summary.md").read_text()
    assert all(t["run"] in summary for t in one["runs"])


def test_a_run_that_breaks_does_not_stop_the_others(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo x > x.txt", "c0") if i == 0 else reply_message("done")
        )
    )
    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(3))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    out = tmp_path / "out"
    (out / "threads" / "t1.jsonl").mkdir(parents=True)  # its events file cannot be written
    res = run_cli("run", tasks, "--out", out, "--concurrency", "1", "--force")
    assert res.returncode == 3, res.stderr
    assert "Traceback" not in res.stderr
    by_id = {t["id"]: t for t in _runs(out)}
    assert by_id["t1"]["status"] == "error"
    assert "cannot write its events file threads/t1.jsonl" in by_id["t1"]["error"]
    assert by_id["t0"]["status"] == by_id["t2"]["status"] == "completed"
    assert by_id["t2"]["result"]["branch"]


def test_lone_surrogates_from_the_model_do_not_break_the_reports(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    item = (
        '{"type":"message","role":"assistant","status":"completed","content":'
        '[{"type":"output_text","annotations":[],"text":"half \\ud800 pair"}]}'
    )
    body = (
        'event: response.output_item.done\ndata: {"type":"response.output_item.done",'
        f'"output_index":0,"item":{item}}}\n\n'
        'event: response.completed\ndata: {"type":"response.completed","response":'
        f'{{"id":"r1","status":"completed","output":[{item}],"usage":{{"input_tokens":9,'
        '"output_tokens":3,"total_tokens":12}}}\n\n'
    ).encode()
    srv = loopback_thread(per_conversation(lambda req, i: reply_sse_bytes(body)))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    assert _runs(out)[0]["final_message"] == "half ? pair"
    events = [json.loads(line) for line in (out / "threads" / "a.jsonl").read_text().splitlines()]
    assert any("half" in json.dumps(e) for e in events)


def test_tool_output_reaching_the_model_is_redacted(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Without a sandbox a command can read the runner's environment through /proc; the
    provider must still never receive a secret in a tool output."""
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                shell("tr '\\0' '\\n' < /proc/$PPID/environ; echo $PPID", "c0")
                if i == 0
                else reply_message("done")
            )
        )
    )
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: go, repo: .}\n",
        defaults="  sandbox: danger-full-access\n",
    )
    text = tasks.read_text().replace("defaults:\n", "defaults:\n", 1)
    tasks.write_text(text.replace("tasks:\n", "secrets: [MY_CANARY]\ntasks:\n", 1))
    env = {"MY_CANARY": "canary-4c1d9e7f22", "PLAIN_CONTROL": "visible-5e0a"}
    res = run_cli("run", tasks, "--out", tmp_path / "out", env=env)
    assert res.returncode == 0, res.stderr
    output = str(srv.requests[1].call_outputs()["c0"])
    assert "PLAIN_CONTROL=visible-5e0a" in output  # the command did read the environment
    assert "FAKE_API_KEY=" not in output  # the secrets' entries are wiped, names included
    assert "canary-4c1d9e7f22" not in output
    assert "sk-canary-0123456789abcdef" not in output


def test_variant_settings_reach_the_request(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("ok")))
    (tmp_path / "terse.md").write_text("Terse instructions for this variant.\n")
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: fix it, repo: .}\n",
        defaults=(
            "matrix:\n  variant:\n"
            "    - {name: terse, prompt_template: 'Be brief. {prompt}', reasoning_effort: low,\n"
            "       developer_instructions: Keep diffs tiny., tools: [shell],\n"
            "       instructions_file: terse.md}\n"
            "    - {name: plain}\n"
        ),
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    by_run = {r["run"]: r for r in _runs(tmp_path / "o")}
    assert set(by_run) == {"a.terse", "a.plain"}
    terse, plain = (
        next(r for r in srv.requests if ("Be brief. fix it" in r.raw.decode()) == want)
        for want in (True, False)
    )
    assert terse.json["reasoning"]["effort"] == "low" and "reasoning" not in plain.json
    assert terse.instructions == "Terse instructions for this variant."
    assert plain.instructions != terse.instructions
    assert [t["name"] for t in terse.tools] == ["shell"]
    assert len(plain.tools) == 3
    assert "Keep diffs tiny." in terse.raw.decode()
    assert "Keep diffs tiny." not in plain.raw.decode()
    assert by_run["a.terse"]["variant"] == "terse"


def test_concurrency_caps_runs_at_once(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    in_flight = [0]
    peak = [0]

    async def slow(req: Any, i: int) -> Reply:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        await asyncio.sleep(0.2)
        in_flight[0] -= 1
        return reply_message("done")

    srv = loopback_thread(per_conversation(slow))
    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(6))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    assert run_cli("run", tasks, "--out", tmp_path / "o", "--concurrency", "2").returncode == 0
    assert peak[0] == 2 and len(srv.requests) == 6


def test_output_tokens_and_batch_cost_limits(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(looping))
    price = "models:\n  fake/test-model: {price: {input: 2.0, cached_input: 0.5, output: 8.0}}\n"
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: out, prompt: go, repo: ., limits: {max_output_tokens: 60}}\n",
        defaults=price,
    )
    assert run_cli("run", tasks, "--out", tmp_path / "o1").returncode == 1
    run = _runs(tmp_path / "o1")[0]
    assert run["status"] == "budget" and "limits.max_output_tokens" in run["error"]
    last = run["requests"][-1]["usage"]["output_tokens"]
    assert run["usage"]["output_tokens"] - last < 60 <= run["usage"]["output_tokens"]

    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(3))
    capped = write_tasks(
        tmp_path, srv.base_url, body, defaults=price + "budget: {max_cost_usd: 0.004}\n"
    )
    assert run_cli("run", capped, "--out", tmp_path / "o2", "--concurrency", "1").returncode == 1
    runs = _runs(tmp_path / "o2")
    assert [r["status"] for r in runs] == ["budget", "skipped", "skipped"]
    assert "budget.max_cost_usd" in runs[0]["error"] and runs[0]["cost_usd"] >= 0.004
    assert [len(r["requests"]) for r in runs[1:]] == [0, 0]
    report = json.loads((tmp_path / "o2" / "report.json").read_text())
    assert report["totals"]["cost_usd"] == pytest.approx(runs[0]["cost_usd"], abs=1e-6)


def test_a_batch_limit_stops_once_an_answer_comes_without_usage(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A sum that misses an answer's tokens is too low: the batch limit could be passed
    unseen, so the batch stops instead (as a run's own limit does)."""

    def script(req: Any, i: int) -> Reply:
        if i == 0:
            return shell("echo 0 >> log.txt", "c0").but(send_usage=False)
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    price = "models:\n  fake/test-model: {price: {input: 2.0, cached_input: 0.5, output: 8.0}}\n"
    body = "".join(f"  - {{id: t{i}, prompt: go, repo: .}}\n" for i in range(3))
    capped = write_tasks(
        tmp_path, srv.base_url, body, defaults=price + "budget: {max_cost_usd: 1}\n"
    )
    res = run_cli("run", capped, "--out", tmp_path / "o", "--concurrency", "1")
    assert res.returncode == 1, res.stderr
    runs = _runs(tmp_path / "o")
    assert [r["status"] for r in runs] == ["budget", "skipped", "skipped"]
    assert "budget.max_cost_usd cannot be enforced" in runs[0]["error"]
    assert runs[0]["usage"]["unreported_responses"] == 1 and runs[0]["cost_usd"] is None


def test_a_runner_failure_while_keeping_the_work_is_never_a_pass(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The agent completed, then writing its patch broke (here: `patches` is a file; a
    full disk does the same): its work may be lost, so the run is an error, not a PASS."""

    def script(req: Any, i: int) -> Reply:
        return shell("echo work > w.txt", "c0") if i == 0 else reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: t, prompt: go, repo: .}\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "patches").write_text("not a directory")
    res = run_cli("run", tasks, "--out", out, "--force")
    assert "Traceback" not in res.stderr
    assert res.returncode == 3, res.stderr
    (run,) = _runs(out)
    assert run["status"] == "error" and "internal error in the runner" in run["error"], run


def test_timeout_through_the_command_keeps_work(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    async def slow_loop(req: Any, i: int) -> Reply:
        await asyncio.sleep(0.3)
        return shell(f"echo {i} >> log.txt", f"c{i}")

    srv = loopback_thread(per_conversation(slow_loop))
    tasks = write_tasks(
        tmp_path, srv.base_url, "  - {id: slow, prompt: go, repo: ., limits: {timeout_s: 1.5}}\n"
    )
    t0 = time.monotonic()
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode == 1
    assert time.monotonic() - t0 < 15
    run = _runs(tmp_path / "o")[0]
    assert run["status"] == "timeout" and "1.5 s timeout" in run["error"]
    assert run["result"]["branch"] and "log.txt" in run["result"]["files"]


def test_a_failed_answer_still_counts_its_tokens(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo hi", "c0") if i == 0 else reply_incomplete("content_filter")
        )
    )
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    text = tasks.read_text().replace(
        "env_key: FAKE_API_KEY}", "env_key: FAKE_API_KEY, stream_max_retries: 0}"
    )
    tasks.write_text(text)
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode != 0
    run = _runs(tmp_path / "o")[0]
    assert len(srv.requests) == 2 and len(run["requests"]) == 2
    failed = run["requests"][1]
    assert "incomplete" in failed["error"] and failed["usage"]["input_tokens"] > 0
    assert run["usage"]["input_tokens"] == sum(srv.requests[i].input_tokens for i in (0, 1))


def test_a_result_that_cannot_be_kept_is_an_error(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo x > x.txt", "c0") if i == 0 else reply_message("done")
        )
    )
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: go, repo: .}\n",
        defaults="  git: {branch: 'fixed/{name}'}\n",
    )
    lock = tmp_path / ".git" / "refs" / "heads" / "fixed" / "a.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # as a runner killed inside `git update-ref` leaves it
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 3
    run = _runs(tmp_path / "o")[0]
    assert run["status"] == "error" and "could not keep the result" in run["error"]


def test_retried_attempts_the_server_billed_are_counted(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    def script(req: Any, i: int) -> Reply:
        if i == 0:
            return shell("echo hi", "c0")
        return reply_incomplete("content_filter") if i == 1 else reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode == 0
    run = _runs(tmp_path / "o")[0]
    assert len(srv.requests) == 3 and len(run["requests"]) == 2  # one resent request
    assert run["usage"]["input_tokens"] == sum(r.input_tokens for r in srv.requests)


def test_an_answer_cut_at_max_output_tokens_is_kept_not_resent(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`response.incomplete` for `max_output_tokens`: resending would be cut (and billed)
    the same way, so the run ends as `max_output_tokens` with what the model wrote."""
    srv = loopback_thread(
        per_conversation(
            lambda req, i: reply_incomplete(
                "max_output_tokens", output=[message_item("The plan is to first")]
            )
        )
    )
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    assert run_cli("run", tasks, "--out", tmp_path / "o").returncode == 1
    run = _runs(tmp_path / "o")[0]
    assert len(srv.requests) == 1 and len(run["requests"]) == 1
    assert run["status"] == "max_output_tokens"
    assert run["truncated_output"] == "The plan is to first"
    assert run["usage"]["input_tokens"] == srv.requests[0].input_tokens


def test_resume_of_another_shard_or_batch_is_refused(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`--resume --shard 2/3` on shard 1's directory would drop shard 1's runs and leave
    its files behind: exit 2 saying whose directory it is, and nothing changes. A fresh
    batch there replaces the old one whole (no stray threads or patches)."""
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                shell(f"echo {last_user_text(req)} > out.txt", "c0")
                if i == 0
                else reply_message("done")
            )
        )
    )
    body = "".join(f"  - {{id: t{i}, prompt: run{i}, repo: .}}\n" for i in range(6))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out, "--shard", "1/3").returncode == 0
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert any("threads" in p.parts for p in before)
    res = run_cli("run", tasks, "--out", out, "--resume", "--shard", "2/3")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert (
        f"{out}/journal/batch.json: --resume: {out} holds shard 1/3 of this batch, not "
        "2/3; resume it with its own flags, or give this batch a new --out"
    ) in res.stderr
    res = run_cli("run", tasks, "--out", out, "--resume", "--only", "t0")
    assert res.returncode == 2 and "a batch of another run set" in res.stderr
    tasks.write_text(tasks.read_text() + "  - {id: t9, prompt: run9, repo: .}\n")
    res = run_cli("run", tasks, "--out", out, "--resume", "--shard", "1/3")
    assert res.returncode == 2 and "a batch of another task file" in res.stderr
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before
    old_threads = {p.name for p in (out / "threads").iterdir()}
    assert run_cli("run", tasks, "--out", out, "--shard", "3/3", "--force").returncode == 0
    report = json.loads((out / "report.json").read_text())
    assert {p.name for p in (out / "threads").iterdir()} == {
        t["events_file"].split("/")[-1] for t in report["runs"]
    }
    assert not old_threads & {p.name for p in (out / "threads").iterdir()}


_SPAWNED: list[list[str]] = []


def _spawns(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen" and _SPAWNED and isinstance(args[1], (list, tuple)):
        _SPAWNED[0].append(" ".join(str(a) for a in args[1]))


sys.addaudithook(_spawns)  # hooks cannot be removed; it records only while a list is set


def test_a_repository_base_is_asked_of_git_once_per_batch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The config pass checks each repository's base; the batch's resume pins take the
    commit it found rather than ask again (one git process before the first request). A
    batch started without the config pass (`runner.run_batch`) asks for itself."""
    srv = loopback_thread(lambda req, i: reply_message("done"))
    body = "".join(f"  - {{id: t{i}, prompt: p, repo: .}}\n" for i in range(3))
    tasks = write_tasks(tmp_path, srv.base_url, body)
    _SPAWNED.append([])
    try:
        assert run_cli("run", tasks, "--out", tmp_path / "out").returncode == 0
    finally:
        calls = _SPAWNED.pop()
    asked = [c for c in calls if "rev-parse --verify --end-of-options HEAD^{commit}" in c]
    assert len(asked) == 1, asked
    journal = json.loads((tmp_path / "out" / "journal" / "batch.json").read_text())
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    assert [b[1:] for b in journal["pins"]["bases"]] == [["HEAD", head]]


def test_the_sandbox_is_probed_while_the_first_workspace_is_made(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The bwrap probe (one process, once per runner) runs beside the first run's git
    work, not after it. Here the workspace's `read-tree` waits for the probe to have
    started: a batch that probed only once its workspace was ready would wait in vain."""
    real_git, real_bwrap = shutil.which("git"), shutil.which("bwrap")
    assert real_git is not None and real_bwrap is not None
    marker, folder = tmp_path / "probed", tmp_path / "bin"
    folder.mkdir()
    (folder / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" read-tree "*)\n'
        f"  i=0; while [ ! -e {marker} ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done\n"
        f"  [ -e {marker} ] || {{ echo 'the probe never started' >&2; exit 1; }};;\n"
        "esac\n"
        f'exec {real_git} "$@"\n'
    )
    # The probe is the one bwrap command that runs `true`.
    (folder / "bwrap").write_text(
        f'#!/bin/sh\ncase "$*" in *true) : > {marker};; esac\nexec {real_bwrap} "$@"\n'
    )
    for tool in ("git", "bwrap"):
        (folder / tool).chmod(0o755)
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = write_tasks(tmp_path / "repo", srv.base_url, "  - {id: a, prompt: p, repo: .}\n")
    path = f"{folder}:{os.environ['PATH']}"
    done = run_cli("run", tasks, "--out", tmp_path / "out", env={"PATH": path})
    assert done.returncode == 0, done.stderr
    assert marker.exists()
