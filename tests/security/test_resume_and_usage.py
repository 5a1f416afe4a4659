"""Classes 9 and 10 of issue 14: `--resume` deletes only the branches this batch made,
while they still point at the commit its journal recorded; absurd token counts from a
server fail that request as a protocol error, never the batch."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import Reply, last_user_text, per_conversation, reply_message
from tests.support.security import cli, runs, sh, start_batch, tasks, wait_until


def _hanging_model(loopback_thread: ThreadFactory) -> tuple[Any, dict[str, bool]]:
    """Writes a file, then (while `hang`) never answers the next request."""
    state = {"hang": True}

    def script(req: Any, i: int) -> Reply:
        if i == 0:
            return sh("echo work > w.txt", "c0")
        return reply_message("done").but(delay_s=120 if state["hang"] else 0)

    return loopback_thread(per_conversation(script)), state


def test_resume_after_kill_9_never_deletes_the_users_branch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Template `agent/{task}` and a user branch `agent/a` that existed before: the killed
    attempt's journal names `agent/a`, but it never made (so never recorded) a commit."""
    repo = make_git_repo(tmp_path / "repo")
    git(repo, "branch", "agent/a")
    mine = git(repo, "rev-parse", "agent/a").strip()
    srv, state = _hanging_model(loopback_thread)
    tf = tasks(tmp_path, srv.base_url, repo, ["a"], git="{branch: 'agent/{task}'}")
    out = tmp_path / "o"
    proc = start_batch(tf, out)
    wait_until(lambda: len(srv.requests) >= 2, proc)
    proc.kill()
    proc.communicate()
    state["hang"] = False
    res = cli("run", tf, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    assert git(repo, "rev-parse", "agent/a").strip() == mine
    assert runs(out)["a"]["result"]["branch"] == "agent/a-2"
    assert git(repo, "show", "agent/a-2:w.txt") == "work\n"


def test_resume_deletes_its_branch_only_while_it_points_at_the_recorded_commit(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    base = git(repo, "rev-parse", "HEAD").strip()
    srv, state = _hanging_model(loopback_thread)
    tf = tasks(tmp_path, srv.base_url, repo, ["a", "b"], git="{branch: 'agent/{task}'}")
    out = tmp_path / "o"
    proc = start_batch(tf, out, "--concurrency", "2")
    wait_until(lambda: len(srv.requests) >= 4, proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    first = runs(out)
    assert first["a"]["status"] == first["b"]["status"] == "interrupted"
    assert first["a"]["result"]["branch"] == "agent/a"
    # The user takes over `agent/b` (moves it): it is theirs now.
    git(repo, "branch", "-f", "agent/b", base)
    state["hang"] = False
    res = cli("run", tf, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    again = runs(out)
    assert again["a"]["result"]["branch"] == "agent/a"  # deleted, then made again
    assert again["a"]["result"]["commit"] != first["a"]["result"]["commit"]
    assert git(repo, "rev-parse", "agent/b").strip() == base  # not ours any more: kept
    assert again["b"]["result"]["branch"] == "agent/b-2"
    assert sorted(git(repo, "branch", "--list", "agent/*").split()) == [
        "agent/a",
        "agent/b",
        "agent/b-2",
    ]


ONE_RETRY = "stream_max_retries: 1"
"""A bad usage fails its request as a broken stream, which is resent (5 times by default,
6 s of backoff that prove nothing more here); once shows it fails again on resend."""


def test_absurd_token_counts_fail_only_their_request(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    bad: dict[str, Any] = {
        "huge": {"input_tokens": 10**400},
        "negative": {"output_tokens": -1000},
        "fraction": {"output_tokens": 2.5},
    }

    def script(req: Any, i: int) -> Reply:
        usage = bad.get(last_user_text(req))
        return reply_message("done") if usage is None else reply_message("x").but(usage=usage)

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "o"
    res = cli(
        "run",
        tasks(tmp_path, srv.base_url, repo, [*bad, "healthy"], provider=ONE_RETRY),
        "--out",
        out,
        "--concurrency",
        "4",
    )
    assert "Traceback" not in res.stderr
    found = runs(out)
    assert found["healthy"]["status"] == "completed"
    for name in bad:
        assert found[name]["status"] == "error", found[name]
        assert "a token count must be an integer from 0 to" in found[name]["error"]
    assert "usage.input_tokens = 10000000000000000000... (401 characters)" in found["huge"]["error"]
    assert all(r["usage"]["input_tokens"] >= 0 for r in found.values())


def test_inconsistent_or_missing_usage_never_reads_as_a_real_count(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A float, a part larger than its whole (a negative uncached count, a hit ratio over
    100%) fail the request; an answer with no usage at all makes the cost unknown (null),
    never $0, and stops a run whose token limit can then not be enforced."""
    bad: dict[str, Any] = {
        "float": {"input_tokens": 100.0},
        "cached_over": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 20}},
        "reasoning_over": {"output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 4}},
    }

    def script(req: Any, i: int) -> Reply:
        name = last_user_text(req)
        if name in bad:
            return reply_message("x").but(usage=bad[name])
        return reply_message("done").but(send_usage=name == "healthy")

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "o"
    ids = [*bad, "healthy", "silent"]
    task_file = tasks(tmp_path, srv.base_url, repo, ids, provider=ONE_RETRY)
    task_file.write_text(
        task_file.read_text().replace(
            "defaults:",
            ("models: {fake/m: {price: {input: 1.0, cached_input: 0.1, output: 2.0}}}\ndefaults:"),
        )
    )
    res = cli("run", task_file, "--out", out, "--concurrency", "3")
    assert "Traceback" not in res.stderr
    found = runs(out)
    assert found["float"]["status"] == "error"
    assert "usage.input_tokens = 100.0: a token count must be an integer" in found["float"]["error"]
    assert (
        "usage.input_tokens_details.cached_tokens = 20, more than usage.input_tokens = 10"
        in found["cached_over"]["error"]
    )
    assert (
        "reasoning_tokens = 4, more than usage.output_tokens = 3"
        in found["reasoning_over"]["error"]
    )
    assert found["healthy"]["status"] == "completed"
    assert found["healthy"]["cost_usd"] is not None and found["healthy"]["cost_usd"] > 0
    assert found["healthy"]["usage"]["unreported_responses"] == 0
    silent = found["silent"]
    assert silent["status"] == "completed"
    assert silent["cost_usd"] is None
    assert silent["usage"]["unreported_responses"] == 1
    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["cost_usd"] is None
    assert report["totals"]["usage"]["unreported_responses"] == 1


def test_a_token_limit_stops_when_the_server_sends_no_usage(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    def script(req: Any, i: int) -> Reply:
        if i < 3:
            return sh(f"echo {i} >> w.txt", f"c{i}").but(send_usage=False)
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "o"
    res = cli(
        "run",
        tasks(tmp_path, srv.base_url, repo, ["t"], extra="  limits: {max_input_tokens: 100000}"),
        "--out",
        out,
    )
    assert "Traceback" not in res.stderr
    run = runs(out)["t"]
    assert run["status"] == "budget", run
    assert "without token usage, so limits.max_input_tokens cannot be enforced" in run["error"]
    assert len(run["requests"]) == 1 if isinstance(run.get("requests"), list) else True
