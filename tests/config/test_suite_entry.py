"""runner/config/suite_entry.py: a `suites:` entry as one value: what its `select` may
say (nothing empty, nothing twice), which fields belong to which format, and the
settings an entry may not write."""

from __future__ import annotations

import pytest

from tests.support.taskfiles import parse, problems


def entry(fields: str) -> str:
    return f"version: 1\nsuites:\n  - {{format: harbor, path: h, {fields}}}\n"


@pytest.mark.parametrize(
    ("select", "words"),
    [
        ("{}", "selects nothing: give ids, globs, tags or count"),
        ("{ids: []}", "ids: an empty list would select every task"),
        ("{tags: [a, b, a]}", "tags: a written twice"),
        ("{globs: ['x*', 'x*'], ids: [k]}", "globs: x* written twice"),
        ("{count: 0}", "greater than or equal to 1"),
        ("{ids: ['']}", "must not be empty"),
    ],
)
def test_a_select_that_would_run_something_else_than_meant_is_refused(
    select: str, words: str
) -> None:
    [p] = problems(entry(f"select: {select}"))
    assert p.line == 3 and p.field.startswith("suites[0].select") and words in p.message


def test_an_unset_select_runs_every_task_and_a_written_one_keeps_its_values() -> None:
    (every,) = parse(entry("id_prefix: p")).suites
    assert (every.select.ids, every.select.count, every.select.seed) == ((), None, 0)
    (some,) = parse(entry("select: {globs: ['django__*'], count: 3, seed: 7}")).suites
    assert (some.select.globs, some.select.count, some.select.seed) == (("django__*",), 3, 7)


@pytest.mark.parametrize(
    ("fmt", "fields", "words"),
    [
        (
            "harbor",
            "prompt_template: 'x {problem_statement}'",
            "prompt_template is for format swe-bench, not harbor",
        ),
        ("terminal-bench", "verifier_timeout_s: 60", "verifier_timeout_s is for format swe-bench"),
        ("swe-bench", "variables: {A: b}", "variables are for formats harbor and terminal-bench"),
        ("harbor", "check: 'true'", "graded by their own verifier: remove `check`"),
        ("swe-bench", "verifier_timeout_s: 0.5", "greater than or equal to 1"),
        ("harbor", "variables: {1A: b}", "must be a variable name: letters, digits and '_'"),
        ("bigbench", "", "'harbor', 'terminal-bench' or 'swe-bench'"),
    ],
)
def test_fields_of_another_format_are_refused(fmt: str, fields: str, words: str) -> None:
    text = f"version: 1\nsuites:\n  - {{format: {fmt}, path: p, {fields}}}\n"
    found = problems(text.replace(", }", "}"))
    assert any(words in p.message for p in found), found
    assert all(p.line == 3 for p in found)


def test_null_fields_are_unset_and_the_entry_takes_the_settings_a_task_would() -> None:
    (s,) = parse(
        entry("image_template: null, model: p/m, limits: {max_requests: 4}, agent: oracle").replace(
            "version: 1\n", "version: 1\nproviders: {p: {base_url: 'http://h/v1'}}\n"
        )
    ).suites
    assert (s.model, s.agent, s.image_template, s.limits.max_requests) == ("p/m", "oracle", None, 4)
