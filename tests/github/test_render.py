"""What the Action writes for people: step outputs and the sticky comment, with run-derived
text inert and the comment under GitHub's size limit."""

from __future__ import annotations

import re
from pathlib import Path

from runner.github import Context, format_outputs, render_comment
from runner.reports.model import Report
from tests.support.gha import parse_output_file


def test_outputs_survive_any_value(tmp_path: Path) -> None:
    nasty = "line one\nsneaky=1\nrunner_deadbeef\n<<EOF\n"
    text = format_outputs({"a": nasty, "b": "", "c": "plain"})
    assert parse_output_file(text) == {"a": nasty, "b": "", "c": "plain"}


def test_comment_is_empty_of_task_markup() -> None:
    report = Report.model_validate(
        {
            "batch_id": "r1",
            "task_file": "t.yaml",
            "started_at": "s",
            "finished_at": "f",
            "duration_s": 1.0,
            "totals": {
                "tasks": 1,
                "completed": 0,
                "not_completed": 1,
                "requests": 1,
                "tool_calls": 0,
                "usage": {},
            },
            "tasks": [
                {
                    "id": "x",
                    "run": "x|<img src=y>",
                    "model": "p/m",
                    "status": "failed",
                    "error": "boom <script>@everyone",
                    "final_message": None,
                    "turns_completed": 0,
                    "tool_calls": 0,
                    "duration_s": 1.0,
                    "usage": {},
                    "requests": [],
                    "events_file": "e",
                }
            ],
        }
    )
    body = render_comment(report, Context())
    assert not re.search(r"(?<!\\)<(img|script)", body) and "x\\|" in body
    assert "@everyone" not in body and "@\u2060everyone" in body


def test_comment_stays_under_githubs_limit() -> None:
    task = {
        "id": "x",
        "model": "p/m",
        "status": "failed",
        "error": "e" * 500,
        "final_message": "m" * 10_000,
        "turns_completed": 0,
        "tool_calls": 0,
        "duration_s": 1.0,
        "usage": {},
        "requests": [],
        "events_file": "e",
    }
    report = Report.model_validate(
        {
            "batch_id": "r1",
            "task_file": "t.yaml",
            "started_at": "s",
            "finished_at": "f",
            "duration_s": 1.0,
            "tasks": [{**task, "run": f"x{i}"} for i in range(400)],
            "totals": {
                "tasks": 400,
                "completed": 0,
                "not_completed": 400,
                "requests": 0,
                "tool_calls": 0,
                "usage": {},
            },
        }
    )
    body = render_comment(report, Context())
    assert len(body) < 65_536 and "350 more run(s) in the report." in body
    assert "More final messages are in the report artifact." in body
