"""runner.progress: what each display writes, rendered into a buffer (or a real pty for the
choice of display), with the same events and reports the batch hands it."""

from __future__ import annotations

import io
import os
import re
import select
from typing import Any

import pytest

from runner.progress import (
    GitHubProgress,
    LiveProgress,
    PlainProgress,
    Progress,
    QuietProgress,
    compact,
    make_progress,
)
from runner.reports.fmt import printable
from runner.reports.model import CheckReport, RunReport
from tests.support.reports import result, task, usage

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def request_event(inp: int, cached: int, out: int, cost: float | None = None) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "request.completed",
        "request": 1,
        "turn": 0,
        "usage": {
            "input_tokens": inp,
            "cached_tokens": cached,
            "uncached_tokens": inp - cached,
            "output_tokens": out,
            "reasoning_tokens": 0,
            "total_tokens": inp + out,
        },
    }
    if cost is not None:
        event["cost_usd"] = cost
    return event


def runs() -> list[RunReport]:
    return [
        task(
            "a",
            "openai/gpt-5",
            "completed",
            run="a.r1",
            u=usage(1000, 800, 50),
            cost_usd=0.02,
            final_message="Done.",
            res=result("runner/a"),
        ),
        task(
            "b",
            "openai/gpt-5",
            "check_failed",
            run="b.r1",
            u=usage(2000, 1000, 70),
            cost_usd=0.03,
            final_message="I think it works.\n" + "more\n" * 30,
            check=CheckReport(
                command="pytest -q",
                exit_code=1,
                passed=False,
                duration_s=1.0,
                output_tail="\n".join(f"line {i}" for i in range(40)),
            ),
        ),
        task(
            "c",
            "openai/gpt-5",
            "error",
            run="c.r1",
            u=usage(0, 0, 0),
            requests=0,
            error="provider error: HTTP 500",
            cost_usd=None,
        ),
    ]


def drive(p: Progress, reports: list[RunReport]) -> None:
    p.start(len(reports))
    for t in reports:
        p.run_started(t.run, t.model)
        p.event(t.run, {"type": "turn.started"})
        p.event(
            t.run,
            request_event(
                t.usage.input_tokens, t.usage.cached_tokens, t.usage.output_tokens, t.cost_usd
            ),
        )
        p.run_finished(t)
    p.close()


def test_plain_lines() -> None:
    buf = io.StringIO()
    drive(PlainProgress(buf), runs())
    assert buf.getvalue().splitlines() == [
        "runner: 3 runs",
        "[1/3] a.r1: completed: 2 requests, 4 tool calls, 1000 input tokens (80% cached), "
        "$0.0200, 12.5s",
        "  branch runner/a (2 files, +10 -3)",
        "[2/3] b.r1: check_failed: 2 requests, 4 tool calls, 2000 input tokens (50% cached), "
        "$0.0300, 12.5s",
        "[3/3] c.r1: error: 0 requests, 4 tool calls, 0 input tokens (- cached), 12.5s",
        "  error: provider error: HTTP 500",
        "runner: 3/3 runs done, 0 running, 1 failed, 1 errored, 3.0k tokens in (60% cached), "
        "120 out, $0.0500",
    ]


def test_plain_never_writes_escape_codes() -> None:
    buf = io.StringIO()
    nasty = "\x1b[2J\x1b]0;pwned\x07\rhidden\x00"
    drive(
        PlainProgress(buf),
        [task("x\x1b[31m", "p/m", "failed", run="x\x1b[31m.r1", error=nasty, final_message=nasty)],
    )
    out = buf.getvalue()
    assert "\x1b" not in out and "\r" not in out and "\x00" not in out and "\x07" not in out
    assert "\\x1b[2J" in out


def test_cost_is_never_a_partial_sum_in_disguise() -> None:
    buf = io.StringIO()
    p = PlainProgress(buf)
    p.start(2)
    p.run_started("a", "p/m")
    p.event("a", request_event(100, 0, 1, 0.5))
    p.run_started("b", "q/m")
    p.event("b", request_event(100, 0, 1))  # no price for this model
    assert p.tally.cost() == ">= $0.5000"
    p.event("a", request_event(100, 0, 1, 0.25))
    assert p.tally.tokens() == (300, 0, 3)
    assert p.tally.cost() == ">= $0.7500"
    local = PlainProgress(io.StringIO())
    local.start(1)
    local.run_started("l", "local/smollm2")
    local.event("l", request_event(100, 0, 1))
    assert local.tally.cost() == ""


