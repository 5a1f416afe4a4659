"""runner/config/yaml_lines.py: YAML text to data with a line for every field, through
the loader (`parse_task_file`) and directly: line counting, aliases and merge keys,
tags, keys that are not strings, and PyYAML's errors said in one located line."""

from __future__ import annotations

import time

import pytest
import yaml

from runner.config import Limits
from runner.config.yaml_lines import ALIAS_EXPANSION_LIMIT, LineIndex, yaml_problem
from runner.errors import Problem
from tests.support.taskfiles import parse, problems


def test_parse_yaml_syntax_error_has_a_line() -> None:
    [p] = problems("version: 1\ntasks:\n  - id: a\n    prompt: [unclosed\n")
    assert p.field == "(syntax)" and p.message.startswith("not valid YAML")
    assert p.line is not None and p.line >= 4


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("!!int ten", "`ten` is not a valid !!int"),
        ("!!int ''", "an empty value is not a valid !!int"),
        ("!!float x", "`x` is not a valid !!float"),
        ("!!bool maybe", "`maybe` is not a valid !!bool"),
        ("!!timestamp soon", "`soon` is not a valid !!timestamp"),
    ],
)
def test_parse_explicit_tag_on_a_bad_value_is_located(value: str, message: str) -> None:
    [p] = problems(
        f"version: 1\ntasks:\n  - id: a\n    prompt: p\n    seed: 1\n"
        f"    limits:\n      max_requests: {value}\n"
    )
    assert (p.line, p.field, p.message) == (7, "tasks[0].limits.max_requests", message)


def test_parse_self_referencing_alias_is_a_problem() -> None:
    [p] = problems(
        "version: 1\ntasks: [{id: a, prompt: p}]\ndefaults:\n  limits: &l {max_requests: *l}\n"
    )
    assert (p.line, p.field) == (4, "defaults.limits")
    assert "*l" in p.message and "recursive" in p.message


def test_parse_billion_laughs_fails_fast() -> None:
    text = 'version: 1\ntasks: [{id: a, prompt: p}]\na: &a ["lol","lol","lol","lol","lol"]\n'
    for prev, name in zip("abcdefghijklmnopq", "bcdefghijklmnopqr", strict=True):
        text += f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 5) + "]\n"
    start = time.monotonic()
    got = problems(text)
    assert time.monotonic() - start < 5
    assert any("aliases expand" in p.message for p in got), got


def test_parse_aliases_used_within_reason_work_and_are_located() -> None:
    tf = parse(
        "version: 1\ndefaults: {limits: &l {max_requests: 3}}\n"
        "tasks:\n  - &t {id: a, prompt: p, limits: *l}\n  - {id: b, prompt: p}\n"
    )
    assert tf.tasks[0].limits == Limits(max_requests=3)
    # An alias in a sequence is blamed where it stands, not where its anchor is.
    got = problems(
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n    turns: [&e ' ', ok,\n      *e]\n"
    )
    assert {(p.line, p.field) for p in got} == {(5, "tasks[0].turns[0]"), (6, "tasks[0].turns[2]")}


def test_parse_merge_keys_are_located_at_the_merged_key() -> None:
    got = problems(
        "version: 1\ndefaults: &d\n  sandbox: read-only\n  shell_timeout_ms: 0\n"
        "tasks:\n  - <<: *d\n    id: a\n    prompt: p\n"
    )
    assert {(p.line, p.field) for p in got} == {
        (4, "defaults.shell_timeout_ms"),
        (4, "tasks[0].shell_timeout_ms"),
    }


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            'version: 1\ntasks:\n  - id: a\n    prompt: "a\u2028b\u0085c\u2029d"\n'
            "    limits: {max_requests: 0}\n",
            5,
        ),
        (
            "version: 1\ntasks:\n  - id: a\n    prompt: 'a\x85b'\n    turns: [\"c\u2029d\"]\n"
            "    limits: {max_requests: 0}\n",
            6,
        ),
    ],
)
def test_parse_lines_count_newlines_only(text: str, line: int) -> None:
    [p] = problems(text)
    assert (p.line, p.field) == (line, "tasks[0].limits.max_requests")


