"""What one run did, as one frozen value, and how it ended, decided from that value alone.

Each step of a run's life (prepare, thread, keep, check, push: run.py) returns what it
made; `live` folds those values into a new `RunRecord` after each step. Nothing edits a
record once made, so what a step noted cannot be overwritten by a later one: every note
reaches the report. The status and the error are pure functions of the record, which is
why they can be tested over their whole table without running anything."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from runner.frozen import frozen
from runner.vocabulary import RunStatus, SkipReason

if TYPE_CHECKING:
    from runner.agent import Outcome
    from runner.config import Run
    from runner.reports.model import RedoneReport, RunReport
    from runner.workspace import Result, Workspace


@frozen
class CheckResult:
    command: str
    exit_code: int
    passed: bool
    duration_s: float
    output_tail: str


@frozen
class EnvironmentInfo:
    """Where a run's commands ran, when not on the host (runner/envrun.py)."""

    backend: str
    image: str | None = None
    image_id: str | None = None
    workdir: str | None = None
    build_s: float | None = None
    """Seconds this run waited for its image to be built (None: no `build:`)."""
    built: bool = False
    """This run built the image; the batch's other runs of the same folder found it."""
    start_s: float | None = None
    """Seconds from asking for the environment to its workdir ready (copied in, snapshot
    taken); None when it never got there."""
    patch: str | None = None
    """The patch of its workdir, relative to the out dir; None when nothing changed."""
    left_out: tuple[str, ...] = ()
    artifacts: str | None = None
    """The folder its artifacts were copied to, relative to the out dir."""
    fault: str | None = None
    """Why the environment could not be built, started or kept (EnvironmentFault, or
    EnvironmentLost mid-run): the run is an error whatever the agent did."""


@frozen
class Grade:
    """What a suite task's verifier made of the run (runner/verify.py)."""

    reward: float | None
    """The run's reward: Harbor's `reward` (or only) value, 1.0 or 0.0 for a test run
    that passed or not; None when reward.json names several and none is `reward`."""
    rewards: tuple[tuple[str, float], ...] = ()
    """Every named reward the verifier wrote, in its order."""
    resolution: str | None = None
    """SWE-bench's `resolved`, `partial` or `not`; Terminal-Bench's `resolved` or `not`;
    None for a Harbor reward."""
    exit_code: int | None = None
    duration_s: float = 0.0
    """The whole grading: a fresh environment started, the patch applied, the tests run."""
    output_tail: str = ""
    fresh: bool = False
    """Graded in an environment of its own, started from the run's image with only the
    run's patch applied (SWE-bench, as its harness grades a prediction), not in the
    agent's."""
    start_s: float | None = None
    """Seconds of `duration_s` that starting that fresh environment took."""
    patch_applied: bool | None = None
    """Whether the run's patch applied there; None when grading applies no patch."""
    why: str | None = None
    """Why the grade is what it is when the tests alone do not say: the patch did not
    apply, or left a file out."""

    @property
    def passed(self) -> bool:
        if self.resolution is not None:
            return self.resolution == "resolved"
        return self.reward is not None and self.reward >= 1.0


@frozen
class RunRecord:
    run: Run
    events_file: str
    outcome: Outcome | None = None
    """How the thread ended; None when it never ran."""
    workspace: Workspace | None = None
    result: Result | None = None
    """The commit (and branch, patch) of its changes; None when it changed nothing."""
    pushed: str | None = None
    check: CheckResult | None = None
    not_kept: bool = False
    """Its changes could not be committed, or the runner itself broke while committing or
    checking (the work may be lost, the check unknown): whatever the agent did, the run is
    an error."""
    stopped_before_check: bool = False
    """A signal stopped the batch before this run's check could finish."""
    stopped_before_start: bool = False
    """A signal stopped the batch before this run's agent began (its image building, its
    container starting): `interrupted`, never an error, whatever the cut-short build or
    start said."""
    skipped: SkipReason | None = None
    """Why the run did not start (`budget`, `interrupted`), when it did not."""
    output: Any = None
    """The final answer parsed as JSON, when the task has an `output_schema` it matches."""
    output_error: str | None = None
    """Why a completed run's final answer does not match its `output_schema`."""
    current_date: str | None = None
    timezone: str | None = None
    """The day and zone `<environment_context>` told the model (pinned or the machine's)."""
    inputs: dict[str, str] | None = None
    """The run's exact input as files of the out dir (`reports.inputs`): the rendered
    prompt, the instructions, the tool schemas; None until its thread is made."""
    redone: RedoneReport | None = None
    """What the run's earlier attempts spent, when `--resume` runs it again."""
    environment: EnvironmentInfo | None = None
    """Its container or Pod; None for a run on the host (`local`)."""
    grade: Grade | None = None
    """A suite task's grade; None for other runs, and when the verifier gave none."""
    verifier_error: str | None = None
    """Why a suite task's verifier gave no grade (no reward file, a timeout, a lost
    container): the run is an error, never a score."""
    verifier_spent: Grade | None = None
    """With `verifier_error`: what that attempt took (`duration_s`, `fresh`, `start_s`);
    its reward and resolution mean nothing."""
    notes: tuple[str, ...] = ()
    """What went wrong or was left out, in the order it happened: the report's `error`
    joins them after the status's own reason."""

    def but(self, **changes: Any) -> RunRecord:
        return dataclasses.replace(self, **changes)

    def noted(self, *notes: str) -> RunRecord:
        return dataclasses.replace(self, notes=self.notes + notes)


