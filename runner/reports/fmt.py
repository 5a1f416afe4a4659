"""The formatting kit every human-facing report shares (Markdown summary, HTML page, PR
comments, compare tables): escaping run-derived text for tables and list items, numbers,
money and status marks, and GitHub's size limits.

Kept apart from any one renderer so that GitHub comments and the HTML page do not depend on
the Markdown summary's layout.
"""

from __future__ import annotations

import math
import re

from runner.vocabulary import RunStatus

ERROR_LIMIT = 200
"""Error messages are cut to about this many characters; report.json has the full text."""

PR_COMMENT_MAX_CHARS = 65_536
"""GitHub rejects a longer issue or pull-request comment."""

STEP_SUMMARY_MAX_CHARS = 250_000
"""GitHub's 1 MiB job-summary limit in characters, counting 4 UTF-8 bytes for each."""

MARKS: dict[RunStatus, str] = {
    RunStatus.COMPLETED: "PASS",
    RunStatus.FAILED: "FAIL",
    RunStatus.CHECK_FAILED: "FAIL (check)",
    RunStatus.MAX_REQUESTS: "FAIL (requests)",
    RunStatus.MAX_TOOL_CALLS: "FAIL (tool calls)",
    RunStatus.TIMEOUT: "FAIL (timeout)",
    RunStatus.BUDGET: "FAIL (budget)",
    RunStatus.SCOPE_VIOLATION: "FAIL (scope)",
    RunStatus.ERROR: "ERROR",
    RunStatus.INTERRUPTED: "STOPPED",
    RunStatus.SKIPPED: "NOT STARTED",
    RunStatus.RATE_LIMITED: "ERROR (rate limit)",
    RunStatus.QUOTA_EXHAUSTED: "ERROR (quota)",
    RunStatus.MAX_OUTPUT_TOKENS: "FAIL (output cap)",
    RunStatus.SIZE_LIMIT: "FAIL (size cap)",
}
"""Short, emoji-free status marks: readable in plain text and in a terminal (one per
status; a test checks none is missing)."""

# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that can
# start markup inside a table cell or list item (`|` splits cells even inside code spans).
_MARKUP = re.compile(r"([\\`*_\[\]<>|~&])")
_SPACE = re.compile(r"\s+")
# Control characters (terminal escapes) and lone surrogates, which UTF-8 cannot even encode.
_UNPRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inline(text: str) -> str:
    """Text safe inside a list item: whitespace runs (newlines too) become one space, control
    characters become a visible escape, markup characters are backslash-escaped."""
    return _MARKUP.sub(r"\\\1", _UNPRINTABLE.sub(_visible, _SPACE.sub(" ", text).strip()))


def cell(text: str) -> str:
    """Text safe inside a table cell: escaped like `inline`, newlines kept as `<br>`."""
    lines = [inline(line) for line in text.splitlines()]
    return "<br>".join(line for line in lines if line) or " "


def truncate(text: str, limit: int = ERROR_LIMIT) -> str:
    """Shorten to `limit` characters (whitespace collapsed first) with an ellipsis."""
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "\u2026"


def mark(status: RunStatus) -> str:
    return MARKS[status]


def tokens(n: float) -> str:
    return f"{n:,.0f}"


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio * 100:.1f}%"


def money(usd: float | None) -> str:
    """Dollars; `n/a` when unknown (a price is missing), never a misleading $0."""
    if usd is None or not math.isfinite(usd):
        return "n/a"
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}"


def table(header: list[str], align: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out
