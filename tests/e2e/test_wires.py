"""The same task through both wires on the embedded engine, calling an MCP tool.

Chat wire: the runner's `ChatClient` straight to llama.cpp's `/v1/chat/completions`
(constrained tool calls). Responses wire: the runner's `ResponsesClient` to a loopback
`/v1/responses` whose script hands each request to the same engine through the chat
conversion and streams the answer back as Responses events, with the engine's own token
counts. llama.cpp's server does have `/v1/responses`, but it ignores `tools`,
`tool_choice` and `text.format` (measured: SmolLM2 answers in prose even with
`tool_choice: "required"`), so this 135M model cannot call a tool through it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.items import Item
from runner.providers import Prompt
from runner.providers.chat import ChatClient
from runner.providers.local import LocalEngine
from tests.support.cli import run_cli
from tests.support.loopback import RecordedRequest, Reply, reply_items

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "providers"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalEngine]:
    with LocalEngine() as eng:
        yield eng


def bridge(engine_url: str) -> Any:
    """A Responses endpoint backed by the engine (see the module docstring)."""

    async def script(req: RecordedRequest, index: int) -> Reply:
        body = req.json
        # The Responses API has no seed: the bridge adds the one the chat half is given.
        extra: dict[str, Any] = {
            k: body[k] for k in ("temperature", "max_output_tokens") if k in body
        }
        extra["seed"] = 42
        prompt = Prompt(
            model=body["model"],
            instructions=body.get("instructions", ""),
            input=[Item(i) for i in body["input"]],
            tools=body["tools"],
            prompt_cache_key=body["prompt_cache_key"],
            tool_choice=body["tool_choice"],
            text=body.get("text"),
            extra=extra,
        )
        client = ChatClient(engine_url, constrained_tools=True)
        try:
            resp = await client.generate(prompt)
        finally:
            await client.aclose()
        u = resp.usage
        assert u is not None
        return reply_items([i.data for i in resp.items]).but(
            usage={
                "input_tokens": u.input_tokens,
                "output_tokens": u.output_tokens,
                "total_tokens": u.total_tokens,
                "input_tokens_details": {"cached_tokens": u.cached_tokens},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
        )

    return script


def test_same_task_on_both_wires_through_an_mcp_tool(
    engine: LocalEngine, loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread(bridge(engine.base_url))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"""version: 1
providers:
  engine: {{base_url: "{engine.base_url}", wire_api: chat, constrained_tools: true}}
  bridge: {{base_url: "{srv.base_url}"}}
models:
  engine/smollm2: {{model_options: {{seed: 42}}}}
defaults:
  tools: []
  instructions_file: {json.dumps(str(CONFIGS / "mcp-instructions.md"))}
  model_options: {{temperature: 0, max_output_tokens: 256}}
  limits: {{max_requests: 4, timeout_s: 240}}
  mcp_servers:
    calc: {{command: [{json.dumps(sys.executable)},
                     {json.dumps(str(CONFIGS / "mcp_calc_server.py"))}],
           startup_timeout_s: 30}}
tasks:
  - id: add
    repo: {json.dumps(str(git_repo))}
    prompt: Call the mcp__calc__add tool to add 19 and 23, then reply with the sum.
""")
    out = tmp_path / "out"
    res = run_cli(
        "run",
        tasks,
        "--out",
        out,
        "--model",
        "engine/smollm2",
        "--model",
        "bridge/smollm2",
        "--concurrency",
        "1",
    )
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    runs = {t["model"]: t for t in report["runs"]}
    assert set(runs) == {"engine/smollm2", "bridge/smollm2"}
    for model, run in runs.items():
        assert run["status"] == "completed", (model, run["error"])
        assert "42" in run["final_message"]
        assert [r["output_types"] for r in run["requests"]] == [["function_call"], ["message"]]
        first, second = (r["usage"] for r in run["requests"])
        assert first["input_tokens"] > 0 and first["output_tokens"] > 0
        # The second request repeats the first and its answer: the engine's KV cache
        # serves that prefix, and both wires report it.
        assert second["cached_tokens"] >= first["input_tokens"] // 2
        events = [json.loads(line) for line in (out / run["events_file"]).read_text().splitlines()]
        calls = [
            e["item"]
            for e in events
            if e["type"] == "item.completed" and e["item"].get("type") == "mcp_tool_call"
        ]
        assert [(c["tool"], c["result"]["structured_content"], c["status"]) for c in calls] == [
            ("add", {"result": 42}, "completed")
        ]
        print(
            f"{model}: "
            + ", ".join(
                f"request {r['index']}: {r['usage']['input_tokens']} in, "
                f"{r['usage']['cached_tokens']} cached, {r['usage']['output_tokens']} out"
                for r in run["requests"]
            )
        )
    # The Responses half really went over the Responses wire, stateless and cache-keyed.
    assert len(srv.requests) == 2
    for req in srv.requests:
        assert req.path == "/v1/responses" and req.json["store"] is False
        assert [t["name"] for t in req.json["tools"]] == ["mcp__calc__add"]
    assert srv.requests[0].json["prompt_cache_key"] == srv.requests[1].json["prompt_cache_key"]