@frozen
class Finished:
    """A run the batch is done with: its record (None when an earlier session of a
    resumed batch finished it) and its redacted entry in report.json."""

    record: RunRecord | None
    report: RunReport

    @property
    def status(self) -> RunStatus:
        return self.report.status


INTERRUPTED_BEFORE_CHECK = "interrupted by a signal before its check finished; the work is kept"
INTERRUPTED_BEFORE_START = "interrupted by a signal before its agent started"

AGENT_STOPS = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.MAX_REQUESTS,
        RunStatus.MAX_TOOL_CALLS,
        RunStatus.BUDGET,
        RunStatus.TIMEOUT,
        RunStatus.FAILED,
        RunStatus.MAX_OUTPUT_TOKENS,
        RunStatus.SIZE_LIMIT,
    }
)
"""How a loop ends that leaves a suite run to its grade: the model's own end, or a limit
of the agent's (`limits:`, the timeout, a byte cap). The suites' harnesses grade what the
agent left, not how it stopped. The others (error, rate_limited, quota_exhausted,
interrupted) say nothing about the agent and stay what they are."""


def verdict(r: RunRecord) -> tuple[RunStatus, str | None]:
    """The run's status and the reason it gives, by one precedence rule: a signal before
    the agent began; an environment that could not be built, started or kept (never a
    score); a run that could not start or keep its work; changes outside the allowed
    scope; then, for a suite task whose agent stopped by itself or at a limit
    (`AGENT_STOPS`), a stop before the grade, then the grade alone (`_graded`); for a
    completed loop, a final answer that breaks the schema, a stop before the check, a
    failed check; else how the loop ended."""
    o = r.outcome
    if o is None and r.stopped_before_start:
        return RunStatus.INTERRUPTED, INTERRUPTED_BEFORE_START
    if r.environment is not None and r.environment.fault is not None:
        return RunStatus.ERROR, r.environment.fault
    if o is None:
        return (RunStatus.SKIPPED if r.skipped else RunStatus.ERROR), None
    if r.not_kept:
        return RunStatus.ERROR, o.error
    if r.result is not None and r.result.violations:
        return RunStatus.SCOPE_VIOLATION, "scope violation: " + "; ".join(r.result.violations)
    if r.run.suite is not None and o.status in AGENT_STOPS:
        if r.stopped_before_check:
            return RunStatus.INTERRUPTED, INTERRUPTED_BEFORE_CHECK
        return _graded(r)
    if o.status is RunStatus.COMPLETED:
        if r.output_error is not None:
            return RunStatus.FAILED, r.output_error
        if r.stopped_before_check:
            return RunStatus.INTERRUPTED, INTERRUPTED_BEFORE_CHECK
        if r.check is not None and not r.check.passed:
            return RunStatus.CHECK_FAILED, (
                f"check failed with exit code {r.check.exit_code}: {r.check.command}"
            )
    return o.status, o.error


def _graded(r: RunRecord) -> tuple[RunStatus, str | None]:
    """A suite run whose agent stopped by itself or at a limit: its verifier's grade
    decides (passed at reward >= 1 or resolved, failed below), as the suites' own
    harnesses grade the work left, not the trajectory; no grade is an error. The limit
    that stopped it stays in the report (`stopped_by`)."""
    if r.verifier_error is not None:
        return RunStatus.ERROR, f"verifier failed: {r.verifier_error}"
    g = r.grade
    if g is None:
        return RunStatus.ERROR, "the verifier did not run"
    if g.passed:
        return RunStatus.COMPLETED, None
    said = f"reward {g.reward:g}" if g.reward is not None else "no main reward"
    if g.resolution is not None:
        said = f"{g.resolution} ({said})"
    why = f": {g.why}" if g.why else ""
    stop = r.outcome.error if r.outcome is not None and r.outcome.error else None
    after = f"; the agent was stopped first: {stop}" if stop else ""
    return RunStatus.CHECK_FAILED, f"graded {said} by the suite's verifier{why}{after}"


def status_of(r: RunRecord) -> RunStatus:
    return verdict(r)[0]


def stopped_by(r: RunRecord) -> RunStatus | None:
    """The limit (or the model's failure) that ended a graded suite run's agent before it
    said it was done, when the grade, not that stop, gave the run its status; else None."""
    o = r.outcome
    if r.run.suite is None or o is None or o.status is RunStatus.COMPLETED:
        return None
    graded = status_of(r) in (RunStatus.COMPLETED, RunStatus.CHECK_FAILED)
    return o.status if graded and o.status in AGENT_STOPS else None


def error_of(r: RunRecord) -> str | None:
    """The status's reason, then every note: nothing a step noted is dropped."""
    reason = verdict(r)[1]
    parts = [p for p in (reason, *r.notes) if p]
    return "; ".join(dict.fromkeys(parts)) or None


def left_out_note(entries: Sequence[str], redact: Callable[[str], str], kept_in: str) -> str:
    """Entries the result could not hold (git must not record them, or too big) were left
    out and the rest kept (`kept_in`: "result", "patch"); the report says which, as it
    says why a push failed."""
    shown = [redact(e) for e in entries[:LEFT_OUT_SHOWN]]
    more = len(entries) - len(shown)
    tail = f"; and {more} more" if more else ""
    return f"not captured in the {kept_in}: " + "; ".join(shown) + tail


LEFT_OUT_SHOWN = 20
