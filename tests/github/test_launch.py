"""Starting the runner from the run step: what it sees (no step files, no ACTIONS_* token,
the key on a pipe), what it may change (the step files are put back) and which of its
error lines become annotations."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from runner.errors import RunnerError
from runner.github.launch import (
    read_key,
    restore_step_files,
    run_runner,
    runner_env,
    snapshot_step_files,
)

SERVER_TEXT = "upstream said:\nerror: line one\nerror: line two\n::warning::x"
BROKEN = (
    "runner: 1 run\n"
    "[1/1] review: failed: 0 requests\n"
    "  error: indented detail\n"
    "runner: 1/1 runs done, 0 running, 1 failed, 0 errored, 0 tokens in, 0 out\n"
    f"runner: the model server broke: {SERVER_TEXT}\n"
)
"""A runner that could not go on (exit 3): progress lines, then one error whose text,
lines that look like errors included, is a model server's."""
BAD_INPUT = "".join(f"error: tasks[{i}].prompt: required\n" for i in range(14))
"""A task file with 14 located problems (exit 2)."""


@pytest.mark.parametrize(
    ("stderr", "code", "expected"),
    [
        (
            BROKEN,
            3,
            ["the model server broke: " + SERVER_TEXT.replace("\n", "%0A")],
        ),
        (
            BAD_INPUT,
            2,
            [*(f"tasks[{i}].prompt: required" for i in range(10)), "4 more in the log"],
        ),
        (BROKEN + BAD_INPUT, 1, []),
    ],
    ids=["multi-line", "capped", "exit-1"],
)
def test_only_the_runners_own_errors_become_a_few_annotations(
    capfd: pytest.CaptureFixture[str], stderr: str, code: int, expected: list[str]
) -> None:
    script = f"import sys; sys.stderr.write({stderr!r}); sys.exit({code})"
    assert run_runner([sys.executable, "-I", "-c", script], {}, "") == code
    out, err = capfd.readouterr()
    annotated = len(expected) - ("4 more in the log" in expected)
    progress = [line for line in stderr.splitlines() if not line.startswith("error: tasks")]
    if code == 3:  # the annotated error is not printed twice
        assert err.splitlines() == progress[:4]
    elif code == 2:  # what is not annotated stays in the log
        assert err.splitlines() == stderr.splitlines()[annotated:]
    else:
        assert sorted(err.splitlines()) == sorted(stderr.splitlines())
    assert [line for line in out.splitlines() if line.startswith("::")] == [
        f"::error title=runner::{e}" for e in expected
    ]


def test_the_runner_sees_no_step_file_and_no_actions_token() -> None:
    env = {
        "ACTIONS_RUNTIME_TOKEN": "t",
        "ACTIONS_ID_TOKEN_REQUEST_URL": "u",
        "GITHUB_OUTPUT": "/o",
        "GITHUB_STEP_SUMMARY": "/s",
        "GITHUB_ENV": "/e",
        "GITHUB_TOKEN": "ghs",
        "MY_ACTIONS_X": "kept",
        "GITHUB_OUTPUT_DIR": "kept",
        "PATH": "/bin",
    }
    assert runner_env(env) == {
        "GITHUB_TOKEN": "ghs",
        "MY_ACTIONS_X": "kept",
        "GITHUB_OUTPUT_DIR": "kept",
        "PATH": "/bin",
    }


def test_step_files_changed_during_the_run_are_put_back(tmp_path: Path) -> None:
    output, summary, path_file = tmp_path / "output", tmp_path / "summary", tmp_path / "path"
    output.write_text("a<<x\n1\nx\n")
    summary.write_text("kept")
    env = {"GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
    env["GITHUB_PATH"] = str(path_file)  # absent before the run
    before = snapshot_step_files(env)
    output.write_text("conclusion<<x\nsuccess\nx\n")
    path_file.write_text("/tmp/evil\n")
    assert sorted(restore_step_files(before)) == sorted([str(output), str(path_file)])
    assert output.read_text() == "a<<x\n1\nx\n" and summary.read_text() == "kept"
    assert not path_file.exists()
    assert restore_step_files(before) == []


def pipe_with(data: bytes) -> int:
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def test_the_key_is_read_whole_from_its_pipe(tmp_path: Path) -> None:
    assert read_key(pipe_with(b"  sk-one \n")) == "sk-one"
    assert read_key(pipe_with(b"sk-\xff")) == "sk-\ufffd"  # not UTF-8: no traceback
    big = tmp_path / "key"  # more than a pipe holds, so more than one read
    big.write_bytes(b"k" * 200_000)
    assert read_key(os.open(big, os.O_RDONLY)) == "k" * 200_000


def test_a_key_of_two_lines_or_a_closed_descriptor_is_refused() -> None:
    with pytest.raises(RunnerError, match=r"^api-key must be one line"):
        read_key(pipe_with(b"sk-one\nsk-two\n"))
    fd = pipe_with(b"")
    os.close(fd)
    with pytest.raises(RunnerError, match=rf"^api-key: cannot read file descriptor {fd}: "):
        read_key(fd)


def test_the_secrets_go_to_the_runner_on_its_stdin_only(
    capfd: pytest.CaptureFixture[str],
) -> None:
    script = (
        "import os, sys; data = sys.stdin.read()\n"
        "sys.exit(0 if data == 'K=v\\n' and 'K' not in os.environ else 5)"
    )
    assert run_runner([sys.executable, "-I", "-c", script], {}, "K=v\n") == 0
    script = "import sys; sys.exit(0 if sys.stdin.read() == '' else 5)"
    assert run_runner([sys.executable, "-I", "-c", script], {}, "") == 0
    assert capfd.readouterr().out == ""
