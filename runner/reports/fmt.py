"""The formatting kit every human-facing report shares (Markdown summary, HTML page, PR
comments, compare tables): escaping run-derived text for tables and list items, numbers,
money and status marks, and GitHub's size limits.

Kept apart from any one renderer so that GitHub comments and the HTML page do not depend on
the Markdown summary's layout. `safe_text`, the one rule for what the runner prints, lives
here too, below the progress display: progress shows finished reports, so it sits above
them and the reports cannot import it.
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


def mark(status: RunStatus, stopped_by: RunStatus | None = None) -> str:
    """`PASS`, `FAIL (requests)`; a graded suite run a limit stopped says so beside the
    grade's mark: `PASS (agent stopped: requests)`, `FAIL (check; agent stopped: timeout)`."""
    shown = MARKS[status]
    if stopped_by is None:
        return shown
    said = MARKS[stopped_by]
    why = said.partition("(")[2].rstrip(")") or stopped_by.value
    if shown.endswith(")"):
        return f"{shown[:-1]}; agent stopped: {why})"
    return f"{shown} (agent stopped: {why})"


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


_CONTROL = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def printable(text: str) -> str:
    """Control characters (escape sequences, carriage returns) as visible `\\xNN`."""
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100 else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028\u2029"
    "\u202a-\u202e\u2066-\u2069]"
)


def safe_text(text: str, *, one_line: bool = False) -> str:
    """Text from a report or a run, made safe to print on stdout or stderr: the one rule
    every printer of the runner applies, under GitHub Actions or not (a log can reach
    Actions from a container that never saw `GITHUB_ACTIONS`).

    The Actions runner reads a step's output line by line (CR, LF and CRLF end a line) and
    obeys a line that starts, after blanks, with `::` (`::add-mask::`, `::error::`) or that
    holds `##[` anywhere (the old form). So control characters, CR included, become
    `\\uXXXX`; a line that would start with `::` has its first colon written `\\u003a`;
    every `##[` becomes `#\\u0023[`. With `one_line`, LF is escaped too, so a value (a
    branch name) cannot start a line of its own. The escapes are JSON's own, so JSON text
    stays valid JSON that decodes to the same strings."""
    out = _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    if one_line:
        out = out.replace("\n", "\\u000a")
    return "\n".join(_inert(line) for line in out.split("\n"))


def _inert(line: str) -> str:
    line = line.replace("##[", "#\\u0023[")
    body = line.lstrip()
    if body.startswith("::"):
        line = line[: len(line) - len(body)] + "\\u003a" + body[1:]
    return line


def duration(seconds: float) -> str:
    """Seconds below a minute, then `1m 05s`, then `1h 02m`: compact yet unambiguous; the
    one form the progress lines and every report use."""
    if not math.isfinite(seconds):
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"
