"""Hostile input: event streams, tool arguments, tool output and task files that are broken,
huge or binary. Every one ends in a clear outcome (a status, an error message to the model,
a located problem) with bounded memory, never a crash. Property tests (hypothesis) cover
the SSE decoder, the apply_patch parser and the task-file loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runner.agent import Outcome, Thread, ThreadSpec
from runner.errors import ConfigError, ModelError
from runner.providers.refusals import stream_error
from runner.providers.responses import ResponsesClient
from runner.providers.retry import RetryingClient
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.sse import Assembler, Framer
from runner.tools import ToolContext
from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.patch_format import (
    AddFile,
    Chunk,
    DeleteFile,
    Hunk,
    Patch,
    UpdateFile,
    parse_patch,
)
from runner.tools.shell import ShellTool
from tests.support.cli import write_tasks
from tests.support.fixtures import LoopbackFactory, ThreadFactory
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    function_call_item,
    per_conversation,
    reply_items,
    reply_message,
    reply_sse_bytes,
)

FAST = settings(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


class Sink:
    """Serialises every event the way the event log does, so an unwritable one fails."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        json.dumps(event, ensure_ascii=False).encode()
        self.events.append(event)


async def run_thread(
    base_url: str, tmp_path: Path, *, prompts: tuple[str, ...] = ("go",), tools: bool = False
) -> Outcome:
    client = RetryingClient(ResponsesClient(base_url, stream_idle_timeout_s=5), base_delay_s=0.001)
    spec = ThreadSpec(
        thread_id="t",
        model="m",
        instructions="i",
        context=[],
        prompts=prompts,
        max_requests=8,
        timeout_s=60,
    )
    ctx = ToolContext(
        environment=LocalEnvironment(LocalExecutor(), tmp_path),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    toolset = [ShellTool(), ApplyPatchTool()] if tools else []
    try:
        return await Thread(spec, client, toolset, ctx, Sink()).run()
    finally:
        await client.aclose()


def sse(*events: dict[str, Any] | bytes) -> bytes:
    """An event stream; bytes are sent as they are (malformed parts)."""
    out = b""
    for ev in events:
        if isinstance(ev, bytes):
            out += ev
        else:
            out += f"event: {ev['type']}\ndata: {json.dumps(ev)}\n\n".encode()
    return out


ITEM = {
    "type": "message",
    "id": "m1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
}
DONE = {
    "type": "response.completed",
    "response": {"id": "r1", "usage": {"input_tokens": 3, "output_tokens": 1}},
}
GOOD = sse({"type": "response.output_item.done", "item": ITEM}, DONE)


# ------------------------------------------------------------------ event streams


@pytest.mark.anyio
async def test_malformed_but_harmless_lines_are_skipped(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    body = (
        b": a comment\n\nline without a colon\nid: 7\nretry: soon\n\n\n"
        b"event: response.created\r\ndata:"
        + json.dumps({"type": "response.created", "response": {"id": "r1"}}).encode()
        + b"\r\n\r\n"
        + sse(
            {"type": "response.something_new", "x": 1},
            {"type": "not.even.a.response.event"},
            {"type": 5, "x": []},
        )
        + b"event: only-a-name\n\n"
        + b'data: {"type": "response.output_item.done",\rdata: "item": '
        + json.dumps(ITEM).encode()
        + b"}\r\r"
        + sse(DONE)
    )
    srv = await loopback([reply_sse_bytes(body)])
    outcome = await run_thread(srv.base_url, tmp_path)
    assert (outcome.status, outcome.final_message) == ("completed", "ok")
    assert len(srv.requests) == 1


BROKEN = {
    "invalid JSON": sse({"type": "response.created"}) + b'data: {"type": "resp\n\n',
    "not an object": b"data: [1, 2, 3]\n\n",
    # Deeper than the parser recurses, yet cheap enough for the parse check to try it.
    "deeply nested": b"data: " + b"[" * 20_000 + b"\n\n",
    "binary garbage": os.urandom(64 * 1024).replace(b"data", b"dat"),
    "NUL and invalid UTF-8": b'data: {"type": "response.output_text.delta", '
    b'"delta": "\xff\xfe\x00\xc3\x28"}\n\n\x00\xff\n\n',
    "ends early": sse({"type": "response.output_item.done", "item": ITEM}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", BROKEN)
async def test_broken_streams_are_resent_then_fail_clearly(
    loopback: LoopbackFactory, tmp_path: Path, kind: str
) -> None:
    srv = await loopback([reply_sse_bytes(BROKEN[kind]), reply_sse_bytes(GOOD)])
    outcome = await run_thread(srv.base_url, tmp_path)
    assert (outcome.status, len(srv.requests)) == ("completed", 2)
    srv = await loopback([reply_sse_bytes(BROKEN[kind])] * 6)
    outcome = await run_thread(srv.base_url, tmp_path)
    assert (outcome.status, len(srv.requests)) == ("error", 6)
    assert outcome.error is not None and outcome.error.startswith("model error: ")


@pytest.mark.anyio
async def test_lone_surrogates_are_made_writable(loopback: LoopbackFactory, tmp_path: Path) -> None:
    """`\\ud800` is valid JSON but cannot be encoded: such text is repaired, so the event
    log can write it and the next request can send it back."""
    item = {**ITEM, "content": [{"type": "output_text", "text": "a\ud800b", "annotations": []}]}
    body = sse(
        {"type": "response.output_text.delta", "delta": "\udc00"},
        {"type": "response.output_item.done", "item": item},
        DONE,
    )
    srv = await loopback([reply_sse_bytes(body), reply_message("second")])
    outcome = await run_thread(srv.base_url, tmp_path, prompts=("one", "two"))
    assert (outcome.status, outcome.final_message) == ("completed", "second")
    assert "a\ufffdb" in srv.requests[1].raw.decode() or "a?b" in srv.requests[1].raw.decode()


def test_framer_bounds_one_event() -> None:
    framer = Framer(max_event_bytes=1000)
    assert framer.feed(b"data: " + b"x" * 900 + b"\n\n") == [("", "x" * 900)]
    with pytest.raises(ModelError, match="larger than 1000 bytes"):
        for _ in range(100):
            framer.feed(b"data: " + b"y" * 100 + b"\n")  # many lines, one event
    framer = Framer(max_event_bytes=1000)
    with pytest.raises(ModelError, match="larger than 1000 bytes"):
        for _ in range(100):
            framer.feed(b"z" * 100)  # one endless line


# getrusage's ru_maxrss survives exec: a child forked from this (large) test process
# starts with the parent's high-water mark. VmHWM belongs to the new address space.
RSS_PROBE = """import sys
from runner.cli import main
code = main(sys.argv[1:])
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM"))
sys.stderr.write(f"peak-rss-kb {hwm.split()[1]}\\n")
sys.exit(code)
"""


def runner_rss(tasks: Path, out: Path) -> tuple[int, float, str]:
    """`runner run` in a child; its exit code, its own peak RSS in MB (not its commands')
    and its stderr."""
    env = {**os.environ, "FAKE_API_KEY": "sk-test-0123456789"}
    res = subprocess.run(
        [sys.executable, "-c", RSS_PROBE, "run", str(tasks), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    peak = int(res.stderr.rsplit("peak-rss-kb ", 1)[1].split()[0])
    return res.returncode, peak / 1024, res.stderr


def shell_call(cmd: str) -> Reply:
    return reply_items([function_call_item("shell", {"command": ["bash", "-c", cmd]}, "c1")])


@pytest.mark.slow
def test_huge_event_and_huge_output_in_bounded_memory(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A 50 MB delta ends its run at the event cap (`size_limit`, "larger than 9 MiB":
    max_item_bytes plus 1 MiB); 1 GB of command output
    passes through the shell tool. Neither raises the runner's peak RSS by more than a
    few tens of MB over a plain run."""
    huge = sse({"type": "response.output_text.delta", "delta": "x" * (50 * 1024 * 1024)})

    def script(req: RecordedRequest, i: int) -> Reply:
        task = req.input[-1]["content"][0]["text"] if i == 0 else ""
        if "huge event" in json.dumps(req.input):
            return reply_sse_bytes(huge)
        if i == 0:
            return shell_call("yes | head -c 1G" if "gigabyte" in task else "echo small")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    numbers = {}
    for name in ("plain", "gigabyte", "huge event"):
        d = tmp_path / name.replace(" ", "-")
        tasks = write_tasks(
            d, srv.base_url, f"  - {{id: t, prompt: '{name}', sandbox: danger-full-access}}\n"
        )
        code, rss, err = runner_rss(tasks, d / "out")
        report = json.loads((d / "out" / "report.json").read_text())["runs"][0]
        numbers[name] = (code, round(rss), report["status"], report["error"])
        assert "Traceback" not in err
    print(f"peak RSS of `runner run` (code, MB, status, error): {numbers}")
    assert numbers["plain"][:1] == (0,) and numbers["gigabyte"][0] == 0
    assert numbers["huge event"][2] == "size_limit"
    assert "larger than 9 MiB" in numbers["huge event"][3]
    base = numbers["plain"][1]
    assert numbers["gigabyte"][1] < base + 20
    assert numbers["huge event"][1] < base + 40  # the 9 MiB cap, not 50 MB


# ------------------------------------------------------------------ tool calls

HOSTILE_CALLS: list[tuple[str, str | dict[str, Any], str]] = [
    ("shell", "{not json", "not valid JSON"),
    ("shell", "[1, 2]", "must be a JSON object"),
    ("shell", "null", "must be a JSON object"),
    ("shell", {"command": 5}, "non-empty array of strings"),
    ("shell", {"command": ["echo", 5]}, "non-empty array of strings"),
    ("shell", {"command": []}, "non-empty array of strings"),
    ("shell", {"command": ["echo", "a\u0000b"]}, "NUL"),
    ("shell", {"command": ["echo", "hi"], "timeout_ms": "soon"}, "positive number"),
    ("shell", {"command": ["echo", "hi"], "timeout_ms": -1}, "positive number"),
    ("shell", '{"command": ["echo", "hi"], "timeout_ms": NaN}', "positive number"),
    ("shell", {"command": ["echo", "hi"], "workdir": 7}, "must be a string"),
    ("shell", {"command": ["echo", "x" * 1_000_000]}, "Argument list too long"),
    ("shell", {"command": ["no-such-program-xyz"]}, "no-such-program-xyz"),
    ("apply_patch", {"input": 5}, "a string field 'input'"),
    ("apply_patch", {"input": "x" * 1_000_000}, "invalid patch"),
    ("apply_patch", "", "not valid JSON"),
    ("no_such_tool", {"a": 1}, "unknown tool"),
]


@pytest.mark.anyio
async def test_hostile_tool_arguments_become_messages(
    loopback: LoopbackFactory, tmp_path: Path
) -> None:
    calls = [
        function_call_item(name, args, f"c{n}") for n, (name, args, _) in enumerate(HOSTILE_CALLS)
    ]
    calls.append(
        {
            "type": "function_call",
            "status": "completed",
            "call_id": "raw",
            "name": "shell",
            "arguments": {"command": ["echo"]},
        }
    )  # not a string
    # Whole arguments in one delta: 16-character deltas of 2 MB would only time httpx.
    srv = await loopback([reply_items(calls).but(delta_chars=2_000_000), reply_message("done")])
    outcome = await run_thread(srv.base_url, tmp_path, tools=True)
    assert (outcome.status, outcome.final_message) == ("completed", "done")
    outputs = srv.requests[1].call_outputs()  # the server checked the pairing
    assert len(outputs) == len(calls)
    for n, (_, _, words) in enumerate(HOSTILE_CALLS):
        assert isinstance(outputs[f"c{n}"], str)
        assert words in outputs[f"c{n}"], (n, outputs[f"c{n}"][:300])
    assert max(len(o) for o in outputs.values()) < 12_000  # a 1 MB argument not echoed


@pytest.mark.anyio
async def test_binary_and_invalid_utf8_output(loopback: LoopbackFactory, tmp_path: Path) -> None:
    cmds = [
        "head -c 300000 /dev/urandom",
        "printf 'a\\xff\\xfe\\xc3\\x28\\x00end'",
        "printf '\\x1b[31mred\\x1b[0m\\r\\n'",
    ]
    calls = [
        function_call_item("shell", {"command": ["bash", "-c", c]}, f"c{n}")
        for n, c in enumerate(cmds)
    ]
    srv = await loopback([reply_items(calls), reply_message("done")])
    outcome = await run_thread(srv.base_url, tmp_path, tools=True)
    assert outcome.status == "completed"
    out = srv.requests[1].call_outputs()
    assert "truncated" in out["c0"] and len(out["c0"]) < 40_000
    assert "end" in out["c1"] and "\ufffd" in out["c1"]
    assert "red" in out["c2"]


# ------------------------------------------------------------------ property tests


@FAST
@given(st.lists(st.binary(max_size=300), max_size=30))
def test_decoder_raises_only_model_errors(chunks: list[bytes]) -> None:
    framer, asm = Framer(max_event_bytes=2000), Assembler(stream_error)
    try:
        for chunk in chunks:
            for name, data in framer.feed(chunk):
                asm.feed(name, data)
    except ModelError:
        pass


EVENT_TYPES = [
    "response.created",
    "response.output_item.added",
    "response.output_item.done",
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.completed",
    "response.failed",
    "response.incomplete",
    "error",
    "response.in_progress",
    "something.else",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
events = st.fixed_dictionaries(
    {"type": st.sampled_from(EVENT_TYPES) | st.text(max_size=10)},
    optional={
        "item": json_values | st.fixed_dictionaries({"type": st.text(max_size=10)}),
        "response": json_values
        | st.fixed_dictionaries(
            {
                "id": json_values,
                "usage": json_values,
                "error": json_values,
                "incomplete_details": json_values,
            }
        ),
        "delta": json_values,
        "error": json_values,
    },
)


@FAST
@given(st.lists(events, max_size=12), st.data())
def test_any_event_sequence_gives_a_response_or_our_error(
    evs: list[dict[str, Any]], data: st.DataObject
) -> None:
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in evs)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    whole, split = Framer(), Framer()
    framed = whole.feed(body)
    assert [e for p in pieces for e in split.feed(p)] == framed  # framing ignores chunking
    asm = Assembler(stream_error)
    try:
        for name, text in framed:
            asm.feed(name, text)
    except ModelError:
        return
    for item in asm.items:
        item.wire.encode()  # sendable as it is


line_text = st.text(
    st.characters(blacklist_characters="\n\r", blacklist_categories=("Cs",)), max_size=12
)
paths = st.from_regex(r"[a-z][a-z0-9_]{0,6}(/[a-z0-9_.]{1,6}){0,2}", fullmatch=True)


@st.composite
def chunks(draw: st.DrawFn) -> Chunk:
    ops = draw(st.lists(st.tuples(st.sampled_from(" -+"), line_text), min_size=1, max_size=5))
    ctx = draw(st.none() | line_text)
    return Chunk(
        ctx,
        [t for op, t in ops if op in " -"],
        [t for op, t in ops if op in " +"],
        draw(st.booleans()),
    )


@st.composite
def hunks(draw: st.DrawFn) -> Hunk:
    kind = draw(st.sampled_from(["add", "delete", "update"]))
    path = draw(paths)
    if kind == "add":
        return AddFile(path, "".join(f"{t}\n" for t in draw(st.lists(line_text, max_size=4))))
    if kind == "delete":
        return DeleteFile(path)
    move = draw(st.none() | paths)
    body = draw(st.lists(chunks(), min_size=0 if move else 1, max_size=3))
    return UpdateFile(path, move, body)


def render(patch: Patch) -> str:
    out = ["*** Begin Patch"]
    for h in patch.hunks:
        if isinstance(h, AddFile):
            out.append(f"*** Add File: {h.path}")
            out += [f"+{line}" for line in h.contents.split("\n")[:-1]]
        elif isinstance(h, DeleteFile):
            out.append(f"*** Delete File: {h.path}")
        else:
            out.append(f"*** Update File: {h.path}")
            if h.move_to:
                out.append(f"*** Move to: {h.move_to}")
            for c in h.chunks:
                out.append("@@" if c.change_context is None else f"@@ {c.change_context}")
                out += diff_lines(c)
                if c.is_end_of_file:
                    out.append("*** End of File")
    return "\n".join([*out, "*** End Patch"]) + "\n"


def diff_lines(c: Chunk) -> list[str]:
    """Lines whose ' '/'-'/'+' reading gives back exactly `old_lines` and `new_lines`."""
    return [f"-{t}" for t in c.old_lines] + [f"+{t}" for t in c.new_lines]


@FAST
@given(st.lists(hunks(), min_size=1, max_size=4))
def test_apply_patch_round_trip(hs: list[Hunk]) -> None:
    patch = Patch(hs)
    assert parse_patch(render(patch)) == patch


yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.floats(),
    st.sampled_from(
        ["MY_TOKEN", "1BAD", "", "a b", "p/m", "local/x", "http://127.0.0.1:9/v1", ".", "nope"]
    ),
    st.text(max_size=6),
)
field_values = st.recursive(
    yaml_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=8,
)
provider = st.fixed_dictionaries(
    {"base_url": st.sampled_from(["http://127.0.0.1:9/v1", "ftp://x"]) | yaml_scalars},
    optional={
        k: field_values | yaml_scalars
        for k in (
            "env_key",
            "request_max_retries",
            "stream_max_retries",
            "max_retry_wait_s",
            "stream_idle_timeout_s",
            "request_timeout_s",
            "wire_api",
            "store",
        )
    },
)
task_files = st.fixed_dictionaries(
    {
        "version": st.just(1) | yaml_scalars,
        "tasks": st.lists(
            st.fixed_dictionaries(
                {
                    "id": st.sampled_from(["a", "b"]) | yaml_scalars,
                    "prompt": st.just("p") | yaml_scalars,
                },
                optional={
                    "model": st.sampled_from(["p/m", "local/smollm2", "q/m"]) | yaml_scalars,
                    "repo": st.sampled_from([".", "missing"]) | yaml_scalars,
                    "limits": field_values,
                    "git": field_values,
                },
            ),
            max_size=3,
        ),
    },
    optional={
        "secrets": st.lists(yaml_scalars, max_size=3) | yaml_scalars,
        "providers": st.dictionaries(
            st.sampled_from(["p", "bad name", "openai"]), provider, max_size=2
        ),
        "matrix": field_values,
        "defaults": field_values,
    },
)


@settings(FAST, max_examples=150)
@given(task_files)
def test_task_file_loader_gives_runs_or_located_problems(data: dict[str, Any]) -> None:
    """Through everything `runner validate` does: parse, resolve paths and providers,
    expand the matrix."""
    import yaml

    from runner.config import expand, load_task_file

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "tasks.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
        try:
            runs = expand(load_task_file(path), Path(d), file=str(path))
        except ConfigError as exc:
            assert exc.problems
            for p in exc.problems:
                assert p.field and p.message.strip(), p
            return
    assert runs and all(r.secrets == tuple(data.get("secrets", ())) for r in runs)
