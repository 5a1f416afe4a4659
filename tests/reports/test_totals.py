"""A suite run's reward in every report: report.json's fields (old reports still read),
the mean reward with its interval per model and variant in summary.md, report.html and
junit.xml (schema-valid), and the interval's own properties."""

from __future__ import annotations

import datetime as dt
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from runner.reports.html import render_html
from runner.reports.json_report import build_report
from runner.reports.junit import render_junit
from runner.reports.markdown import render_markdown
from runner.reports.model import READS, Report, RunReport
from runner.reports.stats import mean_interval, wilson_interval
from runner.reports.totals import compute_totals, mean_reward
from tests.support.reports import GOLDEN, mixed_report, report, task


def graded(
    task_id: str, model: str, reward: float | None, status: str, **extra: object
) -> RunReport:
    t = task(task_id, model, status, requests=1)
    rewards = {} if reward is None else {"reward": reward, "file_exists": 1.0}
    return t.model_copy(
        update={"suite": f"harbor:{task_id}", "reward": reward, "rewards": rewards, **extra}
    )


def suite_report() -> Report:
    return report(
        [
            graded("a", "p/x", 1.0, "completed"),
            graded("b", "p/x", 0.5, "check_failed"),
            graded("c", "p/x", None, "error", error="verifier failed: no reward file"),
            graded("a", "p/y", 0.0, "check_failed", resolution="not"),
            graded("b", "p/y", 1.0, "completed", resolution="resolved"),
        ]
    )


def test_markdown_shows_mean_reward_and_each_grade() -> None:
    md = render_markdown(suite_report())
    assert "Mean reward (95% CI)" in md
    ci = mean_interval([1.0, 0.5])
    assert ci is not None
    assert f"0.75 ({ci[0]:.2f}-{ci[1]:.2f}) n=2" in md  # the errored run has no reward
    assert "| resolved (1) |" in md and "| not (0) |" in md and "| 0.5 |" in md


def test_markdown_without_suite_runs_is_unchanged() -> None:
    md = render_markdown(report([task("a", "p/x", "completed")]))
    assert "reward" not in md.lower()


def test_junit_carries_rewards_and_stays_valid() -> None:
    xml = render_junit(suite_report())
    xmlschema.XMLSchema(str(GOLDEN / "junit.xsd")).validate(xml)
    root = ET.fromstring(xml)
    out = {c.attrib["name"] + c.findtext("system-out", ""): c for c in root.iter("testcase")}
    text = "\n".join(out)
    assert "reward=0.5\n" in text and "reward.file_exists=1" in text
    assert "resolution=resolved" in text
    assert "verifier did not pass it" in xml
    suites = {
        s.attrib["name"]: {p.attrib["name"]: p.attrib["value"] for p in s.find("properties") or []}
        for s in root.iter("testsuite")
    }
    x = next(v for k, v in suites.items() if "p/x" in k)
    assert (x["mean_reward"], x["rewarded"]) == ("0.7500", "2")
    assert float(x["mean_reward_ci_low"]) < 0.75 < float(x["mean_reward_ci_high"])


def test_html_shows_mean_reward(tmp_path: Path) -> None:
    html = render_html(suite_report(), tmp_path)
    assert "Mean reward (95% CI)" in html and "0.50 (" in html


def test_report_json_round_trip_and_older_reports() -> None:
    r = suite_report()
    again = Report.model_validate_json(r.model_dump_json())
    assert [t.reward for t in again.runs] == [1.0, 0.5, None, 0.0, 1.0]
    old = r.model_dump(mode="json")
    old["schema_version"] = "runner.report/3.3"
    for run in old["runs"]:
        for key in ("suite", "agent", "reward", "rewards", "resolution", "verifier"):
            run.pop(key, None)
    back = Report.model_validate(old)
    assert {t.reward for t in back.runs} == {None} and {t.agent for t in back.runs} == {"model"}


@pytest.mark.parametrize(("passed", "runs"), [(0, 1), (1, 1), (2, 5), (7, 9), (30, 30)])
def test_mean_interval_is_wilson_for_zero_one_rewards(passed: int, runs: int) -> None:
    values = [1.0] * passed + [0.0] * (runs - passed)
    assert mean_interval(values) == pytest.approx(wilson_interval(passed, runs))


