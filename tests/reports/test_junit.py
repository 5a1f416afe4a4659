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

from runner.reports.junit import render_junit, xml_safe
from tests.reports import GOLDEN, check_golden, report, result, sample_report, task, usage

SCHEMA_COPY = GOLDEN / "junit.xsd"
SHARED_SCHEMA = Path(__file__).resolve().parents[2].parent / "shared" / "schemas" / "junit.xsd"


@pytest.fixture(scope="module")
def schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMA_COPY))


def test_schema_copy_matches_shared() -> None:
    if not SHARED_SCHEMA.exists():
        pytest.skip(f"no shared schema at {SHARED_SCHEMA}")
    assert SCHEMA_COPY.read_bytes() == SHARED_SCHEMA.read_bytes(), (
        f"{SCHEMA_COPY} is stale; copy {SHARED_SCHEMA} over it")


def test_sample_golden(schema: xmlschema.XMLSchema) -> None:
    xml = render_junit(sample_report())
    schema.validate(xml)
    check_golden("junit.xml", xml)


def test_structure() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    assert root.tag == "testsuites"
    assert root.attrib["name"] == "20260314-101500-ab12"
    assert root.attrib["time"] == "95.123"
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("8", "5", "1")
    assert "disabled" not in root.attrib
    suites = root.findall("testsuite")
    assert [s.attrib["name"] for s in suites] == ["openai/gpt-5", "local/smollm2"]
    gpt, local = suites
    assert (gpt.attrib["tests"], gpt.attrib["failures"], gpt.attrib["errors"]) == ("4", "3", "0")
    assert (local.attrib["tests"], local.attrib["failures"], local.attrib["errors"]) == (
        "4", "2", "1")
    assert gpt.attrib["time"] == "199.250"
    assert all("disabled" not in s.attrib for s in suites)
    cases = gpt.findall("testcase")
    assert [(c.attrib["name"], c.attrib["classname"]) for c in cases] == [
        ("fix-parser", "openai/gpt-5"), ("add_tests", "openai/gpt-5"),
        ("refactor", "openai/gpt-5"), ("lint", "openai/gpt-5")]
    assert cases[0].find("failure") is None and cases[0].find("error") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.attrib["type"] == "max_turns"
    assert failure.attrib["message"] == (
        "max_turns: stopped at the turn limit: stopped after 20 turns")
    assert failure.text == ("stopped after 20 turns\n\nFinal message:\n"
                            "I still need to | run the tests\nand fix <things> & more")
    scope = cases[2].find("failure")
    assert scope is not None and scope.attrib["type"] == "scope_violation"
    error = local.findall("testcase")[2].find("error")
    assert error is not None and error.attrib["type"] == "error"
    assert cases[2].attrib["time"] == "8.000"
    check = cases[3].find("failure")
    assert check is not None and check.attrib["type"] == "check_failed"
    assert check.attrib["message"] == (
        "check_failed: the check command failed: `ruff check .` exited 1")
    assert check.text == ("Check `ruff check .` exited 1:\nE501 line too long\nFound 1 error."
                          "\n\nFinal message:\nAll clean, I think.")
    # A zero duration still gets a time (junit-xml omits it).
    assert local.findall("testcase")[2].attrib["time"] == "0.000"


def test_properties_on_suite_and_in_system_out() -> None:
    """The schema has no testcase properties: they go on the suite, prefixed by task id."""
    root = ET.fromstring(render_junit(sample_report()))
    gpt = root.findall("testsuite")[0]
    props = {p.attrib["name"]: p.attrib["value"] for p in gpt.iter("property")}
    assert props["fix-parser.tokens"] == "12800"
    assert props["fix-parser.cached_tokens"] == "9000"
    assert props["fix-parser.cache_hit_ratio"] == "0.7500"
    assert props["fix-parser.requests"] == "5"
    assert props["fix-parser.turns"] == "4"
    assert props["fix-parser.tool_calls"] == "9"
    assert props["fix-parser.duration_s"] == "41.250"
    assert props["fix-parser.branch"] == "runner/fix-parser"
    assert props["refactor.branch"] == ""
    assert props["lint.check"] == "failed"
    assert props["fix-parser.check"] == ""
    assert root.find("testsuite/testcase/properties") is None
    out = gpt.find("testcase/system-out")
    assert out is not None and out.text is not None
    assert "branch=runner/fix-parser" in out.text.splitlines()


def test_repeated_task_id_gets_distinct_property_names() -> None:
    root = ET.fromstring(render_junit(sample_report()))
    local = root.findall("testsuite")[1]
    names = [p.attrib["name"] for p in local.iter("property")]
    assert len(names) == len(set(names))
    props = {p.attrib["name"]: p.attrib["value"] for p in local.iter("property")}
    assert props["docs.status"] == "error"
    assert props["docs#2.status"] == "completed"
    assert props["docs#2.branch"] == "runner/docs-2"


def test_empty_report_is_valid(schema: xmlschema.XMLSchema) -> None:
    xml = render_junit(report([], duration_s=0.0))
    schema.validate(xml)
    root = ET.fromstring(xml)
    assert (root.attrib["tests"], root.attrib["failures"], root.attrib["errors"]) == ("0", "0", "0")


def test_special_characters_survive_visibly(schema: xmlschema.XMLSchema) -> None:
    nasty = "a < b && c > d \"q\" 'q' ]]> \x00\x01\x08\x0b\x0c\x1b\x7f\x85\x9f \ud800\udfff" \
            "\ufdd0\ufffe\uffff\U0001fffe \r\n\t end \u00e9\u4e2d\U0001f600"
    xml = render_junit(report([task(nasty, nasty, "error", error=nasty, final_message=nasty,
                                    res=result(nasty))]))
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


def test_unknown_status_is_a_failure(schema: xmlschema.XMLSchema) -> None:
    xml = render_junit(report([task("t", "p/m", "cancelled")]))
    schema.validate(xml)
    failure = ET.fromstring(xml).find("testsuite/testcase/failure")
    assert failure is not None and failure.attrib["message"] == "cancelled: cancelled"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(st.characters(codec=None, exclude_categories=()), max_size=40),
       seconds=st.floats(min_value=0, max_value=1e7, allow_nan=False))
def test_any_text_and_time_is_valid(text: str, seconds: float) -> None:
    schema = xmlschema.XMLSchema(str(SCHEMA_COPY))
    r = report([task(text or "t", text or "p/m", "failed", error=text, final_message=text,
                     duration_s=seconds, u=usage(10, 5, 1))], duration_s=seconds)
    schema.validate(render_junit(r))


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 1e-9, 1e12])
def test_odd_durations_still_validate(schema: xmlschema.XMLSchema, seconds: float) -> None:
    schema.validate(render_junit(report([task("t", "p/m", "completed", duration_s=seconds)],
                                        duration_s=seconds)))
