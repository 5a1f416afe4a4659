"""Requests as Codex 0.169 sends them when the task file says nothing.

Known OpenAI models get Codex's profile (reasoning effort medium with encrypted
reasoning included, verbosity low, parallel tool calls); the task file overrides it
field by field and the report records what was sent. Items go back with their ids and
without null-valued fields; a reasoning item the server could not resolve with `store:
false` is never sent, and encrypted reasoning is asked for as soon as one arrives. Every
body is also checked by the loopback server against the openai SDK's request types.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.models import codex_defaults
from runner.sse import usage_from_responses
from tests.support.cli import run_file as run_cli
from tests.support.cli import write_task_file as write_tasks
from tests.support.loopback import (
    assert_exact_extension,
    function_call_item,
    reasoning,
    reply_items,
    reply_message,
)


def run_one(
    srv: Any, git_repo: Path, tmp_path: Path, model: str, options: str = ""
) -> dict[str, Any]:
    tasks = write_tasks(
        tmp_path / "t.yaml",
        srv.base_url,
        git_repo,
        f"""\
defaults: {{model: "fake/{model}"{options}}}
tasks:
  - {{id: a, repo: "REPO", prompt: say ok}}
""",
    )
    res = run_cli(tasks, tmp_path / "out")
    assert res.returncode == 0, res.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    task: dict[str, Any] = report["runs"][0]
    return task


@pytest.mark.parametrize("model", ["gpt-5", "gpt-5.5", "gpt-5-mini"])
def test_gpt5_gets_codex_defaults(
    loopback_thread: Any, git_repo: Path, tmp_path: Path, model: str
) -> None:
    srv = loopback_thread([reply_message("ok")])
    task = run_one(srv, git_repo, tmp_path, model)
    body = srv.requests[0].json
    assert body["reasoning"] == {"effort": "medium"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["parallel_tool_calls"] is True
    assert body["text"] == {"verbosity": "low"}
    assert body["store"] is False
    assert task["model_options"] == {
        "reasoning_effort": "medium",
        "verbosity": "low",
        "parallel_tool_calls": True,
    }


def test_task_file_overrides_defaults_field_by_field(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread([reply_message("ok")])
    task = run_one(
        srv,
        git_repo,
        tmp_path,
        "gpt-5",
        ", model_options: {reasoning_effort: high, parallel_tool_calls: false}",
    )
    body = srv.requests[0].json
    assert body["reasoning"] == {"effort": "high"}
    assert body["parallel_tool_calls"] is False
    assert body["text"] == {"verbosity": "low"}  # not overridden: still Codex's
    assert task["model_options"]["reasoning_effort"] == "high"


@pytest.mark.parametrize("model", ["gpt-4.1", "qwen3:8b", "smollm2"])
def test_unknown_or_non_reasoning_models_get_nothing(
    loopback_thread: Any, git_repo: Path, tmp_path: Path, model: str
) -> None:
    """Codex sends no reasoning for models it does not know; a local server may refuse it."""
    srv = loopback_thread([reply_message("ok")])
    task = run_one(srv, git_repo, tmp_path, model)
    body = srv.requests[0].json
    assert "reasoning" not in body and "text" not in body
    assert body["include"] == [] and body["parallel_tool_calls"] is False
    assert task["model_options"] == {}


def test_codex_model_variants() -> None:
    assert codex_defaults("gpt-5-codex") == {
        "reasoning_effort": "medium",
        "parallel_tool_calls": True,
    }
    assert codex_defaults("o3") == {"reasoning_effort": "medium"}
    assert codex_defaults("gpt-5.5-pro-x") == {}


def test_reasoning_round_trip_without_asking(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    """A model that reasons by default: its first reasoning item came without encrypted
    content, so it cannot go back with `store: false`; from then on it is asked for."""
    call = function_call_item("shell", {"command": ["true"]}, call_id="c1")
    srv = loopback_thread(
        [
            reply_items([reasoning("rs_1", None, content=None), {**call, "namespace": None}]),
            reply_items(
                [
                    reasoning("rs_2", "gAAAA-two"),
                    function_call_item("shell", {"command": ["true"]}, call_id="c2"),
                ]
            ),
            reply_message("ok"),
        ]
    )
    run_one(srv, git_repo, tmp_path, "qwen3:8b")
    first, second, third = (r.json for r in srv.requests)
    assert first["include"] == [] and "reasoning" not in first
    assert second["include"] == ["reasoning.encrypted_content"]
    assert [i["type"] for i in second["input"][-2:]] == ["function_call", "function_call_output"]
    sent_call = second["input"][-2]
    assert sent_call["id"] == srv.requests[0].output[1]["id"]
    assert "namespace" not in sent_call  # null on the way in, absent on the way back
    assert not any(i.get("id") == "rs_1" for i in third["input"])
    back = next(i for i in third["input"] if i.get("id") == "rs_2")
    assert back["encrypted_content"] == "gAAAA-two"
    assert_exact_extension(srv.requests)


def test_cache_write_tokens_are_read() -> None:
    u = usage_from_responses(
        {
            "input_tokens": 10,
            "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6},
        }
    )
    assert u is not None and u.cache_write_tokens == 6
    assert (u + u).as_dict()["cache_write_tokens"] == 12


def sdk_stream(n: int) -> list[dict[str, Any]]:
    """One response built from the SDK's own event and item models, dumped as the API
    sends them: every optional field present, null where unset (`namespace`, `content`,
    `status`...), so a client that echoes nulls back fails the SDK's request types."""
    from openai.types.responses import (
        Response,
        ResponseCompletedEvent,
        ResponseCreatedEvent,
        ResponseFunctionToolCall,
        ResponseOutputItemDoneEvent,
        ResponseOutputMessage,
        ResponseOutputText,
        ResponseReasoningItem,
        ResponseUsage,
    )
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    output: list[Any] = [
        ResponseReasoningItem(
            id=f"rs_{n}", type="reasoning", summary=[], encrypted_content=f"gAAAA-{n}"
        )
    ]
    if n == 0:
        # A commentary message before the call: its `logprobs: null` sits inside content.
        output.append(
            ResponseOutputMessage(
                id="msg_0",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        type="output_text", text="looking", annotations=[], logprobs=None
                    )
                ],
            )
        )
        output.append(
            ResponseFunctionToolCall(
                id="fc_0",
                type="function_call",
                call_id="c0",
                name="shell",
                status="completed",
                arguments='{"command":["true"]}',
            )
        )
    else:
        output.append(
            ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[ResponseOutputText(type="output_text", text="ok", annotations=[])],
            )
        )
    usage = ResponseUsage(
        input_tokens=100,
        output_tokens=10,
        total_tokens=110,
        input_tokens_details=InputTokensDetails(cached_tokens=40, cache_write_tokens=60),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=5),
    )

    def response(status: Any, items: list[Any], u: ResponseUsage | None) -> Response:
        return Response(
            id=f"resp_{n}",
            created_at=0,
            model="gpt-5",
            object="response",
            output=items,
            parallel_tool_calls=True,
            tool_choice="auto",
            tools=[],
            status=status,
            usage=u,
        )

    events: list[Any] = [
        ResponseCreatedEvent(
            type="response.created", sequence_number=0, response=response("in_progress", [], None)
        )
    ]
    events += [
        ResponseOutputItemDoneEvent(
            type="response.output_item.done", item=item, output_index=i, sequence_number=i + 1
        )
        for i, item in enumerate(output)
    ]
    events.append(
        ResponseCompletedEvent(
            type="response.completed",
            sequence_number=9,
            response=response("completed", output, usage),
        )
    )
    return [e.model_dump(mode="json") for e in events]


def test_sdk_built_stream_round_trips(loopback_thread: Any, git_repo: Path, tmp_path: Path) -> None:
    from tests.support.loopback import per_conversation, reply_events

    srv = loopback_thread(per_conversation(lambda req, i: reply_events(sdk_stream(i))))
    task = run_one(srv, git_repo, tmp_path, "gpt-5")
    assert task["status"] == "completed" and task["final_message"] == "ok"
    assert sdk_stream(0)[1]["item"]["content"] is None  # the server's nulls...
    second = srv.requests[1].json["input"]
    reasoning_back, message_back, call_back = second[-4], second[-3], second[-2]
    assert reasoning_back == {
        "id": "rs_0",
        "summary": [],
        "type": "reasoning",
        "encrypted_content": "gAAAA-0",
    }  # ...are not sent back
    assert call_back["id"] == "fc_0" and None not in call_back.values()
    assert message_back["id"] == "msg_0"
    assert message_back["content"] == [
        {"type": "output_text", "text": "looking", "annotations": []}
    ]  # nested null dropped too
    assert task["usage"]["cache_write_tokens"] == 120
