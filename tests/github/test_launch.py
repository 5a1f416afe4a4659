"""Starting the runner from the run step: what of its stderr becomes annotations."""

from __future__ import annotations

import sys

import pytest

from runner.github.launch import run_runner

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
