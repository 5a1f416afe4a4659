"""The `outputs` and `finish` steps: the job's outputs and the step's exit code agree with
what ran (the runner's exit code, a skip, a step of the action that failed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.github import main
from runner.github.outcome import step_exit
from tests.support.gha import parse_output_file
from tests.support.threads import report_file


def outputs_of(tmp_path: Path, *argv: str) -> tuple[int, dict[str, str]]:
    out = tmp_path / "output"
    code = main(list(argv), env={"GITHUB_OUTPUT": str(out)})
    return code, parse_output_file(out.read_text()) if out.exists() else {}


def test_finish_maps_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["finish", "--exit-code", "0"]) == 0
    assert main(["finish", "--exit-code", "1"]) == 1
    assert main(["finish", "--exit-code", "1", "--fail-on-task-failure", "false"]) == 0
    assert main(["finish", "--exit-code", "2", "--fail-on-task-failure", "false"]) == 2
    assert main(["finish", "--exit-code", ""]) == 3
    assert "::error title=runner::" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("code", "fail", "expected"),
    [(1, " TRUE ", 1), (1, "false", 0), (1, "", 0), (0, "true", 0), (3, "false", 3)],
)
def test_step_exit_softens_only_a_task_failure(code: int, fail: str, expected: int) -> None:
    assert step_exit(code, fail) == expected


def test_a_failed_step_of_the_action_makes_the_conclusion_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, values = outputs_of(
        tmp_path,
        *["finish", "--exit-code", "0", "--conclusion", "success"],
        *["--outcomes", "run=success comment=failure upload=success"],
    )
    assert (code, values) == (0, {"conclusion": "failure"})
    assert "conclusion: failure (the comment step failed)" in capsys.readouterr().out


@pytest.mark.parametrize("step", ["gate", "run"])
def test_a_failed_gate_or_run_step_is_exit_2(tmp_path: Path, step: str) -> None:
    argv = ["finish", "--exit-code", "0", "--outcomes", f"{step}=failure"]
    assert outputs_of(tmp_path, *argv) == (2, {"conclusion": "failure"})


def test_a_skip_finishes_green_whatever_the_exit_code(tmp_path: Path) -> None:
    argv = ["finish", "--exit-code", "", "--allowed", "false", "--conclusion", "skipped"]
    assert outputs_of(tmp_path, *argv) == (0, {"conclusion": "skipped"})
    argv = ["finish", "--exit-code", "1", "--skipped", "no key on a fork"]
    assert outputs_of(tmp_path, *argv)[0] == 0


def test_outputs_of_a_refused_run_say_skipped_and_why(tmp_path: Path) -> None:
    code, values = outputs_of(
        tmp_path, "outputs", "--report", str(tmp_path / "none.json"), "--allowed", "false",
        "--reason", "bob has no write access",
    )  # fmt: skip
    assert code == 0
    assert values["conclusion"] == "skipped" and values["notice"] == "bob has no write access"
    assert values["report"] == "" and values["branches"] == "{}"


def test_outputs_of_a_run_come_from_its_report(tmp_path: Path) -> None:
    report = str(report_file(tmp_path / "report.json", error="boom"))
    argv = ["outputs", "--report", report, "--exit-code", "1", "--batch-id", "r1"]
    code, values = outputs_of(tmp_path, *argv)
    assert code == 0
    assert values["conclusion"] == "failure" and values["report"] == report
    assert (values["runs"], values["passed"], values["failed"]) == ("1", "0", "1")


def test_outputs_refuse_a_report_of_another_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pull request can commit a report.json of its own: it is never published."""
    report = str(report_file(tmp_path / "report.json"))
    argv = ["outputs", "--report", report, "--exit-code", "0", "--batch-id", "other"]
    assert outputs_of(tmp_path, *argv) == (2, {})
    assert "is not the report of this run (its batch is not 'other')" in capsys.readouterr().out


def test_outputs_without_a_report_still_name_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["outputs", "--report", str(tmp_path / "none.json"), "--exit-code", "3"]
    code, values = outputs_of(tmp_path, *argv)
    assert code == 0 and values["conclusion"] == "failure" and values["final-message"] == ""
    assert f"::warning title=runner::no report at {tmp_path / 'none.json'}" in (
        capsys.readouterr().out
    )
