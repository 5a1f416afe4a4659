"""What the Action writes for people: step outputs and the sticky comment, with run-derived
text inert and the comment under GitHub's size limit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runner.errors import RunnerError
from runner.github import Context, format_outputs, outputs_for, readme_with_docs, render_comment
from runner.github.context import REPLY_MARKER, TASK_MARKER
from runner.github.render import DOCS_END, DOCS_START, final_message, render_pr_body
from runner.reports.model import CheckReport, Report
from tests.support.gha import parse_output_file
from tests.support.reports import mixed_report, report, result, task, usage


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


def test_outputs_name_only_pushed_branches_and_plain_numbers() -> None:
    pushed = result("runner/a").model_copy(update={"pushed": "refs/heads/runner/a"})
    runs = [
        task("a", "p/m", "completed", res=pushed, run="a.r1", cost_usd=0.5),
        task("b", "p/m", "failed", res=result("local-only"), run="b.r1", cost_usd=1234.5),
        task("c", "p/m", "skipped", run="c.r1", cost_usd=0.0),
    ]
    values = outputs_for(report(runs), "out/report.json")
    assert values["branches"] == '{"a.r1": "runner/a"}' and values["branch"] == "runner/a"
    assert (values["runs"], values["passed"], values["failed"]) == ("3", "1", "1")
    assert values["cost"] == "1235.0000" and values["tokens"] == "3600"
    assert values["cache-hit-ratio"] == "0.6000" and values["report"] == "out/report.json"


def test_unknown_cost_and_ratio_are_empty_outputs() -> None:
    nothing = usage(0, 0, 0)
    values = outputs_for(report([task("a", "p/m", "failed", u=nothing)]), "r.json")
    assert values["cost"] == "" and values["cache-hit-ratio"] == ""
    assert values["branch"] == "" and values["branches"] == "{}"


def test_final_message_is_the_only_runs_or_each_under_its_name() -> None:
    one = report([task("a", "p/m", "completed", final_message="done\n")])
    assert final_message(one) == "done\n"
    assert final_message(report([task("a", "p/m", "failed", final_message="  ")])) == ""
    many = report(
        [
            task("a", "p/m", "completed", run="a.r1", final_message="first"),
            task("b", "p/m", "failed", run="b.r1"),
            task("c", "p/m", "completed", run="c.r1", final_message="third"),
        ]
    )
    assert final_message(many) == "## a.r1\n\nfirst\n\n## c.r1\n\nthird"


def test_a_pr_body_says_what_ran_with_its_text_inert() -> None:
    check = CheckReport(
        command="make | lint", exit_code=2, passed=False, output_tail="x", duration_s=1.0
    )
    run = task(
        "fix @octocat", "p/m", "failed", run="fix.r1", check=check, final_message="see @here"
    )
    body = render_pr_body(run, report([run], batch_id="b1"), Context(run_id="9"))
    assert body.startswith(TASK_MARKER.format(run="fix.r1") + "\n")
    assert "- Check `make \\| lint`: failed (exit 2)" in body
    assert "@octocat" not in body and "@here" not in body
    assert "batch id `b1`" in body


def test_a_reply_links_only_a_comment_of_this_repository() -> None:
    def reply(url: str) -> str:
        event = {"comment": {"html_url": url}}
        ctx = Context(repository="acme/app", event=event)
        return render_comment(report([]), ctx, marker=REPLY_MARKER).splitlines()[3]

    own = "https://github.com/acme/app/pull/7#issuecomment-1"
    assert reply(own) == f"In answer to [this comment]({own})."
    for other in ("https://github.com/evil/app/pull/7", "https://evil.test/x", own + ")x", ""):
        assert reply(other) == "In answer to a comment.", other


ACTION = {
    "inputs": {"prompt": {"description": "what | to\n  do"}, "sandbox": {"default": "auto"}},
    "outputs": {"cost": {"description": "US dollars"}},
}


def test_the_readme_tables_replace_what_is_between_the_markers() -> None:
    readme = f"# Title\n{DOCS_START}\nstale\n{DOCS_END}\nafter\n"
    done = readme_with_docs(readme, ACTION)
    assert done.startswith(f"# Title\n{DOCS_START}\n") and done.endswith(f"{DOCS_END}\nafter\n")
    assert "stale" not in done and readme_with_docs(done, ACTION) == done
    assert "| `prompt` |  | what \\| to do |" in done
    assert "| `sandbox` | `auto` |  |" in done and "| `cost` | US dollars |" in done


@pytest.mark.parametrize(
    "readme",
    ["no markers", f"{DOCS_START}\n{DOCS_START}\n{DOCS_END}", f"{DOCS_END}\nx\n{DOCS_START}\n"],
    ids=["none", "two starts", "end first"],
)
def test_a_readme_without_one_pair_of_markers_is_refused(readme: str) -> None:
    with pytest.raises(RunnerError, match=r"^README needs one '<!-- action-docs:start"):
        readme_with_docs(readme, ACTION)


def test_action_failed_output_leaves_out_skipped_runs() -> None:
    out = outputs_for(mixed_report(), "runner-out/report.json")
    assert (out["runs"], out["passed"], out["failed"]) == ("5", "1", "2")
