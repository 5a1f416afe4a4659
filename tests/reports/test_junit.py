"""Tests for runner.reports.junit: schema-valid JUnit XML whatever the agents wrote.

The schema is the repo's copy, tests/golden/reports/junit.xsd, so the tests never read outside
the repository; a test checks the copy still matches ../shared when that is present.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml

from runner.reports.junit import render_junit, xml_safe
from tests.support.reports import (
    GOLDEN,
    benchmark_report,
    check_golden,
    mixed_report,
    report,
    result,
    sample_report,
    task,
    usage,
)

SCHEMA_COPY = GOLDEN / "junit.xsd"
SHARED_SCHEMA = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "junit.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMA_COPY))


def test_schema_copy_matches_shared() -> None:
    if not SHARED_SCHEMA.exists():
        pytest.skip(f"no shared schema at {SHARED_SCHEMA}")
    assert SCHEMA_COPY.read_bytes() == SHARED_SCHEMA.read_bytes(), (
        f"{SCHEMA_COPY} is stale; copy {SHARED_SCHEMA} over it"
    )


def test_sample_golden(schema: xmlschema.XMLSchema) -> None:
    xml = render_junit(sample_report())
    schema.validate(xml)
    check_golden("junit.xml", xml)


def test_structure() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    assert root.tag == "testsuites"
    assert root.attrib["name"] == "20260314-101500-ab12"
    assert root.attrib["time"] == "95.123"
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == (
        "12",
        "7",
        "2",
    )
    assert "disabled" not in root.attrib
    suites = root.findall("testsuite")
    assert [s.attrib["name"] for s in suites] == ["openai/gpt-5", "local/smollm2"]
    gpt, local = suites
    assert (gpt.attrib["tests"], gpt.attrib["failures"], gpt.attrib["errors"]) == ("5", "3", "1")
    assert (local.attrib["tests"], local.attrib["failures"], local.attrib["errors"]) == (
        "7",
        "4",
        "1",
    )
    assert gpt.attrib["time"] == "211.750"
    assert all("disabled" not in s.attrib for s in suites)
    cases = gpt.findall("testcase")
    assert [(c.attrib["name"], c.attrib["classname"]) for c in cases] == [
        ("fix-parser.openai-gpt-5.r1", "fix-parser"),
        ("add_tests.openai-gpt-5.r1", "add_tests"),
        ("refactor.openai-gpt-5.r1", "refactor"),
        ("lint.openai-gpt-5.r1", "lint"),
        ("bump.openai-gpt-5.r1", "bump"),
    ]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.attrib["type"] == "max_requests"
    assert failure.attrib["message"] == (
        "max_requests: stopped at the request limit (limits.max_requests): stopped after 20 turns"
    )
    assert failure.text == (
        "stopped after 20 turns\n\nFinal message:\n"
        "I still need to | run the tests\nand fix <things> & more"
    )
    scope = cases[2].find("failure")
    assert scope is not None and scope.attrib["type"] == "scope_violation"
    error = local.findall("testcase")[2].find("error")
    assert error is not None and error.attrib["type"] == "error"
    assert cases[2].attrib["time"] == "8.000"
    check = cases[3].find("failure")
    assert check is not None and check.attrib["type"] == "check_failed"
    assert check.attrib["message"] == (
        "check_failed: the check command failed: `ruff check .` exited 1"
    )
    assert check.text == (
        "Check `ruff check .` exited 1:\nE501 line too long\nFound 1 error."
        "\n\nFinal message:\nAll clean, I think."
    )
    # A zero duration still gets a time (junit-xml omits it).
    assert local.findall("testcase")[2].attrib["time"] == "0.000"


@pytest.mark.parametrize(
    ("status", "element", "reason"),
    [
        ("check_failed", "failure", "the check command failed"),
        ("max_requests", "failure", "stopped at the request limit (limits.max_requests)"),
        ("max_tool_calls", "failure", "stopped at the tool-call limit"),
        ("timeout", "failure", "timed out"),
        ("budget", "failure", "stopped at the token or cost budget"),
        ("failed", "failure", "the model or server refused to go on"),
        ("scope_violation", "failure", "changes outside the allowed scope"),
        ("error", "error", "the run failed with an error"),
        ("interrupted", "error", "stopped by Ctrl-C or SIGTERM"),
        ("rate_limited", "error", "still rate-limited after every retry"),
        ("quota_exhausted", "error", "the provider account is out of quota"),
    ],
)
def test_every_status_maps_to_failure_or_error(
    schema: xmlschema.XMLSchema, status: str, element: str, reason: str
) -> None:
    xml = render_junit(report([task("t", "p/m", status, error="why")]))
    schema.validate(xml)
    case = ET.fromstring(xml).find("testsuite/testcase")
    assert case is not None
    other = "error" if element == "failure" else "failure"
    assert case.find(other) is None
    el = case.find(element)
    assert el is not None
    assert el.attrib == {"type": status, "message": f"{status}: {reason}: why"}
    assert el.text == "why"


def test_suite_properties_are_the_model_totals() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    gpt, local = root.findall("testsuite")
    props = {p.attrib["name"]: p.attrib["value"] for p in gpt.iter("property")}
    assert {k: v for k, v in props.items() if "." not in k} == {
        "runs": "5",
        "finished": "4",
        "skipped": "0",
        "errored": "1",
        "passed": "1",
        "pass_rate": "0.2500",
        "tokens": "47900",
        "tokens_input": "45000",
        "tokens_cached": "37800",
        "tokens_uncached": "7200",
        "tokens_output": "2900",
        "tokens_reasoning": "300",
        "cache_hit_ratio": "0.8400",
        "cost_usd": "0.148700",
        "requests": "30",
        "user_turns": "26",  # the interrupted run was given its prompt: 1, not 0
        "tool_calls": "52",
        "duration_s": "211.750",
    }
    local_props = {p.attrib["name"]: p.attrib["value"] for p in local.iter("property")}
    # One run of local/smollm2 has no known price: no cost at all, not a partial sum.
    assert "cost_usd" not in local_props
    assert not any(k.endswith(".cost_usd") for k in local_props)


def test_run_numbers_in_system_out_only() -> None:
    """The schema has no testcase properties; the suite carries the model's totals only
    (one property per run and number made JUnit viewers unreadable), and each testcase's
    system-out a few key numbers."""
    root = ET.fromstring(render_junit(sample_report()))
    gpt, local = root.findall("testsuite")
    props = {p.attrib["name"]: p.attrib["value"] for p in gpt.iter("property")}
    assert not any("." in k for k in props) and len(props) == 18
    assert root.find("testsuite/testcase/properties") is None
    out = gpt.find("testcase/system-out")
    assert out is not None and out.text is not None
    assert out.text.splitlines() == [
        "status=completed",
        "tokens=12800",
        "cache_hit_ratio=0.7500",
        "cost_usd=0.042100",
        "requests=5",
        "duration_s=41.250",
        "branch=runner/fix-parser",
    ]
    # Unknown values are left out, not written as "" or 0.
    refactor = gpt.findall("testcase")[2].find("system-out")
    assert refactor is not None and "branch=" not in (refactor.text or "")


def test_not_started_run_is_skipped() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    local = root.findall("testsuite")[1]
    assert local.attrib["skipped"] == "1"
    (case,) = [c for c in local.findall("testcase") if c.find("skipped") is not None]
    assert case.attrib["name"] == "refactor.local-smollm2.r1"
    skipped = case.find("skipped")
    assert skipped is not None and skipped.attrib["message"].startswith("not started: budget")
    assert case.find("error") is None and case.find("failure") is None


def test_variant_is_a_run_property() -> None:
    root = ET.fromstring(render_junit(benchmark_report()))
    assert [s.attrib["name"] for s in root.findall("testsuite")] == [
        "openai/gpt-5",
        "local/smollm2",
    ]
    gpt = root.findall("testsuite")[0]
    assert len(gpt.findall("testcase")) == 12
    props = {p.attrib["name"]: p.attrib["value"] for p in gpt.iter("property")}
    assert props["passed"] == "6"


def test_loads_in_junitparser() -> None:
    """A second consumer, as CI plugins read the file: counts, results, messages, output."""
    xml = JUnitXml.fromstring(render_junit(sample_report()))
    suites = list(xml)
    assert [s.name for s in suites] == ["openai/gpt-5", "local/smollm2"]
    assert (xml.tests, xml.failures, xml.errors) == (12, 7, 2)
    gpt = suites[0]
    assert (gpt.tests, gpt.failures, gpt.errors, gpt.skipped) == (5, 3, 1, 0)
    assert gpt.time == pytest.approx(211.75)
    assert {p.name: p.value for p in gpt.properties()}["cost_usd"] == "0.148700"
    cases = {c.name: c for c in gpt}
    assert cases["fix-parser.openai-gpt-5.r1"].is_passed
    turns = cases["add_tests.openai-gpt-5.r1"]
    assert turns.is_failure and turns.classname == "add_tests"
    assert turns.time == pytest.approx(120.0)
    (failure,) = turns.result
    assert failure.type == "max_requests"
    assert failure.message == (
        "max_requests: stopped at the request limit (limits.max_requests): stopped after 20 turns"
    )
    assert "Final message" in (failure.text or "")
    assert "requests=20" in (turns.system_out or "").splitlines()
    bump = cases["bump.openai-gpt-5.r1"]
    assert bump.is_error and bump.result[0].type == "interrupted"


def test_what_gitlab_reads() -> None:
    """GitLab takes every testcase under any testsuite; its status is failed when it has
    <failure>, error when <error>, else success; name, classname, time, the failure text and
    system-out are shown."""
    root = ET.fromstring(render_junit(sample_report()))
    seen = {}
    for case in root.iter("testcase"):
        status = (
            "failed"
            if case.find("failure") is not None
            else "error"
            if case.find("error") is not None
            else "success"
        )
        seen[case.attrib["name"]] = (status, case.attrib["classname"], float(case.attrib["time"]))
    assert len(seen) == 12
    assert seen["docs.local-smollm2.r2"] == ("success", "docs", 7.5)
    assert seen["docs.local-smollm2.r1"] == ("error", "docs", 0.0)
    assert seen["bump.local-smollm2.r1"][0] == "failed"


def test_empty_report_is_valid(schema: xmlschema.XMLSchema) -> None:
    xml = render_junit(report([], duration_s=0.0))
    schema.validate(xml)
    root = ET.fromstring(xml)
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("0", "0", "0")


def test_special_characters_survive_visibly(schema: xmlschema.XMLSchema) -> None:
    nasty = (
        "a < b && c > d \"q\" 'q' ]]> \x00\x01\x08\x0b\x0c\x1b\x7f\x85\x9f \ud800\udfff"
        "\ufdd0\ufffe\uffff\U0001fffe \r\n\t end \u00e9\u4e2d\U0001f600"
    )
    xml = render_junit(
        report([task(nasty, nasty, "error", error=nasty, final_message=nasty, res=result(nasty))])
    )
    schema.validate(xml)
    root = ET.fromstring(xml)
    case = root.find("testsuite/testcase")
    assert case is not None
    assert case.attrib["name"] == xml_safe(nasty)
    error = case.find("error")
    assert error is not None and error.text is not None
    assert "a < b && c > d" in error.text
    # U+0085 (NEL) is legal XML and junit-xml keeps it: it stays as it is.
    assert "\\x00\\x01\\x08\\x0b\\x0c\\x1b\\x7f\x85\\x9f \\ud800\\udfff" in error.text
    assert "\\ufdd0\\ufffe\\uffff\\U0001fffe" in error.text
    assert "\u00e9\u4e2d\U0001f600" in error.text
    assert "\n" not in error.attrib["message"]


def test_long_message_is_truncated_but_text_is_not() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    failure = root.findall("testsuite")[1].find("testcase/failure")
    assert failure is not None and failure.text is not None
    assert len(failure.attrib["message"]) <= 200
    assert failure.attrib["message"].endswith("\u2026")
    assert "x" * 400 in failure.text


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
    seconds=st.floats(min_value=0, max_value=1e7, allow_nan=False),
)
def test_any_text_and_time_is_valid(text: str, seconds: float) -> None:
    schema = xmlschema.XMLSchema(str(SCHEMA_COPY))
    r = report(
        [
            task(
                text or "t",
                text or "p/m",
                "failed",
                error=text,
                final_message=text,
                duration_s=seconds,
                u=usage(10, 5, 1),
            )
        ],
        duration_s=seconds,
    )
    schema.validate(render_junit(r))


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 1e-9, 1e12])
def test_odd_durations_still_validate(schema: xmlschema.XMLSchema, seconds: float) -> None:
    schema.validate(
        render_junit(
            report([task("t", "p/m", "completed", duration_s=seconds)], duration_s=seconds)
        )
    )


def test_property_names_say_prefix_reuse_and_user_turns() -> None:
    """The words of summary.md and the README: "prefix reuse" (the share of input repeating
    the thread's previous request; report.json keeps `ideal_cache_ratio`) and user turns
    next to model requests."""
    r = sample_report()
    first = r.runs[0]
    usage = first.usage.model_copy(
        update={"ideal_cache_ratio": 0.8, "ideal_cached_tokens": first.usage.input_tokens}
    )
    r = r.model_copy(update={"runs": [first.model_copy(update={"usage": usage}), *r.runs[1:]]})
    root = ET.fromstring(render_junit(r))
    names = {p.attrib["name"] for p in root.iter("property")}
    assert {"prefix_reuse_ratio", "user_turns", "requests"} <= names
    assert not names & {"ideal_cache_ratio", "turns"}


def test_junit_root_has_no_skipped_attribute_because_the_schema_forbids_it() -> None:
    schema = xmlschema.XMLSchema(str(SCHEMA_COPY))
    xml = render_junit(mixed_report())
    schema.validate(xml)
    assert 'skipped="2"' in xml  # on the suite, where the schema allows it
    rooted = xml.replace("<testsuites ", '<testsuites skipped="2" ', 1)
    assert not schema.is_valid(rooted)
