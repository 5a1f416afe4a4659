"""Small wording helpers for task-file messages: what a value is, escaped and shortened
text, dotted field paths and the line a path was written on."""

from __future__ import annotations

import datetime


def describe(value: object) -> str:
    """What a value is, in YAML words (never a Python class name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()}; YAML reads yes/no/on/off as booleans)"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (set, frozenset)):
        return "a set"
    return "an unsupported value"


Path_ = tuple[str | int, ...]
"""Where a field is in the task file: keys and list indexes from the top."""


def esc(text: str) -> str:
    """Text made safe for a one-line message: unprintable characters escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def dotted(path: Path_) -> str:
    s = ""
    for part in path:
        if isinstance(part, int):
            s += f"[{part}]"
        else:
            name = esc(part) if part else "''"
            s += f".{name}" if s else name
    return s or "(top level)"


def line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None
