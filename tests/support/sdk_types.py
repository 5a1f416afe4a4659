"""Request bodies checked against the official `openai` SDK's own request types.

The loopback server runs every body it receives through `request_problems`: a field the
SDK does not know, a missing required field (a reasoning item without `id`) or a value
of the wrong shape (`content: null`) fails the test that sent it. Real servers reject
such bodies; a fake that accepts them would let the runner drift from the API.

The SDK's request types are TypedDicts; pydantic validates them, and a wrapper model
with `extra="forbid"` passes that setting down to every nested TypedDict.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from openai.types.chat import completion_create_params as chat_params
from openai.types.responses import response_create_params as responses_params
from openai.types.responses.response_input_item_param import ResponseInputItemParam
from pydantic import BaseModel, ConfigDict, ValidationError

MAX_PROBLEMS = 5


class _Responses(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: responses_params.ResponseCreateParamsStreaming


class _Chat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: chat_params.CompletionCreateParamsStreaming


class _InputItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    body: ResponseInputItemParam


@cache
def _models() -> dict[str, type[BaseModel]]:
    """Built on first use: compiling the SDK's unions takes about a second."""
    return {"responses": _Responses, "chat": _Chat, "item": _InputItem}


def request_problems(wire: str, body: Any) -> list[str]:
    """What is wrong with `body` as a streaming request of `wire` ("responses" or
    "chat") by the SDK's types; empty when it is valid."""
    if not isinstance(body, dict):
        return ["body is not a JSON object"]
    models = _models()
    if wire == "chat":
        return _problems(models["chat"], body, "")
    problems = _problems(models["responses"], {**body, "input": []}, "")
    items = body.get("input")
    if isinstance(items, list):
        for n, item in enumerate(items):
            problems += _problems(models["item"], item, f"input[{n}]")
    return problems[:MAX_PROBLEMS]


def _problems(model: type[BaseModel], body: Any, where: str) -> list[str]:
    try:
        _drain(model(body=body).__dict__["body"])
    except ValidationError as exc:
        return _explain(exc, body, where)
    return []


def _drain(value: Any) -> None:
    """Validate what pydantic left lazy: the SDK types many lists as `Iterable`, which
    pydantic checks only as they are iterated (chat `messages`, `tools`, content parts)."""
    if isinstance(value, dict):
        for v in value.values():
            _drain(v)
    elif isinstance(value, list | tuple) or hasattr(value, "__next__"):
        for v in value:
            _drain(v)


def _explain(exc: ValidationError, body: Any, where: str) -> list[str]:
    """The errors of the union members whose tag (`type`, `role`) matched: pydantic
    reports every member of a union, and only the one the value claims to be says
    anything useful."""
    errors = exc.errors()
    wrong = {
        _member(e["loc"])
        for e in errors
        if e["type"] == "literal_error"
        and e["loc"][-1] in ("type", "role")
        and len(e["loc"]) == len(_member(e["loc"])) + 1
    }
    relevant = [e for e in errors if _member(e["loc"]) not in wrong] or errors
    kind = body.get("type") if isinstance(body, dict) else None
    label = f"{where} ({kind})" if where and kind else where or "body"
    return [
        f"{label}: {'.'.join(str(p) for p in e['loc'] if p != 'body')}: {e['msg']} "
        "(openai SDK types)"
        for e in relevant[:MAX_PROBLEMS]
    ]


def _member(loc: tuple[int | str, ...]) -> tuple[int | str, ...]:
    """The location up to the innermost union member (a type name: field names are
    lower case)."""
    for i in range(len(loc) - 1, -1, -1):
        if isinstance(loc[i], str) and str(loc[i])[:1].isupper():
            return loc[: i + 1]
    return ()
