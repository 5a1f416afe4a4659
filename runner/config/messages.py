"""Pydantic's validation errors, said in the task file's words: the field's dotted path,
its line, what was given (in YAML terms) and what is allowed."""

from __future__ import annotations

import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ValidationError,
)

from runner.config.schema import ID_RE, PROVIDER_NAME_RE
from runner.config.suite_entry import VARIABLE_RE
from runner.config.taskfile import TaskFile
from runner.config.text import Path_, describe, dotted, esc, line_for, short
from runner.errors import Problem


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _type_at(root: Any, loc: Path_) -> Any:
    """The annotation at `loc` (pydantic's error location) below `root`, or None."""
    tp = root
    for part in loc:
        tp = _unwrap(tp)
        origin = get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            info = tp.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            tp = info.annotation
        elif origin is dict:
            tp = get_args(tp)[1]  # any key: step over it to the value type
        elif origin in (tuple, list) and isinstance(part, int):
            tp = get_args(tp)[0]
        else:
            return None
    return _unwrap(tp)


def _allowed_fields(model: type[BaseModel], path: Path_) -> list[str]:
    """Field names of the model at `path`, for 'unknown field' messages."""
    current = _type_at(model, path[:-1])
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _list_message(loc: Path_, got: str) -> str:
    item = _type_at(TaskFile, loc + (0,))
    if get_origin(item) is Literal:
        names = [str(a) for a in get_args(item)]
        return (
            f"must be a list{got}; allowed items: {', '.join(repr(n) for n in names)}, "
            f"e.g. [{names[0]}]"
        )
    if item is str:
        return f"must be a list of strings{got}"
    return f"must be a list{got}"


_FIXED = {
    "missing": "required field is missing",
    "finite_number": "must be a finite number",
    "invalid_key": "keys must be strings",
}
_WRONG_TYPE = {
    kind: wanted
    for kinds, wanted in (
        (("model_type", "model_attributes_type", "dict_type"), "must be a mapping"),
        (("int_type", "int_parsing", "int_from_float"), "must be a valid integer"),
        (("float_type", "float_parsing"), "must be a number"),
        (("bool_type", "bool_parsing"), "must be true or false"),
    )
    for kind in kinds
}
"""Error kinds whose message is what was wanted plus what was given."""

_YAML12_FLOAT = re.compile(r"[-+]?([0-9][0-9_]*(\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+")
"""A number in e-notation that YAML 1.2 would read, and YAML 1.1 (PyYAML) reads as text
when it lacks the '.' or the exponent's sign (`1e12`, `1.0e12`)."""


def _message(err: Any, loc: Path_, lines: dict[Path_, int]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    got = f", got {describe(value)}"
    if kind in _FIXED:
        return _FIXED[kind]
    if kind in _WRONG_TYPE:
        if isinstance(value, str) and _YAML12_FLOAT.fullmatch(value.strip()):
            return (
                f"{_WRONG_TYPE[kind]}, got the string {esc(short(value))!r}: YAML 1.1 reads a "
                "number in e-notation as text unless it has a '.' and a signed exponent; "
                "write 1.0e+12, or the number in full"
            )
        return _WRONG_TYPE[kind] + got
    if kind == "extra_forbidden":
        return f"unknown field; allowed here: {', '.join(_allowed_fields(TaskFile, loc))}"
    if kind in ("tuple_type", "list_type", "iterable_type"):
        return _list_message(loc, got)
    if kind == "string_type":
        hint = " (quote it to make it text)" if not isinstance(value, (list, dict)) else ""
        return "must be a valid string" + got + hint
    if kind == "duplicate_task_id":
        first = line_for(("tasks", ctx.get("first", 0), "id"), lines)
        return f"task id {ctx.get('id')} is used twice; ids must be unique" + (
            f" (first at line {first})" if first else ""
        )
    if kind == "string_pattern_mismatch" and (
        said := _pattern_message(ctx.get("pattern", ""), loc)
    ):
        return said
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    msg = re.sub(r"^Value error, ", "", str(err["msg"]))
    return esc(msg.replace("Input should be", "must be"))


def _pattern_message(pattern: str, loc: Path_) -> str | None:
    """What a field with this pattern takes, in words (a regex means nothing to a user)."""
    if pattern == ID_RE:
        return "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
    if pattern == VARIABLE_RE:
        return "must be a variable name: letters, digits and '_', not starting with a digit"
    if pattern == PROVIDER_NAME_RE:
        names = "MCP server names" if "mcp_servers" in loc else "provider names"
        return f"{names} may use only ASCII letters, digits, '_' and '-'"
    if "https?" in pattern:
        return "must be an http:// or https:// URL"
    if "/" in pattern:
        return "must look like provider/model, e.g. openai/gpt-5.5 or local/smollm2"
    return None


_SCALAR_TAGS = frozenset({"bool", "str", "int", "float", "none", "bytes"})


def _union_member(segment: str | int, prefix: Path_, lines: dict[Path_, int]) -> bool:
    """`segment` is pydantic's name for one member of a union (`bool`,
    `function-after[...]`, a model's class name), not a key of the file: a field that
    takes one of several kinds gets one error per kind, each under such a name."""
    if not isinstance(segment, str) or (*prefix, segment) in lines:
        return False
    return segment in _SCALAR_TAGS or "[" in segment or segment[:1].isupper()


def validation_problems(exc: ValidationError, file: str, lines: dict[Path_, int]) -> list[Problem]:
    """One problem per field: the errors of a union's members (a field that is `true` or
    a path) are said together, at the field's own path."""
    said: dict[tuple[Path_, int], list[str]] = {}
    for n, err in enumerate(exc.errors()):
        loc: Path_ = ()
        member = False
        for part in err["loc"]:
            if not isinstance(part, (str, int)):
                continue
            if _union_member(part, loc, lines):
                member = True
            else:
                loc = (*loc, part)
        if loc and loc[-1] == "[key]":  # a dict key failed: blame the key itself
            loc = loc[:-1]
        msg_loc = loc
        if err["type"] == "duplicate_task_id":
            loc = ("tasks", (err.get("ctx") or {}).get("index", 0), "id")
        message = _message(err, msg_loc, lines)
        key = (loc, -1 if member else n)  # a union's members are one problem
        if message not in said.setdefault(key, []):
            said[key].append(message)
    return [
        Problem(
            file,
            line_for(loc, lines),
            dotted(loc),
            _either(msgs),
        )
        for (loc, _), msgs in said.items()
    ]


_GOT = re.compile(r"^must be (.+?), (got .+?)(?: \(quote it to make it text\))?$")


def _either(msgs: list[str]) -> str:
    """One message for a union's members: `must be a mapping or a valid string, got a
    boolean` when each says what it wanted of the same value, else each in turn."""
    if len(msgs) == 1:
        return msgs[0]
    kinds = [p for m in msgs if (p := _GOT.match(m))]
    if 0 < len(kinds) < len(msgs):
        # One kind took the value and refused it for another reason (an empty path): that
        # is what the writer meant; the other kinds only say the value is not theirs.
        return ", or ".join(m for m in msgs if not _GOT.match(m))
    if kinds and len({p.group(2) for p in kinds}) == 1:
        return f"must be {' or '.join(p.group(1) for p in kinds)}, {kinds[0].group(2)}"
    return "either " + ", or ".join(msgs)