def test_mean_interval_bounds() -> None:
    assert mean_interval([]) is None
    assert mean_interval([0.5, 1.2]) is None  # outside [0, 1]: no interval claimed
    low, high = mean_interval([0.5] * 4) or (0.0, 0.0)
    assert 0.0 < low < 0.5 < high < 1.0
    assert mean_interval([0.5] * 400)[1] - mean_interval([0.5] * 400)[0] < high - low  # type: ignore[index]


def test_report_json_has_the_mean_reward_per_model_and_variant() -> None:
    """The numbers summary.md and junit.xml show, in report.json's totals, from the runs
    alone (so a merge of shards gets them too)."""
    runs = [
        *suite_report().runs,
        graded("a", "agent/oracle", 1.0, "completed", agent="oracle"),
        graded("c", "agent/oracle", 0.0, "check_failed", agent="oracle"),
        task("plain", "p/z", "completed"),  # no suite run: no group
    ]
    built = build_report(
        runs=runs,
        batch_id="b",
        task_file="t.yaml",
        started=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        finished=dt.datetime(2026, 1, 1, 0, 1, tzinfo=dt.UTC),
    )
    by_model = built.totals.reward_by_model
    assert list(by_model) == ["p/x", "p/y", "agent/oracle"]
    x = by_model["p/x"]
    ci = mean_interval([1.0, 0.5])
    assert ci is not None
    assert (x.rewarded, x.mean, x.ci_low, x.ci_high) == (
        2,
        0.75,
        round(ci[0], 4),
        round(ci[1], 4),
    )
    junit = ET.fromstring(render_junit(built))
    props = {
        s.attrib["name"]: {p.attrib["name"]: p.attrib["value"] for p in s.find("properties") or []}
        for s in junit.iter("testsuite")
    }
    for model, group in by_model.items():
        shown = next(v for k, v in props.items() if model in k)
        assert shown["mean_reward"] == f"{group.mean:.4f}"
        assert shown["mean_reward_ci_low"] == f"{group.ci_low:.4f}"
    assert by_model["agent/oracle"].mean == 0.5
    assert built.totals.reward_by_variant == {}  # no variants
    again = Report.model_validate_json(built.model_dump_json())
    assert again.totals.reward_by_model == by_model


def test_reward_by_variant_and_ungraded_groups() -> None:
    runs = [
        graded("a", "p/x", 1.0, "completed", variant="terse"),
        graded("a", "p/x", 0.0, "check_failed"),
        graded("b", "p/y", None, "error", variant="terse", error="verifier failed"),
    ]
    totals = compute_totals(runs)
    assert {k: (v.rewarded, v.mean) for k, v in totals.reward_by_variant.items()} == {
        "terse": (1, 1.0),
        "(none)": (1, 0.0),
    }
    y = totals.reward_by_model["p/y"]  # a suite run, never graded: said, with no mean
    assert (y.rewarded, y.mean, y.ci_low, y.ci_high) == (0, None, None, None)


def test_a_report_before_3_6_is_read_without_reward_groups() -> None:
    old = suite_report().model_dump(mode="json")
    old["schema_version"] = "runner.report/3.5"
    old["totals"].pop("reward_by_model", None)
    old["totals"].pop("reward_by_variant", None)
    back = Report.model_validate(old)
    assert back.totals.reward_by_model == {} and back.totals.reward_by_variant == {}
    assert "runner.report/3.5" in READS


def test_a_resolved_run_a_limit_stopped_passes_everywhere_and_says_the_limit() -> None:
    """Review 27b #3: `FAIL (requests) | resolved (1)` beside a pass rate of 0/1 and a mean
    reward of 1. The grade decides; the limit is shown beside it, never as a FAIL."""
    runs = [
        graded("a", "p/x", 1.0, "completed", resolution="resolved", stopped_by="max_requests"),
        graded(
            "b",
            "p/x",
            0.0,
            "check_failed",
            resolution="not",
            stopped_by="timeout",
            error="graded not (reward 0) by the suite's verifier",
        ),
    ]
    r = report(runs)
    md = render_markdown(r)
    assert "| PASS (agent stopped: requests) | resolved (1) |" in md
    assert "| FAIL (check; agent stopped: timeout) | not (0) |" in md
    assert "FAIL (requests)" not in md
    root = ET.fromstring(render_junit(r))
    cases = {c.attrib["name"]: c for c in root.iter("testcase")}
    a = next(c for n, c in cases.items() if n.startswith("a"))
    assert a.find("failure") is None and a.find("error") is None
    assert "stopped_by=max_requests" in (a.findtext("system-out") or "")
    props = {p.attrib["name"]: p.attrib["value"] for p in root.iter("property")}
    assert props["pass_rate"] == "0.5000" and props["mean_reward"] == "0.5000"
    totals = compute_totals(runs)
    assert totals.pass_rate == totals.reward_by_model["p/x"].mean == 0.5


