"""The `runner` command as a user runs it, against the loopback server. Exit statuses and
the `--json` stream are read from a real process (`run_cli_process`); the rest calls the
command in-process (`run_cli`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.cli import KEY, run_cli, run_cli_process, shell, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import (
    Reply,
    assert_exact_extension,
    per_conversation,
    reply_message,
)


def script(req: Any, i: int) -> Reply:
    if i == 0:
        return shell("echo from-the-tool; echo $FAKE_API_KEY", f"call{i}")
    return reply_message("all done")


def test_run_writes_report_and_events(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: one, prompt: say hi, repo: .}\n  - {id: two, prompt: say hi again, repo: .}\n",
    )
    out = tmp_path / "out"
    step_summary = tmp_path / "step-summary.md"
    step_summary.write_text("earlier step\n")
    res = run_cli("run", tasks, "--out", out, env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    import xmlschema

    xsd = Path(__file__).parent / "golden" / "reports" / "junit.xsd"
    xmlschema.XMLSchema(str(xsd)).validate(str(out / "junit.xml"))
    assert (out / "junit.xml").read_text().count("<testcase ") == 2
    summary = (out / "summary.md").read_text()
    assert "2 of 2 finished runs passed (100.0%)" in summary
    assert step_summary.read_text() == "earlier step\n" + summary + "\n"
    assert "all done" in res.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["schema_version"] == "runner.report/3.7"
    assert report["totals"]["runs"] == 2 and report["totals"]["completed"] == 2
    assert report["totals"]["requests"] == 4
    by_id = {t["id"]: t for t in report["runs"]}
    one = by_id["one"]
    assert one["status"] == "completed" and one["final_message"] == "all done"
    assert one["model"] == "fake/test-model"
    assert [r["output_types"] for r in one["requests"]] == [["function_call"], ["message"]]
    assert one["requests"][1]["usage"]["cached_tokens"] > 0
    assert one["requests"][1]["usage"]["cache_hit_ratio"] > 0.5
    # The audit agrees: every request extends the one before; the server cached all of it.
    assert one["prefix_breaks"] == 0
    assert all(r["prefix"]["extends_previous"] for r in one["requests"])
    second = one["requests"][1]
    assert second["prefix"]["reused_items"] == 4
    assert abs(second["prefix"]["ideal_cache_ratio"] - second["usage"]["cache_hit_ratio"]) < 0.02
    assert one["usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in one["requests"])
    # Each thread is an exact extension, request after request; the key is the thread id.
    convs: dict[str, list[Any]] = {}
    for r in srv.requests:
        convs.setdefault(r.prompt_cache_key, []).append(r)
    assert len(convs) == 2
    for reqs in convs.values():
        assert_exact_extension(reqs)
    assert srv.requests[0].header("authorization") == "Bearer sk-canary-0123456789abcdef"
    events = [json.loads(line) for line in (out / one["events_file"]).read_text().splitlines()]
    assert events[0]["type"] == "thread.started"
    assert any(e["type"] == "request.completed" for e in events)
    # The key is neither in the agent's environment nor in any artifact.
    for f in out.rglob("*"):
        if f.is_file():
            assert "sk-canary-0123456789abcdef" not in f.read_text(), f


def test_json_stream_on_stdout(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: one, prompt: hi}\n")
    res = run_cli_process("run", tasks, "--out", tmp_path / "o", "--json")
    assert res.returncode == 0, res.stderr
    events = [json.loads(line) for line in res.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[:2] == ["thread.started", "turn.started"]
    assert types[-1] == "turn.completed"
    started = next(e["item"] for e in events if e["type"] == "item.started")
    assert started["command"] == "bash -c 'echo from-the-tool; echo $FAKE_API_KEY'"
    assert started["exit_code"] is None
    assert started["status"] == "in_progress"
    cmd = next(
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "command_execution"
    )
    assert cmd["id"] == started["id"]
    assert cmd["status"] == "completed" and "from-the-tool" in cmd["aggregated_output"]
    msg = next(
        e["item"]
        for e in events
        if e["type"] == "item.completed" and e["item"]["type"] == "agent_message"
    )
    assert msg["text"] == "all done" and msg["id"].startswith("item_")
    usage = events[-1]["usage"]
    assert set(usage) == {
        "input_tokens",
        "cached_input_tokens",
        "cache_write_input_tokens",
        "output_tokens",
        "reasoning_output_tokens",
    }
    assert usage["cached_input_tokens"] > 0


def test_limit_gives_exit_1_and_keeps_report(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(lambda req, i: shell("true", f"c{i}"))
    tasks = write_tasks(
        tmp_path, srv.base_url, "  - {id: loop, prompt: hi, limits: {max_requests: 2}}\n"
    )
    res = run_cli_process("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 1
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["runs"][0]["status"] == "max_requests"
    assert "max_requests" in report["runs"][0]["error"]


def test_provider_down_is_exit_3(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path, "http://127.0.0.1:9/v1", "  - {id: one, prompt: hi}\n")
    text = tasks.read_text().replace(
        "env_key: FAKE_API_KEY", "env_key: FAKE_API_KEY, request_max_retries: 1"
    )
    tasks.write_text(text)
    res = run_cli_process("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 3, res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["runs"][0]["status"] == "error"
    assert "Traceback" not in res.stderr


def test_missing_key_is_exit_2(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread([])
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: one, prompt: hi}\n")
    res = run_cli_process("run", tasks, env={"FAKE_API_KEY": ""})
    assert res.returncode == 2
    assert "FAKE_API_KEY" in res.stderr and "providers.fake.env_key" in res.stderr


def test_only_and_bad_flags(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(script))
    tasks = write_tasks(
        tmp_path, srv.base_url, "  - {id: one, prompt: hi}\n  - {id: two, prompt: hi}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o", "--only", "two")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [t["id"] for t in report["runs"]] == ["two"]
    bad = run_cli("run", tasks, "--only", "three")
    assert bad.returncode == 2 and "--only" in bad.stderr and "three" in bad.stderr
    assert run_cli("run", tasks, "--concurrency", "0").returncode == 2
    assert run_cli("run", tasks, "--model", "nomodel").returncode == 2
    assert run_cli("frobnicate").returncode == 2


def test_cut_stream_is_resent_without_rerunning_tools(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    from tests.support.loopback import reply_drop_after

    srv = loopback_thread(
        [shell("echo x >> ran.txt", "c1"), reply_drop_after(2), reply_message("done")]
    )
    tasks = write_tasks(
        tmp_path, srv.base_url, f"  - {{id: one, prompt: hi, repo: '{tmp_path}'}}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "o")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    patch = (tmp_path / "o" / report["runs"][0]["result"]["patch"]).read_text()
    assert "+x\n" in patch and patch.count("+x") == 1  # the tool ran once
    assert len(srv.requests) == 3
    assert srv.requests[1].body == srv.requests[2].body  # the same request, resent


def test_answers_on_stdout_cannot_issue_workflow_commands(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The model's final text is printed through the one printing rule, under GitHub
    Actions or not: `::add-mask::` and `::set-output` in it are shown but inert."""
    hostile = "done\n::add-mask::secret\n::set-output name=x::y\n::stop-commands::guess"
    srv = loopback_thread(per_conversation(lambda req, i: reply_message(hostile)))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    res = run_cli("run", tasks, "--out", tmp_path / "o", env={"GITHUB_ACTIONS": "true"})
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines == [
        "--- a",
        "done",
        "\\u003a:add-mask::secret",
        "\\u003a:set-output name=x::y",
        "\\u003a:stop-commands::guess",
    ]
    plain = run_cli("run", tasks, "--out", tmp_path / "p", env={"GITHUB_ACTIONS": ""})
    assert plain.stdout.splitlines() == lines


