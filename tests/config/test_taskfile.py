"""runner/config/taskfile.py: the task file as a whole: something to run, unique task ids
(the second one blamed), its top-level bounds, and the line map and source hash it keeps
for later passes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.config import TaskFile, field_line, load_task_file, source_sha256
from tests.support.taskfiles import parse, problems

TEXT = "version: 1\ndefaults:\n  limits: {max_requests: 3}\ntasks:\n  - id: a\n    prompt: p\n"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [("version: 1\n", 1, "(top level)"), ("version: 1\ntasks: []\n", 2, "tasks")],
)
def test_a_file_with_nothing_to_run_is_refused(text: str, line: int, field: str) -> None:
    [p] = problems(text)
    assert (p.line, p.field, p.message) == (
        line,
        field,
        "at least one task is needed (`tasks:`), or a suite (`suites:`)",
    )


def test_a_suite_alone_is_something_to_run() -> None:
    tf = parse("version: 1\nsuites: [{format: harbor, path: h}]\n")
    assert (tf.tasks, [s.path for s in tf.suites]) == ((), ["h"])


def test_a_duplicate_id_carries_where_both_are_for_the_message() -> None:
    with pytest.raises(ValidationError) as caught:
        TaskFile.model_validate(
            {"version": 1, "tasks": [{"id": i, "prompt": "p"} for i in ("a", "b", "a")]}
        )
    [err] = caught.value.errors()
    assert err["type"] == "duplicate_task_id"
    assert err.get("ctx") == {"id": "'a'", "index": 2, "first": 0}


@pytest.mark.parametrize(
    ("snippet", "words"),
    [
        ("max_environments: 0", "greater than or equal to 1"),
        ("max_environments: 10001", "less than or equal to 10000"),
        ("max_environments: true", "must be a valid integer, got a boolean"),
        ("secrets: [lower-case]", "must be an environment variable name"),
    ],
)
def test_top_level_bounds(snippet: str, words: str) -> None:
    [p] = problems(f"version: 1\n{snippet}\ntasks: [{{id: a, prompt: p}}]\n")
    assert p.line == 2 and words in p.message


def test_field_line_is_exact_or_the_nearest_enclosing_field() -> None:
    tf = parse(TEXT)
    assert field_line(tf, ("defaults", "limits", "max_requests")) == 3
    assert field_line(tf, ("tasks", 0, "limits", "timeout_s")) == 5
    assert field_line(tf, ("tasks", 0, "limits"), exact=True) is None
    assert field_line(tf, ("tasks", 0, "prompt"), exact=True) == 6


def test_the_source_hash_is_of_the_bytes_as_read(tmp_path: Path) -> None:
    """Of the bytes, not the text: a BOM and CRLF line ends count, so `--resume` sees
    any change to the file."""
    raw = b"\xef\xbb\xbf" + TEXT.replace("\n", "\r\n").encode()
    path = tmp_path / "tasks.yaml"
    path.write_bytes(raw)
    loaded = load_task_file(path)
    assert source_sha256(loaded) == hashlib.sha256(raw).hexdigest()
    assert source_sha256(parse(TEXT)) == ""
    assert loaded == parse(TEXT)  # the hash and the line map are not part of the value
