"""Per-model settings reach the request body exactly, through `runner run` as a subprocess.

`model_options` from `defaults`, a `models:` alias entry and a task are merged (task over
alias over defaults) and sent as Codex sends them: `reasoning: {effort, summary}`,
`include: ["reasoning.encrypted_content"]` only when `reasoning` is sent (DESIGN.md, wire
table of codex-agent-loop.md), `text.verbosity`, `parallel_tool_calls`, and the sampling
fields after the standard ones. The Chat wire gets the same settings under its own names.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_file, write_task_file
from tests.support.loopback import reply_message

ROOT = Path(__file__).resolve().parents[2]


def test_every_option_reaches_the_responses_body(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread([reply_message("ok")])
    tasks = write_task_file(
        tmp_path / "t.yaml",
        srv.base_url,
        git_repo,
        """\
defaults:
  model: fake/m
  model_options:
    reasoning_effort: high
    reasoning_summary: detailed
    verbosity: low
    parallel_tool_calls: true
    temperature: 0.3
    top_p: 0.9
    max_output_tokens: 500
tasks:
  - {id: a, repo: "REPO", prompt: say ok}
""",
    )
    res = run_file(tasks, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    (req,) = srv.requests
    body = req.json
    assert body["model"] == "m"
    assert body["reasoning"] == {"effort": "high", "summary": "detailed"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["parallel_tool_calls"] is True
    assert body["text"] == {"verbosity": "low"}
    assert (body["temperature"], body["top_p"], body["max_output_tokens"]) == (0.3, 0.9, 500)
    # Codex's order: the standard fields first, sampling fields last.
    assert list(body)[-3:] == ["temperature", "top_p", "max_output_tokens"]
    assert list(body).index("reasoning") < list(body).index("include")


def test_without_reasoning_nothing_is_included(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread([reply_message("ok")])
    tasks = write_task_file(
        tmp_path / "t.yaml",
        srv.base_url,
        git_repo,
        """\
defaults: {model: fake/m, model_options: {reasoning_summary: detailed}}
tasks:
  - {id: a, repo: "REPO", prompt: say ok}
""",
    )
    res = run_file(tasks, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    body = srv.requests[0].json
    assert "reasoning" not in body and body["include"] == []
    assert body["parallel_tool_calls"] is False and "text" not in body
    assert not {"temperature", "top_p", "seed", "max_output_tokens"} & set(body)


def test_alias_entries_send_their_model_and_options(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    """Two aliases of one model in a matrix: each run sends the real name and its own
    options merged over the defaults; a task's own options win over the alias."""
    srv = loopback_thread([reply_message("ok")] * 3)
    tasks = write_task_file(
        tmp_path / "t.yaml",
        srv.base_url,
        git_repo,
        """\
models:
  fake/warm: {model: m, model_options: {temperature: 0.9, reasoning_effort: low}}
  fake/cold: {model: m, model_options: {temperature: 0.0, verbosity: high}}
defaults: {model_options: {top_p: 0.7, temperature: 0.5}}
matrix: {model: [fake/warm, fake/cold]}
tasks:
  - {id: a, repo: "REPO", prompt: say ok}
""",
    )
    res = run_file(tasks, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    bodies = sorted((r.json for r in srv.requests), key=lambda b: b["temperature"])
    assert len(bodies) == 2
    cold, warm = bodies
    assert (warm["model"], warm["temperature"], warm["top_p"]) == ("m", 0.9, 0.7)
    assert warm["reasoning"] == {"effort": "low"}
    assert warm["include"] == ["reasoning.encrypted_content"] and "text" not in warm
    assert (cold["model"], cold["temperature"], cold["top_p"]) == ("m", 0.0, 0.7)
    assert "reasoning" not in cold and cold["text"] == {"verbosity": "high"}

    srv2 = loopback_thread([reply_message("ok")])
    tasks = write_task_file(
        tmp_path / "t2.yaml",
        srv2.base_url,
        git_repo,
        """\
models:
  fake/warm: {model: m, model_options: {temperature: 0.9, top_p: 0.5}}
tasks:
  - {id: a, repo: "REPO", prompt: say ok, model: fake/warm,
     model_options: {temperature: 0.1}}
""",
    )
    res = run_file(tasks, tmp_path / "out2")
    assert res.returncode == 0, res.stderr
    body = srv2.requests[0].json
    assert (body["model"], body["temperature"], body["top_p"]) == ("m", 0.1, 0.5)


def test_seed_is_refused_on_the_responses_wire(git_repo: Path, tmp_path: Path) -> None:
    """The Responses API has no seed: said at load time with file, line and field."""
    tasks = write_task_file(
        tmp_path / "t.yaml",
        "http://127.0.0.1:9/v1",
        git_repo,
        """defaults:
  model: fake/m
  model_options: {seed: 3}
tasks:
  - {id: a, repo: "REPO", prompt: say ok}
""",
    )
    res = run_file(tasks, tmp_path / "out")
    assert res.returncode == 2
    assert "t.yaml:5: defaults.model_options.seed: the Responses API has no seed" in res.stderr
    assert "Traceback" not in res.stderr


# ---------------------------------------------------------------- the Chat wire


class ChatServer:
    """A minimal `/v1/chat/completions` on 127.0.0.1 that answers every request with a
    streamed "ok" and keeps the request bodies."""

    def __init__(self) -> None:
        bodies: list[dict[str, Any]] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", "0"))
                bodies.append(json.loads(self.rfile.read(size)))
                chunks = [
                    {
                        "id": "c1",
                        "choices": [
                            {"index": 0, "delta": {"content": "ok"}, "finish_reason": None}
                        ],
                    },
                    {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {
                        "id": "c1",
                        "choices": [],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1},
                    },
                ]
                data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.bodies = bodies
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    srv = ChatServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()
    srv.thread.join(5)


def test_options_reach_the_chat_body(
    chat_server: ChatServer, git_repo: Path, tmp_path: Path
) -> None:
    tasks = tmp_path / "t.yaml"
    tasks.write_text(f"""version: 1
providers: {{chatty: {{base_url: "{chat_server.base_url}", wire_api: chat}}}}
models:
  chatty/fast: {{model: m, model_options: {{reasoning_effort: low, seed: 11}}}}
defaults:
  model: chatty/fast
  model_options: {{temperature: 0.2, top_p: 0.8, max_output_tokens: 64,
                  parallel_tool_calls: true}}
tasks:
  - {{id: a, repo: "{git_repo}", prompt: say ok}}
""")
    res = run_file(tasks, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    (body,) = chat_server.bodies
    assert body["model"] == "m" and body["reasoning_effort"] == "low"
    assert (body["temperature"], body["top_p"], body["seed"], body["max_tokens"]) == (
        0.2,
        0.8,
        11,
        64,
    )
    assert body["parallel_tool_calls"] is True and body["tools"]
    assert "max_output_tokens" not in body and "reasoning" not in body
