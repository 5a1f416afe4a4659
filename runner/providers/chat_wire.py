"""The Chat Completions wire, as pure functions: Responses-style prompts to chat request
bodies, streamed chunks back to Responses items. No I/O; `chat.py` adds HTTP.

Two modes:

* standard: `tools` / `tool_calls`, converted the way Codex's removed chat wire did it
  (instructions -> first system message, function_call -> assistant `tool_calls`,
  outputs -> role `tool`).
* constrained (`constrained_tools=True`): no `tools` are sent. The tools are described in
  the system message and `response_format: json_schema` (or a GBNF grammar) forces the
  answer to be one JSON object, a `oneOf` of `{"tool":NAME,"arguments":{..}}` per tool and
  `{"answer":".."}`. History is rendered as text the model can read: its own past answers
  as that JSON, tool results as user turns that start with `[tool output: NAME]` and end
  with a note that steers it to answer. The JSON answer is turned back into Responses
  items, with call ids derived from the thread, so reruns give identical items.

Why one module: both directions of one wire (request bodies, streamed answers), which
must agree with each other; the constrained mode's answer shapes are in `constrained`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from runner.errors import (
    SizeLimitReached,
    StreamFailure,
    UnsupportedSchema,
)
from runner.items import JSON, Item, dumps
from runner.providers import Prompt
from runner.providers.constrained import (
    TOOL_RESULT_HEADER,
    Constrained,
    constrained_schema,
    constrained_tools_text,
    function_tools,
)
from runner.providers.grammar import to_gbnf
from runner.providers.refusals import stream_error
from runner.sse import PARSE_BYTES, json_event

PARTIAL_OUTPUT_CHARS = 16_000
"""How much of a cut-off answer is kept for the report."""


# --------------------------------------------------------------------------------------
# Prompt -> chat messages and body (pure).


def _obj(value: Any) -> JSON:
    return value if isinstance(value, dict) else {}


def answer_schema(prompt: Prompt) -> JSON | None:
    """The schema of `text.format` (structured output), if the prompt asks for one."""
    fmt = prompt.text.get("format") if prompt.text else None
    if (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_schema"
        and isinstance(fmt.get("schema"), dict)
    ):
        schema: JSON = fmt["schema"]
        return schema
    return None


def _text_of(content: Any) -> str:
    """Text parts joined with newlines (Codex sends each context section as its own part)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        str(p.get("text", ""))
        for p in content
        if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")
    ]
    return "\n".join(texts)


def _chat_content(content: Any) -> str | list[JSON]:
    """A string, or a parts list when there are images (as Codex's chat wire did)."""
    if isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "input_image" for p in content
    ):
        parts: list[JSON] = []
        for p in content:
            if not isinstance(p, dict):
                continue
            if p.get("type") == "input_image":
                parts.append({"type": "image_url", "image_url": {"url": p.get("image_url", "")}})
            elif "text" in p:
                parts.append({"type": "text", "text": str(p["text"])})
        return parts
    return _text_of(content)


def output_text(output: Any) -> str:
    """A tool output as text: a string as is, a content list as its text parts."""
    if isinstance(output, str):
        return output
    return _text_of(output)


def readable_tool_output(output: str) -> str:
    """Codex's shell output made stable and plain for a small model.

    The structured form `{"output":..,"metadata":{"exit_code":..,"duration_seconds":..}}`
    becomes `Exit code: N` + the output; the `Wall time:` line of the text form is dropped.
    Durations change from run to run, and a prompt that changes breaks determinism.
    """
    try:
        obj = json.loads(output)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and "output" in obj:
        meta = _obj(obj.get("metadata"))
        head = f"Exit code: {meta['exit_code']}\n" if "exit_code" in meta else ""
        return f"{head}Output:\n{obj['output']}"
    return "\n".join(line for line in output.split("\n") if not line.startswith("Wall time:"))


def _args_value(arguments: Any) -> Any:
    """Arguments as a JSON value for re-rendering; a non-JSON string stays a string."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def render_tool_result(name: str, output: str, note: str) -> str:
    """The user turn that carries a tool's output back in constrained mode."""
    body = readable_tool_output(output).rstrip("\n")
    text = TOOL_RESULT_HEADER.format(name=name) + "\n" + body
    return f"{text}\n\n{note}" if note else text


