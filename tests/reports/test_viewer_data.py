"""Tests for runner.reports.viewer_data: the data report.html embeds, cut to a size the
batch sets (never what a model wrote), safe inside a `<script>` element, and read only
from plain files under the report directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from runner.reports.model import EnvironmentReport, RunInputs, RunReport
from runner.reports.viewer_data import (
    ITEMS_LIMIT,
    PATCHES_TOTAL,
    TRANSCRIPT_CHARS,
    TRANSCRIPTS_TOTAL,
    cut,
    embed_json,
    in_workspace,
    transcript,
    viewer_data,
)
from tests.support.reports import report, result, task


def events(out: Path, run: RunReport, *lines: str) -> None:
    path = out / run.events_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines))


def message(text: str) -> str:
    return json.dumps({"type": "item.completed", "item": {"type": "agent_message", "text": text}})


def test_cut_keeps_head_and_tail_and_shows_control_characters() -> None:
    assert cut("ok\x1b[31m") == "ok\\x1b[31m"
    long = "a" * 50 + "b" * 50
    assert cut(long, 10) == "aaaaa\n[... 90 characters cut ...]\nbbbbb"


def test_embedded_json_cannot_end_the_script_and_reads_back_exactly() -> None:
    data = {"text": "</script><!-- & \u2028 é", "n": [1, None]}
    text = embed_json(data)
    assert not {"<", ">", "&", "\u2028", "é"} & set(text)
    assert json.loads(text) == data
    with pytest.raises(ValueError):
        embed_json({"cost": float("nan")})


@pytest.mark.parametrize(
    ("path", "workdir", "shown"),
    [
        ("/work/src/a.py", "/work/", "src/a.py"),
        ("/tmp/runner-work-x/a.r1/src/a.py", None, "src/a.py"),
        ("/tmp/other/a.r1/src/a.py", None, "/tmp/other/a.r1/src/a.py"),
        ("/elsewhere/a.py", "/work", "/elsewhere/a.py"),
    ],
)
def test_a_changed_file_is_named_as_the_workspace_names_it(
    path: str, workdir: str | None, shown: str
) -> None:
    env = None if workdir is None else EnvironmentReport(backend="podman", workdir=workdir)
    run = task("a", "p/m", "completed", run="a.r1").model_copy(update={"environment": env})
    assert in_workspace(path, run) == shown


def test_the_transcript_reads_what_it_can_and_keeps_both_ends(tmp_path: Path) -> None:
    run = task("a", "p/m", "completed", run="a.r1")
    shell = {"type": "command_execution", "command": "ls", "exit_code": 0, "aggregated_output": "x"}
    events(
        tmp_path,
        run,
        '{"type": "turn.started"}',
        "not json",
        "[1, 2]",
        json.dumps({"type": "item.completed", "item": shell}),
        '{"type": "turn.failed", "error": {"message": "boom"}}',
        '{"type": "request.completed"}',
    )
    entries, left = transcript(tmp_path, run, 1000)
    assert entries == [
        ["note", "turn started", ""],
        ["cmd", "$ ls  (exit 0)", "x"],
        ["err", "error", "boom"],
    ]
    assert left == 0
    many = [message(f"m{i}") for i in range(ITEMS_LIMIT + 10)]
    events(tmp_path, run, *many)
    entries, left = transcript(tmp_path, run, 10**6)
    assert left == 10 and len(entries) == ITEMS_LIMIT
    assert (entries[0][2], entries[-1][2]) == ("m0", f"m{ITEMS_LIMIT + 9}")
    entries, left = transcript(tmp_path, run, 30)  # two entries of 11 characters fit
    assert [e[2] for e in entries] == ["m0", f"m{ITEMS_LIMIT + 9}"]
    assert left == ITEMS_LIMIT + 8


@pytest.mark.parametrize("chars", [5, 100_000])
def test_a_first_entry_over_the_budget_is_cut_not_dropped(tmp_path: Path, chars: int) -> None:
    """Whether it is a little over (label and text 14 characters, budget 10) or far over:
    a transcript never shows nothing because its first entry was long."""
    run = task("a", "p/m", "completed")
    events(tmp_path, run, message("z" * chars), message("second"))
    [entry], left = transcript(tmp_path, run, 10)
    assert left == 1 and entry[:2] == ["msg", "assistant"]
    assert entry[2] == "z" * chars if chars <= 10 else "characters cut" in entry[2]


def one_run(tmp_path: Path, run: RunReport) -> dict[str, Any]:
    data = viewer_data(report([run]), tmp_path)
    return data["runs"][0]  # type: ignore[no-any-return]


def test_a_patch_is_shown_cut_or_refused_with_a_note(tmp_path: Path) -> None:
    base = task("a", "p/m", "completed")
    assert (one_run(tmp_path, base)["patch"], one_run(tmp_path, base)["patch_note"]) == (
        None,
        "No change.",
    )
    run = base.model_copy(
        update={"result": result("b").model_copy(update={"patch": "patches/a.patch"})}
    )
    missing = one_run(tmp_path, run)
    assert missing["patch"] is None and "patches/a.patch not shown" in missing["patch_note"]
    (tmp_path / "patches").mkdir()
    (tmp_path / "secret").write_text("host file")
    os.symlink(tmp_path / "secret", tmp_path / "patches" / "a.patch")
    linked = one_run(tmp_path, run)
    assert linked["patch"] is None and "not a plain file" in linked["patch_note"]
    (tmp_path / "patches" / "a.patch").unlink()
    (tmp_path / "patches" / "a.patch").write_bytes(b"+\xff ok\n" + b"x" * 40_000)
    shown = one_run(tmp_path, run)
    assert shown["patch"].startswith("+\ufffd ok\n") and "characters cut" in shown["patch"]
    assert shown["patch_note"] == "Cut; the whole patch is patches/a.patch."


def test_tasks_columns_budgets_and_inputs_are_shared_by_the_runs(tmp_path: Path) -> None:
    name = f"inputs/{'1' * 64}.json"
    (tmp_path / "inputs").mkdir()
    (tmp_path / name).write_text('{"prompts": ["fix it"]}')
    inputs = RunInputs(prompt=name, instructions=name, tools=f"inputs/{'2' * 64}.json")
    runs = [
        task(t, m, "completed", variant=v).model_copy(update={"inputs": inputs})
        for t, m, v in (("b", "p/x", None), ("a", "p/x", "terse"), ("b", "p/y", None))
    ]
    data = viewer_data(report(runs), tmp_path)
    assert data["tasks"] == ["b", "a"]
    assert data["cols"] == [["p/x", None], ["p/x", "terse"], ["p/y", None]]
    assert [(r["task"], r["col"]) for r in data["runs"]] == [(0, 0), (1, 1), (0, 2)]
    assert data["budgets"] == [TRANSCRIPT_CHARS, 30_000]
    assert data["inputs"][name] == '{\n "prompts": [\n  "fix it"\n ]\n}'
    assert "not shown" in data["inputs"][f"inputs/{'2' * 64}.json"]
    assert data["runs"][0]["inputs"] == [name, name, f"inputs/{'2' * 64}.json"]
    big = report([task(f"t{i}", "p/m", "completed") for i in range(500)])
    assert viewer_data(big, tmp_path)["budgets"] == [
        TRANSCRIPTS_TOTAL // 500,
        PATCHES_TOTAL // 500,
    ]
