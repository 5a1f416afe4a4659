"""Long threads: compaction (local, remote, on overflow) keeps the thread going and the
prompt cache warm, against the loopback server, which caches exact prefixes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from runner import compaction as cp
from runner import items as it
from runner import prompt as prompts
from runner.agent import Outcome, Thread, ThreadSpec
from runner.items import Usage
from runner.providers import find_compactor
from runner.providers.responses import ResponsesClient
from runner.sandbox.env import child_env
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolContext
from runner.tools.shell import ShellTool
from tests.support.cache_stable import assert_cache_stable, cache_problems
from tests.support.cli import run_cli
from tests.support.compacting import CompactingServer
from tests.support.events import ListSink
from tests.support.fixtures import LoopbackFactory
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    find_extension_break,
    last_user_text,
    reply_failed,
    reply_function_call,
    reply_http_error,
    reply_message,
)

pytestmark = pytest.mark.anyio

OUTPUT_BYTES = 600


def is_summary_request(req: RecordedRequest) -> bool:
    return req.json.get("tool_choice") == "none"


class LongScript:
    """`calls` shell calls, one per request, then a final message; answers summary
    requests (tool_choice "none") with a summary."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.made = 0
        self.summaries = 0
        self.asks: list[str] = []
        """What each summary request asked for (its last user message)."""

    def __call__(self, req: RecordedRequest, index: int, /) -> Reply:
        if is_summary_request(req):
            self.summaries += 1
            self.asks.append(last_user_text(req))
            return reply_message(f"Summary {self.summaries}: ran {self.made} commands.")
        if self.made >= self.calls:
            return reply_message("all done")
        self.made += 1
        return reply_function_call(
            "shell",
            {"command": ["printf", f"%0{OUTPUT_BYTES}d", str(self.made)]},
            call_id=f"c{self.made}",
        )


def context_items(cwd: Path) -> list[it.Item]:
    return prompts.initial_context(
        cwd=cwd,
        sandbox="danger-full-access",
        network=True,
        writable_roots=[],
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date="2026-01-01",
        timezone="UTC",
    )[0]


async def run_long(
    base_url: str,
    cwd: Path,
    *,
    limit: int | None,
    prompts_: tuple[str, ...] = ("go",),
    max_requests: int = 1000,
    remote: bool = False,
    sink: ListSink | None = None,
) -> Outcome:
    client = ResponsesClient(base_url)
    spec = ThreadSpec(
        thread_id="long-1",
        model="m",
        instructions=prompts.base_instructions(),
        context=context_items(cwd),
        prompts=prompts_,
        max_requests=max_requests,
        timeout_s=100,
        compaction=cp.CompactionSettings(limit=limit),
        compactor=find_compactor(client) if remote else None,
    )
    ctx = ToolContext(environment=LocalEnvironment(LocalExecutor(), cwd), env=child_env(os.environ))
    try:
        return await Thread(spec, client, [ShellTool()], ctx, sink or ListSink()).run()
    finally:
        await client.aclose()


def after_compaction(outcome: Outcome) -> set[int]:
    """Indexes (1-based) of the requests right after a compaction's last request."""
    return {max(c.requests) + 1 for c in outcome.compactions}