def chat_messages(prompt: Prompt, *, constrained: Constrained | None = None) -> list[JSON]:
    """The Responses-style prompt as chat messages.

    Developer messages become `system` messages in place: chat servers and small-model
    templates know `system`, not `developer`. Reasoning and other server-side items are
    dropped. With `constrained`, calls and outputs are rendered as text (see module doc).
    """
    system = prompt.instructions
    structured = answer_schema(prompt) is not None
    if constrained is not None:
        tools_text = constrained_tools_text(prompt.tools, constrained, answer_schema(prompt))
        system = f"{system}\n\n{tools_text}" if system else tools_text
    messages: list[JSON] = [{"role": "system", "content": system}] if system else []
    names: dict[str, str] = {}
    for item in prompt.input:
        d = item.data
        kind = item.type
        if kind == "message":
            role = item.role or "user"
            if role == "developer":
                role = "system"
            if role == "assistant":
                text = _text_of(d.get("content"))
                content: Any = (
                    dumps({"answer": _args_value(text) if structured else text})
                    if constrained is not None
                    else text
                )
            else:
                content = (
                    _text_of(d.get("content"))
                    if constrained is not None
                    else _chat_content(d.get("content"))
                )
            messages.append({"role": role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            call_id = str(d.get("call_id", ""))
            name = str(d.get("name", ""))
            names[call_id] = name
            if constrained is not None:
                answer = (
                    {"tool": name, "arguments": _args_value(d.get("arguments", "{}"))}
                    if kind == "function_call"
                    else {"tool": name, "input": str(d.get("input", ""))}
                )
                messages.append({"role": "assistant", "content": dumps(answer)})
                continue
            call: JSON = (
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": str(d.get("arguments", ""))},
                }
                if kind == "function_call"
                else {
                    "id": call_id,
                    "type": "custom",
                    "custom": {"name": name, "input": str(d.get("input", ""))},
                }
            )
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
                if last.get("content") == "":
                    last["content"] = None
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = str(d.get("call_id", ""))
            text = output_text(d.get("output", ""))
            if constrained is not None:
                result = render_tool_result(
                    names.get(call_id, "tool"), text, constrained.tool_result_note
                )
                messages.append({"role": constrained.tool_result_role, "content": result})
            else:
                messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages


def chat_tools(tools: Sequence[Mapping[str, Any]]) -> list[JSON]:
    """Function tools in the chat shape; other tool types have no chat equivalent."""
    out: list[JSON] = []
    for t in function_tools(tools):
        fn: JSON = {"name": t["name"]}
        if "description" in t:
            fn["description"] = t["description"]
        if "strict" in t:
            fn["strict"] = t["strict"]
        fn["parameters"] = t.get("parameters") or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": fn})
    return out


def build_body(prompt: Prompt, *, constrained: Constrained | None = None) -> JSON:
    """The request body. Same prompt, same bytes: the server's prefix cache depends on it."""
    body: JSON = {
        "model": prompt.model,
        "messages": chat_messages(prompt, constrained=constrained),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if constrained is not None:
        # The answer format is ours in this mode; a requested `text.format` cannot apply.
        cap = prompt.extra.get("max_output_tokens")
        schema = constrained_schema(
            prompt.tools,
            tool_choice=prompt.tool_choice,
            settings=constrained,
            answer=answer_schema(prompt),
            budget=cap if isinstance(cap, int) else None,
        )
        grammar = None
        if constrained.grammar:
            try:
                grammar = to_gbnf(schema.get("oneOf", [schema]))
            except UnsupportedSchema:
                grammar = None  # a shape GBNF cannot say exactly: the schema it is
        if grammar is not None:
            body["grammar"] = grammar
        else:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "strict": True, "schema": schema},
            }
    else:
        tools = chat_tools(prompt.tools)
        if tools:
            body["tools"] = tools
            body["tool_choice"] = prompt.tool_choice
            body["parallel_tool_calls"] = prompt.parallel_tool_calls
        fmt = prompt.text.get("format") if prompt.text else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            spec = {k: v for k, v in fmt.items() if k != "type"}
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
    if prompt.reasoning and prompt.reasoning.get("effort"):
        body["reasoning_effort"] = prompt.reasoning["effort"]
    for key, value in prompt.extra.items():
        # The Responses name for the output cap; chat servers know `max_tokens`.
        body["max_tokens" if key == "max_output_tokens" else key] = value
    return body


# --------------------------------------------------------------------------------------
# Model answer -> Responses items (pure).


def call_id_for(prompt: Prompt, index: int, name: str, arguments: str) -> str:
    """A call id that is the same on every rerun of the same thread.

    Derived from the position in the thread (input length, output index), the item before
    it and the call itself: unique within a thread, and no random ids in reports or diffs.
    """
    h = hashlib.blake2b(digest_size=12)
    last = prompt.input[-1].wire if prompt.input else ""
    for part in (str(len(prompt.input)), str(index), last, name, arguments):
        h.update(part.encode())
        h.update(b"\0")
    return "call_" + h.hexdigest()


def _message_item(text: str) -> Item:
    return Item(
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
    )