def by_task(reward: dict[str, list[float]], model: str = "p/x") -> list[RunReport]:
    return [
        graded(tid, model, v, "completed" if v >= 1 else "check_failed", repeat=i + 1)
        for tid, values in reward.items()
        for i, v in enumerate(values)
    ]


def test_the_mean_reward_interval_takes_the_task_as_the_unit() -> None:
    """Review 27b #11: 4 tasks x 4 repeats were n=16, as if the repeats were independent
    samples. Per-task means first: n=4, the mean of the task means, and the Wilson
    interval on that mean with n=4, checked against a hand computation."""
    runs = by_task(
        {
            "a": [1.0, 1.0, 1.0, 1.0],
            "b": [1.0, 0.0, 1.0, 0.0],
            "c": [0.0, 0.0, 0.0, 0.0],
            "d": [1.0, 0.0, 0.0, 0.0],
        }
    )
    n, mean, ci = mean_reward(runs)
    # Task means 1, 0.5, 0, 0.25: mean 0.4375. Wilson with n = 4, z = 1.96:
    # centre = (m + z^2/8) / (1 + z^2/4), half = z sqrt(m(1-m)/4 + z^2/64) / (1 + z^2/4).
    z = 1.959963984540054
    m = 0.4375
    centre = (m + z * z / 8) / (1 + z * z / 4)
    half = z * math.sqrt(m * (1 - m) / 4 + z * z / 64) / (1 + z * z / 4)
    assert (n, mean) == (4, m)
    assert ci == pytest.approx((centre - half, centre + half))
    assert ci == pytest.approx((0.1196, 0.8167), abs=1e-4)  # worked by hand, 4 decimals
    # Over 16 runs as if independent, the interval would be narrower: that was the bug.
    narrow = mean_interval([r.reward or 0.0 for r in runs])
    assert narrow is not None and narrow[1] - narrow[0] < ci[1] - ci[0]  # type: ignore[index]
    totals = compute_totals(runs)
    group = totals.reward_by_model["p/x"]
    assert (group.tasks, group.rewarded, group.mean) == (4, 16, 0.4375)
    assert "0.44 (0.12-0.82) n=4 tasks (16 runs)" in render_markdown(report(runs))
    root = ET.fromstring(render_junit(report(runs)))
    props = {p.attrib["name"]: p.attrib["value"] for p in root.iter("property")}
    assert (props["reward_tasks"], props["rewarded"]) == ("4", "16")


def test_runs_of_one_task_in_two_variants_are_one_sample_per_model_not_two() -> None:
    """Per model, a task's runs in each variant are one task; per variant, one each."""
    runs = [
        graded("a", "p/x", 1.0, "completed", variant="v1"),
        graded("a", "p/x", 0.0, "check_failed", variant="v2"),
        graded("b", "p/x", 1.0, "completed", variant="v1"),
        graded("b", "p/x", 1.0, "completed", variant="v2"),
    ]
    totals = compute_totals(runs)
    x = totals.reward_by_model["p/x"]
    assert (x.tasks, x.rewarded, x.mean) == (2, 4, 0.75)
    assert x.ci_low == round(mean_interval([0.5, 1.0])[0], 4)  # type: ignore[index]
    v1, v2 = totals.reward_by_variant["v1"], totals.reward_by_variant["v2"]
    assert (v1.tasks, v1.mean, v2.tasks, v2.mean) == (2, 1.0, 2, 0.5)


def test_a_task_whose_runs_partly_errored_weighs_as_much_as_any_other() -> None:
    runs = [
        *by_task({"a": [1.0, 1.0, 1.0], "b": [0.0]}),
        graded("b", "p/x", None, "error", repeat=2, error="verifier failed: no reward file"),
    ]
    assert mean_reward(runs)[:2] == (2, 0.5)


def test_totals_count_runs_under_their_name_and_old_reports_still_load() -> None:
    rep = mixed_report()
    data = json.loads(rep.model_dump_json())
    assert data["totals"]["runs"] == 5 and "tasks" not in data["totals"]
    data["totals"]["runs"] = data["totals"].pop("runs")  # as older runners wrote it
    assert Report.model_validate(data).totals.runs == 5
