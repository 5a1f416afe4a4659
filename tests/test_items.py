"""Conversation items (runner/items.py): the wire text an item goes back as (ids kept,
nulls dropped, unusable reasoning never sent), its sizes, and token usage arithmetic."""

from __future__ import annotations

import json
import sys

from runner.items import (
    Item,
    Usage,
    as_int,
    custom_tool_call_output,
    dumps,
    message,
    message_text,
)
from tests.support.loopback import message_item, reasoning


def test_items_keep_ids_and_drop_nulls() -> None:
    msg = {**message_item("hi"), "id": "msg_1", "phase": None}
    assert json.loads(Item(msg).wire) == {k: v for k, v in msg.items() if v is not None}
    nested = {
        **msg,
        "content": [
            {
                "type": "output_text",
                "text": "x",
                "logprobs": None,
                "annotations": [{"type": "t", "title": None}],
            }
        ],
    }
    assert json.loads(Item(nested).wire)["content"] == [
        {"type": "output_text", "text": "x", "annotations": [{"type": "t"}]}
    ]
    assert Item(reasoning("rs", None)).wire == ""  # unusable with store: false
    assert Item(reasoning("rs", None)).stored_wire != ""  # store: true resolves it by id
    assert Item(reasoning(None, "enc")).wire == ""  # the API requires an id
    raw = [{"type": "reasoning_text", "text": "t"}]
    assert json.loads(Item(reasoning("rs", None, content=raw)).wire)["content"] == raw


def test_arguments_sent_as_an_object_go_back_as_json_text() -> None:
    call = {"type": "function_call", "call_id": "c", "name": "shell", "arguments": {"a": [1]}}
    assert json.loads(Item(call).wire)["arguments"] == '{"a":[1]}'
    text = {**call, "arguments": '{"a": [1]}'}
    assert json.loads(Item(text).wire)["arguments"] == '{"a": [1]}'  # untouched


def test_wire_is_compact_utf8_and_nbytes_counts_its_bytes() -> None:
    item = message("user", "héllo \U0001f600")
    assert item.wire == dumps(item.data) and ", " not in item.wire and "\\u" not in item.wire
    assert item.nbytes == len(item.wire.encode()) > len(item.wire)


def test_held_bytes_counts_what_python_keeps_not_what_was_sent() -> None:
    """`[[],[],...]` is 3 bytes an element on the wire and far more in memory: the caps
    must see the memory."""
    lists = Item({"type": "message", "content": [[] for _ in range(1000)]})
    assert lists.nbytes < 4000
    assert lists.held_bytes >= 1000 * sys.getsizeof([])


def test_message_text_joins_parts_and_tolerates_odd_content() -> None:
    assert message_text(message("assistant", "a", "b")) == "ab"
    assert message_text(Item({"type": "message", "content": "plain"})) == "plain"
    assert message_text(Item({"type": "message", "content": None})) == ""
    odd = Item({"type": "message", "content": ["x", {"text": 3}, {"type": "refusal"}]})
    assert message_text(odd) == "3"
    assert message("user", "q").data["content"][0]["type"] == "input_text"
    assert custom_tool_call_output("c", "o").type == "custom_tool_call_output"
    assert Item({"role": 5}).role is None and Item({}).type == ""


def test_usage_adds_field_by_field_and_reports_uncached() -> None:
    a = Usage(10, 4, 2, 1, 12, 3, 0)
    b = Usage(1, 1, 1, 0, 2, 0, 1)
    total = (a + b).as_dict()
    assert total == {
        "input_tokens": 11,
        "cached_tokens": 5,
        "uncached_tokens": 6,
        "output_tokens": 3,
        "reasoning_tokens": 1,
        "total_tokens": 14,
        "cache_write_tokens": 3,
        "unreported_responses": 1,
    }


def test_as_int_takes_only_real_integers() -> None:
    assert [as_int(v) for v in (7, True, 2.5, "3", None, -1)] == [7, 0, 0, 0, 0, -1]
