"""The data the viewer of `report.html` works on: one JSON object embedded in the page.

The page's own script filters, sorts, searches and draws the runs from this object; nothing
run-derived is ever markup. Text is cut here, not in the browser, so the page size has a
bound set by the batch's size, not by what a model wrote: each run's share of the
transcript and patch budgets shrinks as the batch grows, and a 2,000-run batch is a page a
browser opens in about a second (README, "report.html").

Embedding: `embed_json` escapes `<`, `>` and `&` (and every non-ASCII character, U+2028
included) as JSON `\\u` escapes, so no text of a run can end the `<script>` element that
holds the data or open a comment in it, and `JSON.parse` still reads the exact text.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from runner.reports.fmt import printable
from runner.reports.model import Report, RunReport
from runner.reports.named import EVENTS_DIR, INPUTS_DIR, PATCHES_DIR, named_lines, read_named
from runner.reports.summary import column_name
from runner.sizes import size as size_text

TEXT_LIMIT = 4000
"""Characters kept of one message, error or command output (head and tail)."""
TRANSCRIPT_CHARS = 40_000
"""Characters of transcript text kept of one run in a small batch."""
TRANSCRIPTS_TOTAL = 12_000_000
"""Characters of transcript text kept for the whole batch: a run's share is this over the
number of runs (6,000 each at 2,000 runs), never over TRANSCRIPT_CHARS."""
ITEMS_LIMIT = 120
"""Transcript entries kept per run (first and last halves)."""
PATCH_LIMIT = 30_000
PATCHES_TOTAL = 3_000_000
"""Characters of patch kept for the whole batch, shared like TRANSCRIPTS_TOTAL."""
PATCH_BYTES = 1 << 20
"""The head of a patch read (at most PATCH_LIMIT characters of it are kept)."""
REQUESTS_LIMIT = 400
"""Requests drawn in a run's token chart."""


def cut(text: str, limit: int = TEXT_LIMIT) -> str:
    """Head and tail of a long text with the number of characters left out between, made
    printable (control characters and direction overrides as visible escapes)."""
    text = printable(text)
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half:,} characters cut ...]\n{text[-half:]}"


def embed_json(data: object) -> str:
    """`data` as JSON safe inside `<script type="application/json">`."""
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _events(out_dir: Path, name: str) -> Iterator[dict[str, Any]]:
    """The events of the file `name` under `threads/`, read as data (`reports.named`)."""
    for line in named_lines(out_dir, name, EVENTS_DIR):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(event, dict):
            yield event


Entry = list[str]
"""A transcript entry: [kind, label, text]; kind is one of note, err, msg, cmd, think,
item (the page styles each)."""


def _file_changes(item: dict[str, Any], run: RunReport) -> str:
    changes = item.get("changes")
    if not isinstance(changes, list):
        return json.dumps({k: v for k, v in item.items() if k != "id"}, ensure_ascii=False)
    lines = []
    for c in changes:
        if isinstance(c, dict):
            path = str(c.get("path", "?"))
            lines.append(f"{c.get('kind', 'change')} {in_workspace(path, run)}")
    return "\n".join(lines)


def in_workspace(path: str, run: RunReport) -> str:
    """A changed file as the workspace names it. The events keep the absolute path (as
    `codex exec --json` does), which on the host names the run's private folder
    (`.../runner-work.../<run>/...`) and in a container its workdir."""
    workdir = (run.environment.workdir or "").rstrip("/") if run.environment else ""
    if workdir and path.startswith(f"{workdir}/"):
        return path[len(workdir) + 1 :]
    parts = path.split("/")
    for i, part in enumerate(parts[:-1]):
        if part == (run.run or run.id) and any(p.startswith("runner-work") for p in parts[:i]):
            return "/".join(parts[i + 1 :])
    return path


def _entry(event: dict[str, Any], run: RunReport) -> Entry | None:
    kind = event.get("type")
    if kind == "turn.started":
        return ["note", "turn started", ""]
    if kind == "compaction":
        return ["note", "history compacted", ""]
    if kind in ("error", "turn.failed"):
        error = event.get("error")
        msg = event.get("message") or (error.get("message") if isinstance(error, dict) else "")
        return ["err", "error", cut(str(msg or ""))]
    if kind != "item.completed":
        return None
    item = event.get("item")
    if not isinstance(item, dict):
        return None
    it = item.get("type")
    if it == "agent_message":
        return ["msg", "assistant", cut(str(item.get("text", "")))]
    if it == "command_execution":
        label = f"$ {cut(str(item.get('command', '')), 400)}  (exit {item.get('exit_code')})"
        return ["cmd", label, cut(str(item.get("aggregated_output", "")))]
    if it == "reasoning":
        return ["think", "reasoning", cut(str(item.get("text", "")), 1000)]
    if it == "file_change":
        return ["item", "file change", cut(_file_changes(item, run))]
    body = {k: v for k, v in item.items() if k != "id"}
    return ["item", cut(str(it), 80), cut(json.dumps(body, ensure_ascii=False))]


