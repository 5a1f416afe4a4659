"""Retries and waits are counted per request, per run and per batch in the reports, and
what an attempt later redone by `--resume --retry-errored` spent stays in the batch's
totals, shown apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import run_cli, shell
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, reply_http_error, reply_message

PRICE = "models: {fake/test-model: {price: {input: 2.0, cached_input: 0.5, output: 8.0}}}\n"


def _tasks(tmp_path: Path, base_url: str, retries: int) -> Path:
    make_git_repo(tmp_path)
    path = tmp_path / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY, "
        f"request_max_retries: {retries}}}\n"
        f"{PRICE}"
        "defaults: {model: fake/test-model}\n"
        "tasks:\n"
        "  - {id: a, prompt: look around, repo: .}\n"
    )
    return path


def _report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text())
    return data


def test_retries_and_waits_are_counted_per_request_run_and_batch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The first request is refused twice (429 asking for 0.2 s, then a 503), the second
    answered at once; a run whose provider never answers counts its retries too."""
    replies = [
        reply_http_error(429, headers={"retry-after-ms": "200"}),
        reply_http_error(503),
        shell("true", "c1"),
        reply_message("done"),
    ]
    srv = loopback_thread(replies)
    out = tmp_path / "out"
    res = run_cli("run", _tasks(tmp_path, srv.base_url, 4), "--out", out)
    assert res.returncode == 0, res.stderr
    report = _report(out)
    (run,) = report["runs"]
    assert [r["retries"] for r in run["requests"]] == [2, 0]
    first, second = (r["retry_wait_s"] for r in run["requests"])
    assert first >= 0.2 and second == 0.0  # at least what the server asked for
    assert (run["retries"], run["retry_wait_s"]) == (2, first)
    assert (report["totals"]["retries"], report["totals"]["retry_wait_s"]) == (2, first)
    assert report["totals"]["redone"] is None and run["redone"] is None
    summary = (out / "summary.md").read_text()
    assert "2 retries," in summary and "Retries (waiting)" in summary
    assert "2 retries," in (out / "report.html").read_text()


def test_a_request_that_fails_for_good_keeps_its_retries(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: reply_http_error(503))
    out = tmp_path / "out"
    res = run_cli("run", _tasks(tmp_path, srv.base_url, 2), "--out", out)
    assert res.returncode == 3, res.stderr
    (run,) = _report(out)["runs"]
    assert run["status"] == "error" and len(srv.requests) == 3
    (req,) = run["requests"]
    assert req["retries"] == 2 and req["error"] and req["usage"] is None
    assert run["retries"] == 2 and run["retry_wait_s"] > 0


def test_spend_of_a_redone_attempt_stays_in_the_totals_shown_apart(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The first session's run is billed for one answer (a tool call), then its provider
    fails: an `error`. `--resume --retry-errored` runs it again; the report's totals hold
    both attempts' tokens and cost, the earlier one's as `redone`."""
    outage = {"on": True}

    def script(req: Any, i: int) -> Reply:
        if outage["on"]:
            billed = "function_call_output" in json.dumps(req.input)
            return reply_http_error(503) if billed else shell("true", "c1")
        return reply_message("done")

    srv = loopback_thread(script)
    tasks = _tasks(tmp_path, srv.base_url, 0)
    out = tmp_path / "out"
    first = run_cli("run", tasks, "--out", out)
    assert first.returncode == 3, first.stderr
    (failed,) = _report(out)["runs"]
    assert failed["status"] == "error", failed["error"]
    spent_tokens = failed["usage"]["total_tokens"]
    spent_cost = failed["cost_usd"]
    assert spent_tokens > 0 and spent_cost > 0

    outage["on"] = False
    again = run_cli("run", tasks, "--out", out, "--resume", "--retry-errored")
    assert again.returncode == 0, again.stderr
    report = _report(out)
    (run,) = report["runs"]
    assert run["status"] == "completed"
    redone = {"attempts": 1, "tokens": spent_tokens, "cost_usd": spent_cost}
    for where in (run["redone"], report["totals"]["redone"]):
        got = {
            "attempts": where["attempts"],
            "tokens": where["usage"]["total_tokens"],
            "cost_usd": where["cost_usd"],
        }
        assert got == redone
    totals = report["totals"]
    assert totals["usage"]["total_tokens"] == run["usage"]["total_tokens"] + spent_tokens
    assert totals["cost_usd"] == round(run["cost_usd"] + spent_cost, 6)
    assert "of which redone: 1 earlier attempt(s)" in (out / "summary.md").read_text()
    assert "redone)" in (out / "summary.md").read_text()  # the run's own cost cell
    assert "of which redone: 1 earlier attempt(s)" in (out / "report.html").read_text()

    # Redone once more, the earlier attempts add up rather than replace each other.
    (out / "journal" / "runs").joinpath(f"{run['fingerprint']}.json").write_text(
        json.dumps(
            {
                "state": "finished",
                "run": run["run"],
                "branch": None,
                "report": {**run, "status": "error"},
            }
        )
    )
    third = run_cli("run", tasks, "--out", out, "--resume", "--retry-errored")
    assert third.returncode == 0, third.stderr
    twice = _report(out)["totals"]["redone"]
    assert twice["attempts"] == 2
    assert twice["usage"]["total_tokens"] == spent_tokens + run["usage"]["total_tokens"]


def test_retries_of_a_redone_attempt_stay_in_the_totals(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """An errored attempt resent its request twice and waited; `--resume --retry-errored`
    replaces it, and its retries and waits stay in the totals, shown apart in `redone`."""
    outage = {"on": True}

    def script(req: Any, i: int) -> Reply:
        return reply_http_error(503) if outage["on"] else reply_message("done")

    srv = loopback_thread(script)
    tasks = _tasks(tmp_path, srv.base_url, 2)
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 3
    (failed,) = _report(out)["runs"]
    assert failed["retries"] == 2 and failed["retry_wait_s"] > 0
    outage["on"] = False
    again = run_cli("run", tasks, "--out", out, "--resume", "--retry-errored")
    assert again.returncode == 0, again.stderr
    report = _report(out)
    (run,) = report["runs"]
    assert run["retries"] == 0  # this attempt's own
    for where in (run["redone"], report["totals"]["redone"]):
        assert (where["retries"], where["retry_wait_s"]) == (2, failed["retry_wait_s"])
    totals = report["totals"]
    assert totals["retries"] == 2
    assert totals["retry_wait_s"] == round(run["retry_wait_s"] + failed["retry_wait_s"], 3)
    summary = (out / "summary.md").read_text()
    assert "of which redone: 1 earlier attempt(s)" in summary and ", 2 retries, " in summary
