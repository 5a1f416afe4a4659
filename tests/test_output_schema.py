"""Structured final output: `output_schema` in the task file, `text.format` on the wire
(Responses) or `response_format` (Chat), the final answer checked and parsed into the
report, a bad answer failing the run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.config import parse_task_file, resolve
from runner.errors import ConfigError
from runner.items import message
from runner.output_schema import check_answer, text_format
from runner.providers import Prompt
from runner.providers.chat_wire import build_body, items_from_constrained
from runner.providers.constrained import Constrained
from tests.support.cli import run_cli
from tests.support.loopback import reply_function_call, reply_message

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"enum": ["pass", "fail"]}, "score": {"type": "integer"}},
    "required": ["verdict", "score"],
    "additionalProperties": False,
}


def test_format_is_codexs() -> None:
    assert text_format(SCHEMA) == {
        "type": "json_schema",
        "strict": True,
        "schema": SCHEMA,
        "name": "codex_output_schema",
    }


@pytest.mark.parametrize(
    ("answer", "value", "why"),
    [
        ('{"verdict":"pass","score":3}', {"verdict": "pass", "score": 3}, None),
        ("looks fine to me", None, "not valid JSON"),
        ("", None, "empty"),
        ('{"verdict":"maybe","score":3}', None, "at verdict: 'maybe' is not one of"),
        ('{"verdict":"pass"}', None, "at (top level): 'score' is a required property"),
    ],
)
def test_final_answer_is_checked(answer: str, value: Any, why: str | None) -> None:
    got, problem = check_answer(SCHEMA, answer)
    assert got == value
    assert (problem is None) if why is None else (why in str(problem))


def tf_text(schema: str) -> str:
    return f"version: 1\ntasks:\n  - id: a\n    prompt: judge\n    output_schema: {schema}\n"


def test_schema_inline_or_from_a_file(tmp_path: Path) -> None:
    inline = resolve(parse_task_file(tf_text(json.dumps(SCHEMA)), "t.yaml"), tmp_path)[0]
    (tmp_path / "s.json").write_text(json.dumps(SCHEMA))
    from_file = resolve(parse_task_file(tf_text("s.json"), "t.yaml"), tmp_path)[0]
    assert inline.output_schema == from_file.output_schema == SCHEMA


@pytest.mark.parametrize(
    ("schema", "files", "message"),
    [
        ("missing.json", {}, "is not a file"),
        ("bad.json", {"bad.json": "{nope"}, "cannot read JSON"),
        ("list.json", {"list.json": "[1]"}, "must hold a JSON object"),
        ('{"type": "objekt"}', {}, "not a valid JSON schema at type"),
    ],
)
def test_bad_schemas_are_located(
    tmp_path: Path, schema: str, files: dict[str, str], message: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError) as err:
        resolve(parse_task_file(tf_text(schema), "t.yaml"), tmp_path)
    (p,) = err.value.problems
    assert (p.line, p.field) == (5, "tasks[0].output_schema") and message in p.message


# ---------------------------------------------------------------- the Chat wire


def prompt(**kw: Any) -> Prompt:
    return Prompt(
        model="m",
        instructions="Judge.",
        input=[message("user", "judge")],
        tools=[],
        prompt_cache_key="t",
        text={"format": text_format(SCHEMA)},
        **kw,
    )


def test_chat_sends_response_format() -> None:
    body = build_body(prompt())
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"strict": True, "schema": SCHEMA, "name": "codex_output_schema"},
    }


def test_constrained_mode_puts_the_schema_in_the_answer_branch() -> None:
    body = build_body(prompt(), constrained=Constrained())
    answer = body["response_format"]["json_schema"]["schema"]
    assert answer["properties"]["answer"]["properties"]["verdict"] == {"enum": ["pass", "fail"]}
    assert "must match this JSON schema" in body["messages"][0]["content"]
    (item,) = items_from_constrained('{"answer":{"verdict":"fail","score":1}}', prompt())
    assert item.data["content"][0]["text"] == '{"verdict":"fail","score":1}'


# ---------------------------------------------------------------- a whole run


@pytest.mark.parametrize(
    ("answer", "status", "output", "error"),
    [
        ('{"verdict":"pass","score":9}', "completed", {"verdict": "pass", "score": 9}, None),
        ('{"verdict":"pass"}', "failed", None, "does not match the output schema"),
    ],
)
def test_run_reports_the_parsed_answer(
    loopback_thread: Any,
    git_repo: Path,
    tmp_path: Path,
    answer: str,
    status: str,
    output: Any,
    error: str | None,
) -> None:
    write = {"command": ["bash", "-c", "echo judged > verdict.txt"]}
    srv = loopback_thread([reply_function_call("shell", write), reply_message(answer)])
    (tmp_path / "verdict.json").write_text(json.dumps(SCHEMA))
    tasks = tmp_path / "t.yaml"
    tasks.write_text(f"""version: 1
providers: {{fake: {{base_url: "{srv.base_url}"}}}}
defaults: {{model: fake/m, model_options: {{verbosity: low}}}}
tasks:
  - {{id: judge, repo: "{git_repo}", prompt: Judge it., output_schema: verdict.json}}
""")
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == (0 if status == "completed" else 1), res.stderr
    assert all(
        r.json["text"] == {"verbosity": "low", "format": text_format(SCHEMA)} for r in srv.requests
    )
    task = json.loads((tmp_path / "out" / "report.json").read_text())["runs"][0]
    assert (task["status"], task["output"]) == (status, output)
    assert (task["error"] is None) if error is None else (error in task["error"])
    # The commit's trailer states the run's status, not the loop's.
    body = subprocess.run(
        ["git", "-C", str(git_repo), "log", "-1", "--format=%B", task["result"]["branch"]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"Runner-Status: {status}\n" in body