async def test_200_tool_calls_compact_and_stay_cached(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    script = LongScript(200)
    srv = await loopback(script)
    sink = ListSink()
    outcome = await run_long(srv.base_url, tmp_path, limit=8_000, sink=sink)
    assert outcome.status == "completed", outcome.error
    assert outcome.final_message == "all done" and outcome.tool_calls == 200
    assert len(outcome.compactions) >= 2 and type(outcome.compactions) is tuple
    assert all(c.kind == "local" and c.reason == "mid-turn" for c in outcome.compactions)
    assert all(c.tokens_after < c.tokens_before for c in outcome.compactions)
    # Every request extends the one before, except right after a compaction, and the
    # server's cache serves all of each one that repeats the previous: cached/ideal = 1.00.
    assert_cache_stable(outcome.requests)
    after = after_compaction(outcome)
    for r in outcome.requests[1:]:
        assert r.prefix.extends_previous == (r.index not in after), r
        if r.index in after:
            assert r.prefix.break_reason == "compaction"
    reqs = srv.requests
    for n in range(1, len(reqs)):
        if n + 1 not in after:  # srv index n is request n + 1
            assert find_extension_break(reqs[n - 1 : n + 1]) is None
    # The summary request is the previous request plus one message, with the same
    # instructions and tools: the cache serves all of the previous request.
    summaries = [n for n, r in enumerate(reqs) if is_summary_request(r)]
    assert len(summaries) == len(outcome.compactions) == script.summaries
    for n in summaries:
        prev, cur = reqs[n - 1], reqs[n]
        assert cur.tools_raw == prev.tools_raw and cur.instructions_raw == prev.instructions_raw
        # ... plus its answer (the call), the call's output and the summary request.
        assert cur.input_raw[: len(prev.input_raw)] == prev.input_raw
        assert len(cur.input_raw) == len(prev.input_raw) + 3
        assert it.message_text(it.Item(cur.input[-1])) == cp.default_prompt()
        assert cur.cached_tokens == prev.input_tokens > 0
        assert outcome.requests[n].kind == "compaction"
    # The rebuilt history has the same shape every time: context, the task, the summary;
    # so the request after each compaction reuses the cache up to the summary.
    rebuilt = [reqs[i - 1] for i in sorted(after)]
    for r in rebuilt:
        shape = [(i["type"], i.get("role")) for i in r.input[:4]]
        assert shape == [
            ("message", "developer"),
            ("message", "user"),
            ("message", "user"),
            ("message", "user"),
        ]
        assert r.input_raw[:3] == rebuilt[0].input_raw[:3]
        assert r.input[3]["content"][0]["text"].startswith(cp.summary_prefix())
        head = len(r.instructions_raw or "") + sum(len(t) for t in r.tools_raw)
        assert r.cached_tokens == (head + sum(len(x) for x in r.input_raw[:3])) // 4
    # Compactions are events with the sizes before and after.
    done = [e for e in sink.events if e["type"] == "compaction.completed"]
    assert [(e["kind"], e["tokens_before"], e["tokens_after"]) for e in done] == [
        (c.kind, c.tokens_before, c.tokens_after) for c in outcome.compactions
    ]
    kinds = [e["kind"] for e in sink.events if e["type"] == "request.completed"]
    assert kinds.count("compaction") == len(outcome.compactions)


async def test_limit_is_what_the_server_counted_plus_an_estimate(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """The first compaction comes when the last total_tokens plus bytes/4 of the tool
    output appended since pass the limit, not earlier."""
    script = LongScript(40)
    srv = await loopback(script)
    limit = 6_000
    outcome = await run_long(srv.base_url, tmp_path, limit=limit)
    assert outcome.status == "completed"
    first = outcome.compactions[0]
    n = first.requests[0] - 1  # the summary request's place in srv.requests
    prev = srv.requests[n - 1]
    assert prev.usage is not None
    output_item = srv.requests[n].input[-2]  # the call's output, before the summary prompt
    estimate = cp.estimate_tokens(len(json.dumps(output_item, separators=(",", ":"))))
    assert first.tokens_before == prev.usage["total_tokens"] + estimate >= limit
    before = srv.requests[n - 2]
    assert before.usage is not None
    assert before.usage["total_tokens"] + estimate < limit


async def test_follow_up_turn_compacts_before_its_prompt(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    script = LongScript(3)

    def serve(req: RecordedRequest, index: int, /) -> Reply:
        if index == 3:  # turn 1 ends with a long answer, which passes the limit
            return reply_message("report " + "r" * 8_000)
        return script(req, index)

    srv = await loopback(serve)
    outcome = await run_long(srv.base_url, tmp_path, limit=4_000, prompts_=("go", "next"))
    assert outcome.status == "completed" and outcome.turns_completed == 2
    pre = [c for c in outcome.compactions if c.reason == "pre-turn"]
    assert len(pre) == len(outcome.compactions) == 1
    req = srv.requests[max(pre[0].requests)]  # the first request of turn 2
    texts = [it.message_text(it.Item(i)) for i in req.input[2:]]
    assert texts[0] == "go" and texts[1].startswith(cp.summary_prefix()) and texts[2] == "next"
    assert_cache_stable(outcome.requests)


async def test_overflowing_compaction_drops_oldest_and_retries(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    script = LongScript(30)

    def serve(req: RecordedRequest, index: int, /) -> Reply:
        if is_summary_request(req) and len(req.input) > 20:
            return reply_failed("context_length_exceeded", "too long")
        return script(req, index)

    srv = await loopback(serve)
    outcome = await run_long(srv.base_url, tmp_path, limit=6_000)
    assert outcome.status == "completed", outcome.error
    first = outcome.compactions[0]
    assert first.dropped_items > 0
    n = first.requests[0] - 1
    summary, refused = srv.requests[n], srv.requests[n - 1]
    attempts = [r for r in srv.requests[:n] if is_summary_request(r)]
    full = attempts[0]
    assert len(attempts) > 1 and all(r.outcome == "failed" for r in attempts)
    assert refused.outcome == "failed" and len(summary.input) <= 20 < len(refused.input)
    # The context stays, the oldest items after it go first, the newest stay; a call is
    # dropped with its output, so every call still has exactly one.
    assert summary.input_raw[:2] == full.input_raw[:2]
    assert summary.input_raw[2:] == full.input_raw[len(full.input) - len(summary.input) + 2 :]
    assert first.dropped_items == len(full.input) - len(summary.input)
    calls = {i["call_id"] for i in summary.input if i["type"] == "function_call"}
    outputs = {i["call_id"] for i in summary.input if i["type"] == "function_call_output"}
    assert calls == outputs
    # The refused attempts are in the record, with the server's reason.
    assert [r.error is not None for r in outcome.requests[n - len(attempts) + 1 : n + 1]] == [
        True
    ] * (len(attempts) - 1) + [False]
    # The user's task survives in the rebuilt history even though the request dropped it.
    after = srv.requests[max(first.requests)]
    assert it.message_text(it.Item(after.input[2])) == "go"
    assert_cache_stable(outcome.requests[n + 1 :])


async def test_context_exceeded_compacts_once_and_retries(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    script = LongScript(5)
    failed: list[int] = []

    def serve(req: RecordedRequest, index: int, /) -> Reply:
        if index == 3 and not failed:
            failed.append(index)
            return reply_http_error(
                400,
                {
                    "error": {
                        "message": "Your input exceeds the context window of this model.",
                        "type": "invalid_request_error",
                        "code": "context_length_exceeded",
                    }
                },
            )
        return script(req, index)

    srv = await loopback(serve)
    outcome = await run_long(srv.base_url, tmp_path, limit=None)
    assert outcome.status == "completed", outcome.error
    assert [c.reason for c in outcome.compactions] == ["context_length_exceeded"]
    # The refused request, then the summary request extending it, then the retry.
    assert is_summary_request(srv.requests[4])
    assert srv.requests[4].input_raw[:-1] == srv.requests[3].input_raw
    assert not is_summary_request(srv.requests[5])
    assert len(srv.requests[5].input) < len(srv.requests[3].input)
    assert_cache_stable(outcome.requests)


async def test_context_exceeded_twice_fails_the_run(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    script = LongScript(5)

    def serve(req: RecordedRequest, index: int, /) -> Reply:
        if index >= 3 and not is_summary_request(req):
            return reply_failed("context_length_exceeded", "still too long")
        return script(req, index)

    srv = await loopback(serve)
    sink = ListSink()
    outcome = await run_long(srv.base_url, tmp_path, limit=None, sink=sink)
    assert outcome.status == "failed"
    assert outcome.error is not None and "exceeded again right after a compaction" in outcome.error
    assert len(outcome.compactions) == 1
    assert len(srv.requests) == 6  # 3 fine, the refused one, the summary, the refused retry
    assert sink.events[-1]["type"] == "turn.failed"


async def test_nothing_fits_fails_clearly(loopback: LoopbackFactory, tmp_path: Path) -> None:
    def serve(req: RecordedRequest, index: int, /) -> Reply:
        if index >= 2:
            return reply_failed("context_length_exceeded", "never fits")
        return (
            LongScript(5)(req, index)
            if index == 0
            else reply_function_call("shell", {"command": ["true"]}, call_id=f"x{index}")
        )

    srv = await loopback(serve)
    outcome = await run_long(srv.base_url, tmp_path, limit=None)
    assert outcome.status == "failed"
    assert outcome.error is not None and "compaction failed" in outcome.error
    assert "does not fit" in outcome.error


# --- remote compaction ------------------------------------------------------------------


def compacted(body: dict[str, Any]) -> tuple[int, Any]:
    """What the real endpoint returns: the user's messages, one opaque compaction item, and
    (to be dropped by the client) a developer message."""
    users = [i for i in body["input"] if i.get("role") == "user"]
    return 200, {
        "id": "cmp_1",
        "object": "response.compaction",
        "output": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "stale context"}],
            },
            *users,
            {"id": "cmp_item_1", "type": "compaction", "encrypted_content": "gAAAA-opaque"},
        ],
        "usage": {
            "input_tokens": 900,
            "input_tokens_details": {"cached_tokens": 800},
            "output_tokens": 50,
            "total_tokens": 950,
        },
    }


async def test_remote_compaction(tmp_path: Path) -> None:
    script = LongScript(40)
    async with CompactingServer(script, compacted) as srv:
        outcome = await run_long(srv.base_url, tmp_path, limit=6_000, remote=True)
    assert outcome.status == "completed", outcome.error
    assert outcome.compactions and all(c.kind == "remote" for c in outcome.compactions)
    assert script.summaries == 0
    first = srv.compact_requests[0]
    body = first.json
    assert list(body) == ["model", "input", "instructions", "tools", "parallel_tool_calls"]
    assert first.header("session_id") == "long-1"
    # It carries the thread's exact prefix: the previous request plus what came since.
    prev = srv.requests[outcome.compactions[0].requests[0] - 2]
    assert body["instructions"] == prev.instructions and body["tools"] == prev.tools
    assert body["input"][: len(prev.input)] == prev.input
    # The next request: our context, the user's message, the compaction item sent back
    # as the server gave it (without id); the developer message it returned is dropped.
    nxt = srv.requests[outcome.compactions[0].requests[0] - 1]
    assert [i.get("role") or i["type"] for i in nxt.input[:4]] == [
        "developer",
        "user",
        "user",
        "compaction",
    ]
    assert nxt.input[0] == prev.input[0] and nxt.input[1] == prev.input[1]
    assert nxt.input[3] == {
        "id": "cmp_item_1",
        "type": "compaction",
        "encrypted_content": "gAAAA-opaque",
    }
    # The endpoint's usage counts like any request's.
    rec = outcome.requests[outcome.compactions[0].requests[0] - 1]
    assert rec.kind == "compaction" and rec.usage == Usage(900, 800, 50, 0, 950)
    # (The scripted endpoint's usage is made up, so only the turns are held to the cache.)
    assert_cache_stable([r for r in outcome.requests if r.kind == "turn"])


async def test_remote_failure_falls_back_to_local(tmp_path: Path) -> None:
    script = LongScript(30)
    async with CompactingServer(
        script,
        lambda body: (503, {"error": {"message": "down", "type": "server_error", "code": None}}),
    ) as srv:
        outcome = await run_long(srv.base_url, tmp_path, limit=6_000, remote=True)
    assert outcome.status == "completed", outcome.error
    first = outcome.compactions[0]
    assert first.kind == "local" and first.fallback is not None and "503" in first.fallback
    assert srv.compact_requests and script.summaries == len(outcome.compactions)


# --- the pieces -------------------------------------------------------------------------


def test_token_counter_is_server_count_plus_estimate() -> None:
    counter = cp.TokenCounter(head=400)
    history = [it.message("user", "x" * 396)]
    counter.reset(history)
    assert counter.count(history) == cp.estimate_tokens(400 + history[0].nbytes)
    history.append(
        it.Item({"type": "function_call", "call_id": "c", "name": "shell", "arguments": "{}"})
    )
    counter.observe(Usage(input_tokens=150, output_tokens=10, total_tokens=160), history)
    assert counter.count(history) == 160
    out = it.function_call_output("c", "y" * 1000)
    history.append(out)
    assert counter.count(history) == 160 + cp.estimate_tokens(out.nbytes)
    counter.observe(None, history)  # no usage: an estimate of everything
    assert counter.count(history) == cp.estimate_tokens(400 + sum(i.nbytes for i in history))


def test_kept_user_messages_newest_first_within_budget() -> None:
    ctx = context_items(Path("/w"))
    users = [it.message("user", f"message {n} " + "z" * 380) for n in range(5)]
    history = [
        *ctx,
        users[0],
        it.message("assistant", "ok"),
        *users[1:],
        cp.summary_message("old summary"),
    ]
    per = cp.estimate_tokens(users[0].nbytes)
    kept = cp.kept_user_messages(history, per * 2 + per // 2)
    assert [it.message_text(m)[:9] for m in kept] == ["message 2", "message 3", "message 4"]
    assert it.message_text(kept[0]).endswith(cp.TRUNCATED)
    assert cp.estimate_tokens(sum(m.nbytes for m in kept)) <= per * 2 + per // 2 + 40
    assert kept[1:] == users[3:]
    # Context messages and earlier summaries are never "user messages".
    assert cp.kept_user_messages(history, 10**6) == users


def test_rebuild_has_one_shape() -> None:
    ctx = context_items(Path("/w"))
    history = [*ctx, it.message("user", "task"), it.message("assistant", "working")]
    a = cp.rebuild_local(ctx, history, "first")
    b = cp.rebuild_local(ctx, [*a, it.message("assistant", "more")], "second")
    assert [i.wire for i in a[:3]] == [i.wire for i in b[:3]]
    assert len(a) == len(b) == 4
    assert cp.summary_text([it.message("assistant", "  ")]) == cp.NO_SUMMARY
    assert cp.summary_text([it.message("assistant", "a"), it.message("assistant", " b ")]) == "b"


def test_drop_oldest_keeps_calls_paired() -> None:
    ctx = [it.message("developer", "d")]
    call = it.Item({"type": "function_call", "call_id": "a", "name": "shell", "arguments": "{}"})
    items = [*ctx, call, it.function_call_output("a", "1"), it.message("user", "u")]
    once = cp.drop_oldest(items, keep=1)
    assert once == [ctx[0], items[3]]
    assert cp.drop_oldest(once, keep=1) == ctx
    assert cp.drop_oldest(ctx, keep=1) is None


def test_cache_check_fails_on_a_break() -> None:
    report = {
        "runs": [
            {
                "run": "t",
                "requests": [
                    {
                        "index": 1,
                        "prefix": {"extends_previous": True, "ideal_cache_ratio": None},
                        "usage": {"input_tokens": 100, "cached_tokens": 0},
                    },
                    {
                        "index": 2,
                        "prefix": {
                            "extends_previous": False,
                            "break_index": 3,
                            "break_reason": "item 3 rewritten (function_call)",
                            "ideal_cache_ratio": 0.2,
                        },
                        "usage": {"input_tokens": 100, "cached_tokens": 20},
                    },
                    {
                        "index": 3,
                        "prefix": {"extends_previous": True, "ideal_cache_ratio": 0.9},
                        "usage": {"input_tokens": 100, "cached_tokens": 60},
                    },
                    {
                        "index": 4,
                        "prefix": {
                            "extends_previous": False,
                            "break_index": 2,
                            "break_reason": "compaction",
                            "ideal_cache_ratio": 0.5,
                        },
                        "usage": {"input_tokens": 100, "cached_tokens": 10},
                    },
                ],
            }
        ]
    }
    problems = cache_problems(report)
    assert problems == [
        "t request 2 breaks the prefix at item 3: item 3 rewritten (function_call)",
        "t request 3: cached 60 of an ideal 90 tokens (cached/ideal 0.667)",
    ]
    assert cache_problems(report, exact_cache=False) == problems[:1]
    with pytest.raises(AssertionError, match="request 2 breaks"):
        assert_cache_stable(report)


# --- through the command line ------------------------------------------------------------


def test_runner_run_compacts_and_reports_it(loopback_thread: Any, tmp_path: Path) -> None:
    """`runner run` with `auto_compact_limit` and a `compact_prompt_file` from the task
    file: the report lists each compaction, marks its requests, and still holds the cache
    check; the event log has the compaction events."""

    from tests.support.fixtures import make_git_repo
    from tests.support.loopback import per_conversation

    script = LongScript(40)
    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(tmp_path / "repo")
    (tmp_path / "handoff.md").write_text("Summarise for the next shift.\n")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}'}}}}\n"
        "defaults:\n"
        "  model: fake/m\n"
        "  tools: [shell]\n"
        "  auto_compact_limit: 3000\n"
        "  compact_prompt_file: handoff.md\n"
        "  limits: {max_requests: 100}\n"
        "tasks:\n"
        f"  - {{id: long, prompt: go, repo: {repo}}}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    task = report["runs"][0]
    assert task["status"] == "completed" and task["tool_calls"] == 40
    comps = task["compactions"]
    assert len(comps) >= 2 and all(c["kind"] == "local" for c in comps)
    assert all(c["tokens_before"] >= 3000 > c["tokens_after"] for c in comps)
    kinds = [r["kind"] for r in task["requests"]]
    assert kinds.count("compaction") == len(comps) == script.summaries
    assert script.asks == ["Summarise for the next shift."] * len(comps)  # the file's text
    for c in comps:
        (n,) = c["requests"]
        assert task["requests"][n - 1]["kind"] == "compaction"
        assert task["requests"][n]["prefix"]["break_reason"] == "compaction"
    assert task["prefix_breaks"] == len(comps)
    assert_cache_stable(report)
    # The run's ideal share is token-weighted over its requests, and the totals add up.
    usage = task["usage"]
    assert usage["ideal_cached_tokens"] == sum(
        r["usage"]["ideal_cached_tokens"] for r in task["requests"]
    )
    assert usage["ideal_cache_ratio"] == round(
        usage["ideal_cached_tokens"] / usage["input_tokens"], 4
    )
    assert abs(usage["cache_hit_ratio"] - usage["ideal_cache_ratio"]) < 0.01
    assert report["totals"]["usage"]["ideal_cached_tokens"] == usage["ideal_cached_tokens"]
    # The task's own summary request was sent.
    summary_reqs = [r for r in srv.requests if is_summary_request(r)]
    assert all(
        r.input[-1]["content"][0]["text"] == "Summarise for the next shift." for r in summary_reqs
    )
    events = [json.loads(line) for line in (out / task["events_file"]).read_text().splitlines()]
    assert len([e for e in events if e["type"] == "compaction.completed"]) == len(comps)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_long_yaml_compacts_on_the_embedded_model(tmp_path: Path) -> None:
    """`configs/long.yaml` on the real embedded model: through a compaction to a final
    message, with the summary request served from the engine's KV cache."""
    import shutil

    from tests.support.fixtures import make_git_repo

    root = Path(__file__).resolve().parent.parent
    sample = root / "examples" / "sample-repo"
    make_git_repo(
        tmp_path / "build" / "sample-repo",
        {p.name: p.read_text() for p in sample.iterdir() if p.is_file()},
    )
    shutil.copytree(root / "configs", tmp_path / "configs")
    out = tmp_path / "out"
    res = run_cli("run", tmp_path / "configs" / "long.yaml", "--out", out)
    assert "Traceback" not in res.stderr
    task = json.loads((out / "report.json").read_text())["runs"][0]
    assert task["status"] == "completed", (task["error"], res.stderr)
    assert task["final_message"]
    assert len(task["compactions"]) >= 1
    for c in task["compactions"]:
        assert c["kind"] == "local" and c["tokens_before"] >= 1200 > c["tokens_after"]
        summary = task["requests"][c["requests"][0] - 1]
        assert summary["kind"] == "compaction" and summary["prefix"]["extends_previous"]
        # A real number from llama.cpp's KV cache: the summary request repeats the thread.
        assert summary["usage"]["cached_tokens"] >= 0.8 * summary["usage"]["input_tokens"]
    assert_cache_stable(task, exact_cache=False)


async def test_limit_below_the_context_compacts_only_after_new_work(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    """A limit the context alone passes: no compaction before the first request, and never
    two without a model answer in between (Codex was seen compacting 48 times in a row)."""
    script = LongScript(3)
    srv = await loopback(script)
    outcome = await run_long(srv.base_url, tmp_path, limit=128, prompts_=("go", "again"))
    assert outcome.status == "completed", outcome.error
    assert outcome.requests[0].kind == "turn"
    kinds = [r.kind for r in outcome.requests]
    assert "compaction" in kinds
    assert all(not (a == b == "compaction") for a, b in zip(kinds, kinds[1:], strict=False))
    assert all(kinds[i - 1] == "turn" for i, k in enumerate(kinds) if k == "compaction")
    assert len(outcome.compactions) == kinds.count("compaction") == script.summaries
