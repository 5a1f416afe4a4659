"""runner/config/messages.py: pydantic's validation errors said in the task file's words,
each at its field's dotted path and line, never in Python's terms."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runner.config import TaskFile
from runner.config.messages import validation_problems
from runner.errors import Problem
from tests.support.taskfiles import problems


def test_parse_reports_every_problem_with_its_line() -> None:
    got = problems(
        "version: 1\n"
        "tasks:\n"
        "  - id: a\n"
        "    prompt: ''\n"
        "  - id: 'b c'\n"
        "    prompt: p\n"
        "    limits: {max_requests: 0}\n"
    )
    assert {(p.line, p.field) for p in got} == {
        (4, "tasks[0].prompt"),
        (5, "tasks[1].id"),
        (7, "tasks[1].limits.max_requests"),
    }
    assert all(p.file == "t.yaml" for p in got)


def test_parse_unknown_field_lists_the_allowed_ones() -> None:
    [p] = problems("version: 1\ntasks: [{id: a, prompt: p, model_options: {temprature: 1}}]\n")
    assert p.field == "tasks[0].model_options.temprature"
    assert p.message.startswith("unknown field; allowed here: temperature, top_p, seed")


@pytest.mark.parametrize(
    ("snippet", "field", "words"),
    [
        ("version: true", "version", "must be 1, got a boolean"),
        ("version: 1.0", "version", "must be 1"),
        (
            "tasks: [{id: a, prompt: p, limits: {max_requests: yes}}]",
            "tasks[0].limits.max_requests",
            "must be a valid integer, got a boolean",
        ),
        (
            "tasks: [{id: a, prompt: p, limits: {max_requests: '5'}}]",
            "tasks[0].limits.max_requests",
            "must be a valid integer, got a string",
        ),
        (
            "tasks: [{id: a, prompt: p, limits: {timeout_s: on}}]",
            "tasks[0].limits.timeout_s",
            "must be a number, got a boolean",
        ),
        (
            "tasks: [{id: a, prompt: p, shell_timeout_ms: true}]",
            "tasks[0].shell_timeout_ms",
            "must be a valid integer",
        ),
        (
            "providers: {p: {base_url: 'http://h', store: 'yes'}}",
            "providers.p.store",
            "must be true or false, got a string",
        ),
        ("tasks: [{id: a, prompt: ' \t '}]", "tasks[0].prompt", "must not be empty"),
        ("tasks: [{id: a, prompt: p, turns: ['  ']}]", "tasks[0].turns[0]", "must not be empty"),
        (
            "tasks: [{id: a, prompt: p, instructions_file: ''}]",
            "tasks[0].instructions_file",
            "must not be empty",
        ),
        ("tasks: [{id: a, prompt: p, repo: ''}]", "tasks[0].repo", "must not be empty"),
        (
            "tasks: [{id: a, prompt: p, limits: 40}]",
            "tasks[0].limits",
            "must be a mapping, got an integer",
        ),
        (
            "tasks: [{id: a, prompt: p, tools: shell}]",
            "tasks[0].tools",
            "must be a list, got a string; allowed items: 'shell', 'apply_patch', 'update_plan'",
        ),
        ("tasks: [{id: a, prompt: p, turns: more}]", "tasks[0].turns", "must be a list"),
        ("providers: {'a.b': {base_url: 'http://h'}}", "providers.a.b", "letters, digits"),
        (
            "providers: {p: {base_url: 'http://h', query_params: [a]}}",
            "providers.p.query_params",
            "must be a mapping, got a list",
        ),
    ],
)
def test_parse_messages_speak_yaml(snippet: str, field: str, words: str) -> None:
    text = "version: 1\ntasks: [{id: a, prompt: p}]\n"
    key = snippet.split(":", 1)[0]
    text = "\n".join(ln for ln in text.splitlines() if not ln.startswith(key + ":"))
    got = problems(f"{text}\n{snippet}\n")
    assert [p.field for p in got] == [field], got
    [p] = got
    assert words in p.message
    for python in ("tuple", "instance of", "dict", "Input should", "Value error"):
        assert python not in p.message


def test_parse_duplicate_task_id_points_at_the_second() -> None:
    [p] = problems(
        "version: 1\ntasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: p}\n"
        "  - {id: a, prompt: p}\n"
    )
    assert (p.line, p.field) == (5, "tasks[2].id")
    assert p.message == "task id 'a' is used twice; ids must be unique (first at line 3)"


@pytest.mark.parametrize(
    ("snippet", "field", "message"),
    [
        (
            "{id: a, prompt: p, limits: {timeout_s: 1e3}}",
            "tasks[0].limits.timeout_s",
            "must be a number, got the string '1e3': YAML 1.1 reads a number in e-notation "
            "as text unless it has a '.' and a signed exponent; write 1.0e+12, or the number "
            "in full",
        ),
        (
            "{id: a, prompt: 5}",
            "tasks[0].prompt",
            "must be a valid string, got an integer (quote it to make it text)",
        ),
        (
            "{id: -a, prompt: p}",
            "tasks[0].id",
            "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
        ),
        (
            "{id: a, prompt: p, model: gpt}",
            "tasks[0].model",
            "must look like provider/model, e.g. openai/gpt-5.5 or local/smollm2",
        ),
        ("{id: a, prompt: p, tags: x}", "tasks[0].tags", "must be a list of strings, got a string"),
        (
            "{id: a, prompt: p, limits: {timeout_s: .inf}}",
            "tasks[0].limits.timeout_s",
            "must be a finite number",
        ),
        ("{id: a}", "tasks[0].prompt", "required field is missing"),
    ],
)
def test_each_kind_of_error_has_its_own_words(snippet: str, field: str, message: str) -> None:
    [p] = problems(f"version: 1\ntasks:\n  - {snippet}\n")
    assert (p.line, p.field, p.message) == (3, field, message)


def test_a_url_pattern_is_said_in_words() -> None:
    [p] = problems(
        "version: 1\nproviders:\n  p: {base_url: 'ftp://h'}\ntasks: [{id: a, prompt: p}]\n"
    )
    assert (p.line, p.field, p.message) == (
        3,
        "providers.p.base_url",
        "must be an http:// or https:// URL",
    )


def test_a_problem_without_its_own_line_takes_the_nearest_enclosing_one() -> None:
    """Called directly: a missing field has no line of its own, so it gets its task's;
    an error at a path the map does not reach at all has none."""
    with pytest.raises(ValidationError) as caught:
        TaskFile.model_validate({"version": 1, "tasks": [{"id": "a"}], "nope": 1})
    found = {p.field: p for p in validation_problems(caught.value, "f.yaml", {("tasks", 0): 7})}
    assert found["tasks[0].prompt"] == Problem(
        "f.yaml", 7, "tasks[0].prompt", "required field is missing"
    )
    assert (found["nope"].line, found["nope"].message[:40]) == (
        None,
        "unknown field; allowed here: version, pr",
    )
    assert len(found) == 2


def test_a_suite_variable_name_is_said_in_words_not_as_its_regex() -> None:
    """Found while mirroring the tests (issue 29): pydantic's "String should match pattern
    '^[A-Za-z_]...'" reached the user."""
    [p] = problems("version: 1\nsuites:\n  - {format: harbor, path: h, variables: {1A: b}}\n")
    assert (p.line, p.field, p.message) == (
        3,
        "suites[0].variables.1A",
        "must be a variable name: letters, digits and '_', not starting with a digit",
    )