def test_max_environments_below_one_is_refused_up_front(tmp_path: Path) -> None:
    res = run_cli("run", tmp_path / "missing.yaml", "--max-environments", "0")
    assert res.returncode == 2
    assert "--max-environments: must be at least 1" in res.stderr


def test_max_environments_in_the_task_file_is_checked_with_its_line(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nmax_environments: 0\ndefaults: {model: openai/gpt-5}\n"
        "tasks:\n  - {id: a, prompt: p}\n"
    )
    res = run_cli("validate", tasks, "--offline")
    assert res.returncode == 2
    assert "tasks.yaml:2" in res.stderr and "max_environments" in res.stderr


ONLY_FOR_OTHER_BATCHES = (
    "runner.envrun",  # containers and Pods
    "runner.verify",  # suite graders
    "runner.sandbox.orphans",
    "runner.sandbox.enginecheck",
    "runner.workspace.authproxy",  # pushes
    "runner.config.suite_runs",  # `suites:`
    "runner.providers.local",  # the embedded engine
    "runner.providers.constrained",  # constrained tool calls
    "runner.tools.patch_format",  # the first patch the model sends
)


def test_a_plain_local_batch_loads_nothing_only_other_batches_need(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Each module here costs every start its import; a batch that has no use for it
    (one local run, a model that only answers) must not load it."""
    srv = loopback_thread(lambda req, i: reply_message("done"))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: p, repo: .}\n")
    code = (
        "import json, sys\n"
        "from runner.cli import main\n"
        f"code = main(['run', {str(tasks)!r}, '--out', {str(tmp_path / 'out')!r}])\n"
        f"print(json.dumps([code, [m for m in {ONLY_FOR_OTHER_BATCHES!r} if m in sys.modules]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "FAKE_API_KEY": KEY},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == [0, []]


def test_pydantic_s_plugin_loader_is_left_out_only_when_the_runner_turned_plugins_off(
    tmp_path: Path,
) -> None:
    """The command turns pydantic's plugins off for itself (none are used) and then does
    not load the loader that would only answer "none" (importlib.metadata with it); a
    caller who set PYDANTIC_DISABLE_PLUGINS keeps pydantic's own loader and choice."""
    tasks = tmp_path / "t.yaml"
    tasks.write_text("version: 1\ntasks:\n  - {id: a, prompt: p, repo: .}\n")
    code = (
        "import contextlib, io, json, sys\n"
        "from runner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['validate', {str(tasks)!r}, '--offline'])\n"
        "loader = sys.modules['pydantic.plugin._loader']\n"
        "print(json.dumps([code, 'importlib.metadata' in sys.modules,"
        " hasattr(loader, 'entry_points')]))\n"
    )
    for env, loaded in (({}, False), ({"PYDANTIC_DISABLE_PLUGINS": "some_plugin"}, True)):
        clean = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**clean, **env},
            timeout=60,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1]) == [0, loaded, loaded]