def transcript(out_dir: Path, run: RunReport, budget: int) -> tuple[list[Entry], int]:
    """The run's transcript entries, at most ITEMS_LIMIT and `budget` characters, taken
    alternately from both ends (the start and the end of a thread matter most); and how
    many entries were left out."""
    events = _events(out_dir, run.events_file)
    entries = [e for e in (_entry(event, run) for event in events) if e is not None]
    head: list[Entry] = []
    tail: list[Entry] = []
    size = 0
    for i in range(min(len(entries), ITEMS_LIMIT)):
        entry = entries[i // 2] if i % 2 == 0 else entries[-1 - i // 2]
        length = len(entry[1]) + len(entry[2])
        if size + length > budget:
            if size:
                break
            entry = [entry[0], entry[1][:budget], cut(entry[2], budget)]  # first, too big
            length = budget
        size += length
        (head if i % 2 == 0 else tail).append(entry)
    return [*head, *reversed(tail)], len(entries) - len(head) - len(tail)


def _patch(out_dir: Path, run: RunReport, budget: int) -> tuple[str | None, str]:
    """The head of the run's patch and a note on what is not shown."""
    if run.result is None:
        return None, "No change."
    read = read_named(out_dir, run.result.patch, PATCHES_DIR, PATCH_BYTES)
    if read is None:
        return None, (
            f"Patch {printable(run.result.patch)} not shown: missing, or not a plain file "
            "under patches/."
        )
    data, size = read
    text = data.decode("utf-8", errors="replace")
    note = ""
    if size > len(data):
        note = f"Only the first {size_text(len(data))} of {size_text(size)} read"
    if len(text) > budget:
        note = note or "Cut"
    if note:
        note += f"; the whole patch is {printable(run.result.patch)}."
    return cut(text, budget), note


INPUT_CHARS = 100_000
"""Characters kept of one input file (the base instructions are about 20,000); each
distinct file is in the page once, however many runs share it."""


def _inputs(out_dir: Path, run: RunReport, kept: dict[str, str]) -> list[str] | None:
    """The run's prompt, instructions, tools (and AGENTS.md) files, each read into `kept` (by name)
    the first time a run names it."""
    if run.inputs is None:
        return None
    names = [run.inputs.prompt, run.inputs.instructions, run.inputs.tools]
    if run.inputs.agents_md is not None:
        names.append(run.inputs.agents_md)
    for name in names:
        if name in kept:
            continue
        read = read_named(out_dir, name, INPUTS_DIR, 4 * INPUT_CHARS)
        if read is None:
            kept[name] = f"{name} not shown: missing, or not a plain file under inputs/."
            continue
        text = read[0].decode("utf-8", errors="replace")
        with contextlib.suppress(ValueError):  # cut short or edited: shown as it is
            text = json.dumps(json.loads(text), indent=1, ensure_ascii=False)
        kept[name] = cut(text, INPUT_CHARS)
    return names


def run_data(
    out_dir: Path,
    run: RunReport,
    task: int,
    col: int,
    budgets: tuple[int, int],
    kept: dict[str, str] | None = None,
) -> dict[str, Any]:
    u = run.usage
    entries, left = transcript(out_dir, run, budgets[0])
    patch, patch_note = _patch(out_dir, run, budgets[1])
    check = run.check
    return {
        "run": printable(run.run or run.id),
        "task": task,
        "col": col,
        "repeat": run.repeat,
        "status": str(run.status),
        "verdict": str(run.status.verdict),
        "reward": run.reward,
        "resolution": run.resolution,
        "skip": run.skip_reason,
        "requests": len(run.requests),
        "turns": run.user_turns,
        "tools": run.tool_calls,
        "input": u.input_tokens,
        "cached": u.cached_tokens,
        "output": u.output_tokens,
        "hit": u.cache_hit_ratio,
        "cost": run.cost_usd,
        "time": round(run.duration_s, 3),
        "retries": run.retries,
        "wait": run.retry_wait_s,
        "redone": None
        if run.redone is None
        else [run.redone.attempts, run.redone.usage.total_tokens, run.redone.cost_usd],
        "branch": printable(run.result.branch) if run.result and run.result.branch else None,
        "error": cut(run.error) if run.error else None,
        "final": cut(run.final_message) if run.final_message else None,
        "check": None
        if check is None
        else {
            "command": cut(check.command, 400),
            "exit": check.exit_code,
            "tail": cut(check.output_tail.strip(), 2000),
        },
        "chart": [
            [
                r.usage.cached_tokens if r.usage else 0,
                r.usage.uncached_tokens if r.usage else 0,
                r.usage.output_tokens if r.usage else 0,
                int(r.kind == "compaction"),
            ]
            for r in run.requests[:REQUESTS_LIMIT]
        ],
        "transcript": entries,
        "cut": left,
        "events": printable(run.events_file),
        "patch": patch,
        "patch_note": patch_note,
        "inputs": _inputs(out_dir, run, {} if kept is None else kept),
    }


def viewer_data(report: Report, out_dir: Path) -> dict[str, Any]:
    """Everything the viewer shows of `report`'s runs, reading transcripts and patches
    from `out_dir`. Tasks and columns (model with variant) are listed once and referred
    to by index, in report order, the same order as the task x model matrix."""
    tasks: dict[str, int] = {}
    cols: dict[str, int] = {}
    col_parts: list[list[str | None]] = []
    n = max(len(report.runs), 1)
    budgets = (
        min(TRANSCRIPT_CHARS, TRANSCRIPTS_TOTAL // n),
        min(PATCH_LIMIT, PATCHES_TOTAL // n),
    )
    runs = []
    kept: dict[str, str] = {}
    for run in report.runs:
        task = tasks.setdefault(run.id, len(tasks))
        name = column_name(run)
        if name not in cols:
            cols[name] = len(cols)
            col_parts.append(
                [printable(run.model), printable(run.variant) if run.variant else None]
            )
        runs.append(run_data(out_dir, run, task, cols[name], budgets, kept))
    return {
        "batch": printable(report.batch_id),
        "tasks": [printable(t) for t in tasks],
        "cols": col_parts,
        "runs": runs,
        "inputs": kept,
        "budgets": list(budgets),
    }