def test_a_field_of_two_kinds_is_one_problem_at_its_own_path() -> None:
    """`codex_config` is true or a path: pydantic reports one error per kind, under its
    own names for them (`bool`, `function-after[_path_text(), str]`); the file's reader
    gets one problem at the field, saying both."""
    [p] = problems("version: 1\ncodex_config: ''\ntasks: [{id: a, prompt: p}]\n")
    assert (p.line, p.field) == (2, "codex_config")
    assert p.message.startswith("must not be empty")
    [p] = problems("version: 1\ncodex_config: 5\ntasks: [{id: a, prompt: p}]\n")
    assert (p.line, p.field) == (2, "codex_config") and "[" not in p.message
    two = problems("version: 1\ncodex_config: 5\ntasks: [{id: a, prompt: p, repo: 7}]\n")
    assert [(q.line, q.field) for q in two] == [(2, "codex_config"), (3, "tasks[0].repo")]


TASK = "tasks: [{id: a, prompt: p}]\n"


def test_a_bad_mcp_server_name_is_called_one() -> None:
    text = "version: 1\ndefaults: {mcp_servers: {'bad name': {command: [x]}}}\n"
    [p] = problems(text + TASK)
    assert (p.line, p.field) == (2, "defaults.mcp_servers.bad name")
    assert p.message.startswith("MCP server names may use only ASCII letters")
    [p] = problems("version: 1\nproviders: {'bad name': {base_url: 'http://x'}}\n" + TASK)
    assert p.message.startswith("provider names may use only")
