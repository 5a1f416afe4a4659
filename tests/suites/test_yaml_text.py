"""A suite's YAML to data and key lines: aliases and a key written twice refused, located."""

from __future__ import annotations

import pytest

from runner.errors import Problem
from runner.suites.yaml_text import KeyPath, dotted, line_of, load_yaml


def test_data_and_the_line_of_every_key_and_item() -> None:
    text = "name: t\nservices:\n  client:\n    volumes:\n      - a:/a\n      - b:/b\n"
    data, lines, problems = load_yaml(text, "c.yaml")
    assert problems == []
    assert data == {"name": "t", "services": {"client": {"volumes": ["a:/a", "b:/b"]}}}
    assert lines[("name",)] == 1 and lines[("services", "client")] == 3
    assert lines[("services", "client", "volumes", 0)] == 5
    assert lines[("services", "client", "volumes", 1)] == 6


def test_an_empty_file_is_no_data_and_no_problem() -> None:
    assert load_yaml("", "c.yaml") == (None, {}, [])
    assert load_yaml("# only a comment\n", "c.yaml") == (None, {}, [])


def test_an_alias_is_refused_at_its_line() -> None:
    text = "a: &x [1, 2]\nb: *x\n"
    assert load_yaml(text, "t.yaml") == (
        None,
        {},
        [Problem("t.yaml", 2, "(syntax)", "aliases are not allowed")],
    )


def test_a_key_written_twice_is_refused_even_spelled_otherwise() -> None:
    """`yes` and `true` are one key to a YAML 1.1 loader, so both are the same key here."""
    data, lines, problems = load_yaml("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", "t.yaml")
    assert data is None and lines == {}
    assert [(p.line, p.field) for p in problems] == [(4, "b.c"), (5, "a")]
    assert "first at line 3" in problems[0].message
    assert "first at line 1" in problems[1].message
    _, _, same = load_yaml("yes: 1\ntrue: 2\n", "t.yaml")
    assert [(p.line, "first at line 1" in p.message) for p in same] == [(2, True)]
    assert load_yaml("'1': a\n1: b\n", "t.yaml")[2] == []  # a string and an int differ


@pytest.mark.parametrize(
    ("text", "line"),
    [("a: [1, 2\n", 2), ("a: b: c\n", 1), ("\tkey: 1\n", 1)],
)
def test_bad_yaml_is_located_not_raised(text: str, line: int) -> None:
    data, _, (problem,) = load_yaml(text, "t.yaml")
    assert data is None
    assert (problem.file, problem.line, problem.field) == ("t.yaml", line, "(syntax)")
    assert problem.message.startswith("not valid YAML: ")


def test_a_python_tag_is_refused_located_never_constructed() -> None:
    data, _, (problem,) = load_yaml("a: 1\nb: !!python/object/apply:os.system [id]\n", "t.yaml")
    assert data is None
    assert (problem.line, problem.field) == (2, "(syntax)")
    assert "python/object/apply" in problem.message


def test_line_of_falls_back_to_the_nearest_written_parent() -> None:
    lines: dict[KeyPath, int] = {(): 1, ("services",): 2, ("services", "client"): 3}
    assert line_of(("services", "client", "ports", 0), lines) == 3
    assert line_of(("version",), lines) == 1
    assert line_of(("x",), {}) is None


def test_dotted_names_a_key_path_as_a_user_writes_it() -> None:
    assert dotted(("services", "client", "volumes", 0)) == "services.client.volumes[0]"
    assert dotted((0, "a")) == "[0].a"
    assert dotted(()) == "(top level)"


def test_a_character_yaml_refuses_is_located_in_words() -> None:
    """libyaml's reader error carries no line and counts bytes: the line is counted here."""
    for text, line in (("a: 1\nb: x\x00y\n", 2), ("a: " + "é" * 40 + "\nb: 1\nc: \x07\n", 3)):
        data, lines, problems = load_yaml(text, "task.yaml")
        assert data is None and lines == {}
        [p] = problems
        assert (p.file, p.line, p.field) == ("task.yaml", line, "(syntax)")
        assert p.message.startswith("not valid YAML: character U+00") and "unicode" not in p.message