def test_parse_control_character_is_one_located_line() -> None:
    [p] = problems('version: 1\n\ntasks: [{id: a, prompt: "x\x1by"}]\n')
    assert (p.line, p.field) == (3, "(syntax)")
    assert "U+001B" in p.message and "\n" not in p.message and "position" not in p.message


def test_parse_yaml_syntax_error_keeps_its_context() -> None:
    [p] = problems("version: 1\ntasks: [{id: a,\n  prompt: p\n")
    assert p.line is not None and p.line >= 3
    assert "while parsing a flow mapping at line 2" in p.message and "\n" not in p.message


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("version: 1\ntasks: [{id: a, prompt: p}]\n1: one\n", 3, "1"),
        (
            "version: 1\ntasks: [{id: a, prompt: p}]\nproviders:\n  p:\n    base_url: 'http://h'\n"
            "    http_headers:\n      2024: x\n",
            7,
            "providers.p.http_headers.2024",
        ),
        ("version: 1\ntasks:\n  - id: a\n    prompt: p\n    null: x\n", 5, "tasks[0].null"),
        (
            "version: 1\ntasks:\n  - id: a\n    prompt: p\n    ? [x]\n    : y\n",
            5,
            "tasks[0].(list)",
        ),
    ],
)
def test_parse_non_string_keys(text: str, line: int, field: str) -> None:
    [p] = problems(text)
    assert (p.line, p.field) == (line, field)
    assert p.message.startswith("keys must be strings")


def test_line_index_counts_only_newlines() -> None:
    text = "a\nb\u2028c\r\nd\x85e"
    at = LineIndex(text)
    assert [at(text.index(c)) for c in "abcde"] == [1, 2, 2, 3, 3]
    assert at(len(text)) == 3 and LineIndex("")(0) == 1


def test_a_bare_equals_sign_is_text_and_a_key_written_twice_names_the_first() -> None:
    """YAML 1.1 tags `=` as a "value", which SafeLoader cannot build: it is read as text."""
    assert parse("version: 1\ntasks: [{id: a, prompt: =}]\n").tasks[0].prompt == "="
    [p] = problems("version: 1\ntasks: [{id: a, prompt: p}]\nversion: 1\n")
    assert (p.line, p.field) == (3, "version")
    assert p.message == "duplicate key; each key may appear once (first at line 1)"


def test_a_character_past_latin1_is_shown_as_its_escape() -> None:
    [p] = problems('version: 1\ntasks: [{id: a, prompt: "x\ufffe"}]\n')
    assert (p.line, p.field) == (2, "(syntax)")
    assert p.message == (
        "not valid YAML: character U+FFFE is not allowed; inside a double-quoted string "
        "write it as \\ufffe"
    )


def test_an_error_without_a_mark_is_one_line_without_a_line_number() -> None:
    p = yaml_problem(yaml.YAMLError("broken\n   stream\x07"), "f.yaml", LineIndex(""))
    assert p == Problem("f.yaml", None, "(syntax)", "not valid YAML: broken stream\\x07")


def test_aliases_just_under_the_limit_load_and_one_more_level_is_refused() -> None:
    """Ten aliases of ten aliases of ...: x3 stands for 11,111 values and loads; x4 for
    111,111, past the limit, and is blamed itself (not x5, which holds it)."""

    def nested(levels: int) -> str:
        text = "version: 1\ntasks: [{id: a, prompt: p}]\nx0: &x0 [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
        for n in range(1, levels):
            text += f"x{n}: &x{n} [" + ", ".join([f"*x{n - 1}"] * 10) + "]\n"
        return text

    assert not any("aliases" in p.message for p in problems(nested(4)))
    got = [p for p in problems(nested(5)) if "aliases" in p.message]
    assert [(p.line, p.field) for p in got] == [(7, "x4")]
    assert got[0].message == (
        f"aliases expand this to more than {ALIAS_EXPANSION_LIMIT:,} values; refusing to load it"
    )