def test_finished_report_replaces_the_event_counts() -> None:
    p = PlainProgress(io.StringIO())
    p.start(1)
    p.run_started("a.r1", "p/m")
    p.event("a.r1", request_event(10, 0, 1, 0.001))
    p.event("a.r1", {"type": "request.completed", "usage": None})
    p.event("a.r1", {"type": "request.completed", "usage": {"input_tokens": "x"}})
    p.run_finished(task("a", "p/m", "completed", run="a.r1", u=usage(500, 100, 9), cost_usd=0.125))
    assert p.tally.tokens() == (500, 100, 9)
    assert p.tally.cost() == "$0.1250"
    assert (p.tally.finished, p.tally.failed, len(p.tally.running)) == (1, 0, 0)


def test_github_groups_each_run_with_its_details() -> None:
    buf = io.StringIO()
    drive(GitHubProgress(buf), runs())
    lines = buf.getvalue().splitlines()
    assert lines[0] == "runner: 3 runs"
    groups = [i for i, line in enumerate(lines) if line.startswith("::group::")]
    assert [lines[i] for i in groups] == [
        "::group::a.r1 \u2014 completed",
        "::group::b.r1 \u2014 check_failed",
        "::group::c.r1 \u2014 error",
    ]
    assert lines.count("::endgroup::") == 3
    b = lines[groups[1] : groups[2]]
    assert b[1].startswith("[2/3] b.r1: check_failed")
    assert "check `pytest -q` failed (exit 1)" in b
    assert "  | line 39" in b and "  | line 20" in b and "  | line 19" not in b
    assert "final message:" in b and "  I think it works." in b
    assert "  ... (19 more lines in report.json)" in b
    c = lines[groups[2] :]
    assert "error: provider error: HTTP 500" in c
    assert lines[-1].startswith("runner: 3/3 runs done, 0 running, 1 failed, 1 errored")


def test_github_run_output_cannot_issue_workflow_commands() -> None:
    buf = io.StringIO()
    evil = "::endgroup::\n::add-mask::x\n::set-output name=a::b\n::error::fake\n%0A\r::warning::cr"
    drive(
        GitHubProgress(buf),
        [task("t", "p/m", "failed", run="t%0A::x\n.r1", error=evil, final_message=evil)],
    )
    lines = buf.getvalue().splitlines()
    # The title cannot end the line early or smuggle a command.
    assert lines[1] == "::group::t%250A::x%0A.r1 \u2014 failed"
    end = lines.index("::endgroup::")
    inside = lines[2:end]
    # Shown, but escaped by the one rule (the Actions runner trims leading space before it
    # looks for `::`), so none is obeyed.
    assert "  \\u003a:add-mask::x" in inside and "  \\u003a:endgroup::" in inside
    assert "error: ::add-mask::x" in inside  # not at the start of the line: inert as it is
    assert (
        inside[0] == "[1/1] t%0A::x\\x0a.r1: failed: 2 requests, 4 tool calls, 1000 input "
        "tokens (60% cached), 12.5s"
    )
    # The only commands are ours.
    ours = [line for line in lines if line.lstrip().startswith("::")]
    assert ours == [lines[1], "::endgroup::"]
    assert "\r" not in buf.getvalue()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_live_display_in_a_terminal() -> None:
    buf = io.StringIO()
    clock = Clock()
    p = LiveProgress(buf, force_terminal=True, width=120, clock=clock)
    p.start(3)
    for t in runs():
        p.run_started(t.run, t.model)
        clock.now += 2
        p.event(
            t.run,
            request_event(
                t.usage.input_tokens, t.usage.cached_tokens, t.usage.output_tokens, t.cost_usd
            ),
        )
        p.run_finished(t)
    p.close()
    raw = buf.getvalue()
    assert ANSI.search(raw), "a terminal gets a live (redrawn) display"
    text = ANSI.sub("", raw)
    assert "3/3 runs done" in text and "6.0s" in text
    display, last = text.rsplit("runner: ", 1)
    assert last.startswith("3/3 runs done, 0 running, 1 failed, 1 errored")
    final = display.rsplit("3/3 runs done", 1)[1]
    assert (
        "running 0 \u00b7 failed 1 \u00b7 errored 1 \u00b7 tokens 3.0k in, 120 out "
        "\u00b7 cache hit 60%"
    ) in final
    assert "cost >= $0.0500" not in final  # the errored run sent no request: nothing unknown
    assert "cost $0.0500" in final
    assert "[2/3] b.r1: check_failed" in text
    assert "error: provider error: HTTP 500" in text


