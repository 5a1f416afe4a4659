"""The exception tree (runner/errors.py): the messages its classes build, and the few
facts the retry policy and the run status read from them (`retryable`, `request_fault`)."""

from __future__ import annotations

from runner.errors import (
    ConfigError,
    EncodingRefused,
    GitError,
    ModelError,
    ModelNoAnswer,
    NoAnswer,
    PathRefused,
    Problem,
    ProviderDown,
    RunEnds,
    StatusRefusal,
    UnsafeFileError,
)
from runner.vocabulary import RunStatus


def test_a_problem_names_file_line_and_field() -> None:
    assert str(Problem("t.yaml", 3, "tasks[0].id", "missing")) == "t.yaml:3: tasks[0].id: missing"
    assert str(Problem("t.yaml", None, "version", "must be 1")) == "t.yaml: version: must be 1"
    err = ConfigError([Problem("a", 1, "x", "bad"), Problem("b", None, "y", "worse")])
    assert str(err) == "a:1: x: bad\nb: y: worse" and len(err.problems) == 2


def refusal(status: int, *, retryable: bool = False) -> StatusRefusal:
    return StatusRefusal(
        "m", status=status, body="", code=None, retryable=retryable, rate_limit=False
    )


def test_only_a_refused_request_is_the_requests_fault() -> None:
    """`failed` for a request the server refused as such; `error` when the infrastructure
    gave out, even when it will not be resent."""
    assert [refusal(s).request_fault for s in (400, 413, 422)] == [True, True, True]
    assert [refusal(s).request_fault for s in (401, 404, 500)] == [False, False, False]
    assert ModelError("final").request_fault
    assert not ModelNoAnswer("no answer").request_fault
    assert not ProviderDown("down").request_fault
    refused = EncodingRefused("br")
    assert not refused.request_fault and not refused.retryable
    assert refused.code == "content_encoding"


def test_a_model_request_without_answer_is_both_kinds() -> None:
    err = ModelNoAnswer("refused", code="connect_failed")
    assert isinstance(err, NoAnswer) and isinstance(err, ModelError)
    assert err.retryable and err.code == "connect_failed" and str(err) == "refused"


def test_git_error_shows_the_command_and_a_bounded_stderr() -> None:
    argv = ["git", "-C", "ws", "push", "origin"]
    err = GitError(argv, 128, "  fatal: " + "x" * 5000 + "\n")
    assert str(err).startswith("`git -C ws push origin` failed (exit 128): fatal: xxx")
    assert len(str(err)) < 2100 and err.argv == argv
    shown = GitError(["git", "-c", "http.extraHeader=h", "fetch"], 1, "e", command=["fetch"])
    assert str(shown) == "`git fetch` failed (exit 1): e"


def test_path_refused_keeps_its_reason_apart_from_the_path() -> None:
    err = PathRefused("../etc/passwd", "outside the workdir")
    assert isinstance(err, UnsafeFileError)
    assert str(err) == "../etc/passwd: outside the workdir" and err.reason == "outside the workdir"


def test_run_ends_carries_status_and_reason() -> None:
    ends = RunEnds(RunStatus.MAX_REQUESTS, "max_requests (3) reached")
    assert ends.status is RunStatus.MAX_REQUESTS
    assert ends.reason == str(ends) == "max_requests (3) reached"
