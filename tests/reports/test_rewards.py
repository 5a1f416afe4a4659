"""A suite run's reward in every report: report.json's fields (old reports still read),
the mean reward with its interval per model and variant in summary.md, report.html and
junit.xml (schema-valid), and the interval's own properties."""

from __future__ import annotations

import datetime as dt
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
from runner.reports.totals import compute_totals
from tests.support.reports import GOLDEN, report, task


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