def test_live_display_shows_running_runs_and_parses_no_markup() -> None:
    buf = io.StringIO()
    clock = Clock()
    p = LiveProgress(buf, force_terminal=True, width=120, clock=clock)
    p.start(6)
    for i in range(6):
        p.run_started(f"[bold red]r{i}[/]", "p/m")
    clock.now += 1
    p.event("[bold red]r0[/]", request_event(100, 25, 5))
    text = ANSI.sub("", buf.getvalue())
    assert "now: [bold red]r0[/], [bold red]r1[/], [bold red]r2[/], [bold red]r3[/] (+2)" in text
    assert "running 6" in text and "cache hit 25%" in text
    p.close()


def test_live_display_redraws_at_most_four_times_a_second() -> None:
    buf = io.StringIO()
    clock = Clock()
    p = LiveProgress(buf, force_terminal=True, width=100, clock=clock)
    p.start(1)
    p.run_started("a.r1", "p/m")
    before = buf.getvalue().count("0/1 runs done")
    for _ in range(200):
        p.event("a.r1", request_event(1, 0, 1))
        clock.now += 0.001  # 200 events within 0.2 s
    assert buf.getvalue().count("0/1 runs done") == before
    clock.now += 0.25
    p.event("a.r1", request_event(1, 0, 1))
    assert buf.getvalue().count("0/1 runs done") == before + 1
    p.close()


def test_make_progress_chooses_by_where_output_goes() -> None:
    assert isinstance(make_progress(io.StringIO(), env={}), PlainProgress)
    assert type(make_progress(io.StringIO(), env={})) is PlainProgress
    assert isinstance(make_progress(io.StringIO(), env={"GITHUB_ACTIONS": "true"}), GitHubProgress)
    main, follower = os.openpty()
    with (
        os.fdopen(main, "rb", buffering=0) as reader,
        os.fdopen(follower, "w", encoding="utf-8") as tty,
    ):
        assert tty.isatty()
        p = make_progress(tty, env={"TERM": "xterm"})
        assert isinstance(p, LiveProgress)
        p.start(1)
        p.close()
        seen = b""
        while b"0/1 runs done" not in seen and select.select([reader], [], [], 2)[0]:
            seen += reader.read(4096)  # a pty may hand the output over in pieces
        assert b"0/1 runs done" in seen
        assert type(make_progress(tty, env={"TERM": "dumb"})) is PlainProgress
        assert isinstance(make_progress(tty, env={"GITHUB_ACTIONS": "true"}), GitHubProgress)


def test_quiet_progress_writes_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    drive(QuietProgress(), runs())
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize(
    ("n", "text"), [(0, "0"), (999, "999"), (1000, "1.0k"), (12_345, "12.3k"), (4_560_000, "4.56M")]
)
def test_compact(n: int, text: str) -> None:
    assert compact(n) == text


def test_printable() -> None:
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("\x1b[0m\r\x7f\x9b\ud800") == "\\x1b[0m\\x0d\\x7f\\x9b\\ud800"


def test_final_line_counts_runs_never_started_apart() -> None:
    """A batch stopped by its budget or Ctrl-C: the runs that never started are neither
    failures nor errors, and the last line says how many there are."""
    buf = io.StringIO()
    p = PlainProgress(buf)
    p.start(5)
    for t in runs()[:2]:
        p.run_started(t.run, t.model)
        p.run_finished(t)
    p.close()
    assert (
        buf.getvalue()
        .splitlines()[-1]
        .startswith("runner: 2/5 runs done, 0 running, 1 failed, 0 errored, 3 not started, ")
    )