def items_from_constrained(text: str, prompt: Prompt) -> list[Item]:
    """The model's JSON answer as one Responses item.

    `{"tool":NAME,"arguments":{..}}` -> a `function_call` whose `arguments` is the compact
    JSON string, `{"tool":NAME,"input":".."}` -> a `custom_tool_call`, `{"answer":".."}` ->
    an assistant message. Other valid JSON is kept as message text, never dropped.
    """
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise StreamFailure(
            f"constrained answer is not valid JSON ({e}): {text[:200]!r}", code="invalid_json"
        ) from e
    if isinstance(obj, dict) and isinstance(obj.get("tool"), str) and obj["tool"]:
        name = obj["tool"]
        if "input" in obj and "arguments" not in obj:
            inp = str(obj["input"])
            return [
                Item(
                    {
                        "type": "custom_tool_call",
                        "call_id": call_id_for(prompt, 0, name, inp),
                        "name": name,
                        "input": inp,
                    }
                )
            ]
        args = obj.get("arguments", {})
        arguments = args if isinstance(args, str) else dumps(args)
        return [
            Item(
                {
                    "type": "function_call",
                    "call_id": call_id_for(prompt, 0, name, arguments),
                    "name": name,
                    "arguments": arguments,
                }
            )
        ]
    if isinstance(obj, dict) and answer_schema(prompt) is not None and "answer" in obj:
        return [_message_item(dumps(obj["answer"]))]  # structured output: the JSON itself
    if isinstance(obj, dict) and isinstance(obj.get("answer"), str):
        return [_message_item(obj["answer"])]
    return [_message_item(text)]


@dataclass
class _ToolCallAcc:
    name: str = ""
    arguments: str = ""
    kind: str = "function"


@dataclass
class ChatStreamState:
    """Accumulates chat completion chunks into text, reasoning, tool calls and usage."""

    text: str = ""
    reasoning: str = ""
    calls: dict[int, _ToolCallAcc] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: JSON | None = None
    response_id: str | None = None
    done: bool = False
    """`data: [DONE]` arrived: nothing after it is read as an answer."""
    max_chars: int | None = None
    """The most characters text, reasoning and calls may hold together (the item cap)."""
    max_parse: int = PARSE_BYTES
    """What parsing one chunk may cost (`SizeCaps.parse_bytes`)."""
    _chars: int = 0

    def feed_event(self, event: str, data: str) -> None:
        """One SSE event as framed by `runner.sse.Framer`. Raises a `ModelError` for an
        error event or a chunk that is not a JSON object; shapes it does not know pass."""
        if self.done:
            return
        if data.strip() == "[DONE]":
            self.done = True
            return
        chunk = json_event(event, data, self.max_parse)
        if event == "error" or chunk.get("error") is not None:
            raise stream_error(chunk.get("error", chunk))
        self.feed(chunk)

    def feed(self, chunk: JSON) -> None:
        before = len(self.text) + len(self.reasoning)
        calls_before = sum(len(c.arguments) + len(c.name) for c in self.calls.values())
        self._feed(chunk)
        grown = len(self.text) + len(self.reasoning) - before
        grown += sum(len(c.arguments) + len(c.name) for c in self.calls.values()) - calls_before
        self._chars += grown
        if self.max_chars is not None and self._chars > self.max_chars:
            raise SizeLimitReached(
                f"the answer passed {self.max_chars} characters (max_item_bytes or "
                "max_history_bytes); refusing to read more"
            )

    def _feed(self, chunk: JSON) -> None:
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            delta = _obj(choice.get("delta"))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text += content
            reasoning = delta.get("reasoning_content", delta.get("reasoning"))
            if isinstance(reasoning, dict):
                reasoning = reasoning.get("text", reasoning.get("content"))
            if isinstance(reasoning, str) and reasoning:
                self.reasoning += reasoning
            calls = delta.get("tool_calls")
            for tc in calls if isinstance(calls, list) else []:
                if isinstance(tc, dict):
                    self._tool_call_delta(tc)
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])

    def _tool_call_delta(self, tc: JSON) -> None:
        """A piece of a streamed tool call: its name and arguments arrive in fragments,
        keyed by `index` (a server that omits it starts a new call)."""
        index = tc.get("index")
        if not isinstance(index, int):
            index = len(self.calls)
        acc = self.calls.setdefault(index, _ToolCallAcc())
        fn = _obj(tc.get("function"))
        custom = _obj(tc.get("custom"))
        if tc.get("type") == "custom" or custom:
            acc.kind = "custom"
        acc.name += str(fn.get("name") or custom.get("name") or "")
        acc.arguments += str(fn.get("arguments") or custom.get("input") or "")

    def items(self, prompt: Prompt, *, constrained: bool) -> list[Item]:
        out: list[Item] = []
        if self.reasoning:
            out.append(
                Item(
                    {
                        "type": "reasoning",
                        "summary": [],
                        "content": [{"type": "reasoning_text", "text": self.reasoning}],
                    }
                )
            )
        if constrained and not self.calls:
            return out + items_from_constrained(self.text, prompt)
        if self.text:
            out.append(_message_item(self.text))
        for _, acc in sorted(self.calls.items()):
            index = len(out)
            if acc.kind == "custom":
                out.append(
                    Item(
                        {
                            "type": "custom_tool_call",
                            "call_id": call_id_for(prompt, index, acc.name, acc.arguments),
                            "name": acc.name,
                            "input": acc.arguments,
                        }
                    )
                )
            else:
                out.append(
                    Item(
                        {
                            "type": "function_call",
                            "call_id": call_id_for(prompt, index, acc.name, acc.arguments),
                            "name": acc.name,
                            "arguments": acc.arguments,
                        }
                    )
                )
        return out
