"""One run's life: its workspace, its thread, its check, what it leaves (commit, branch,
patch, push). Status and error are decided in one place, `TaskRun.status_and_error`, from
what happened; the loop's `Outcome` is never edited afterwards.

The batch (batch.py) decides when a run starts; the clients and tools come from
wiring.py; the run's entry in report.json is made by report_entry.py.

Why one module: a run's life is one sequence (start, agent, shielded wind-up: commit,
check, clean up, journal) and `status_and_error` reads exactly the fields that sequence
fills; split, the order that keeps work safe from a signal would no longer be on one page."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from runner import workspace
from runner.agent import Outcome
from runner.budget import BatchSpend, RunBudget, cost_usd, price_of
from runner.config import PriceConfig, ResolvedTask
from runner.errors import (
    ConfigError,
    EngineError,
    McpError,
    SandboxError,
    SkillError,
    UnsafeFileError,
)
from runner.items import Usage
from runner.journal import Entry, Journal
from runner.output_schema import check_answer
from runner.progress import Progress
from runner.redact import Redactor
from runner.report_entry import run_report
from runner.reports.events import EventLog, JsonStream
from runner.sandbox import make_executor, user_folder
from runner.sandbox.env import child_env
from runner.skills import Staged, stage
from runner.tools.mcp import McpSessions
from runner.vocabulary import RunStatus, SkipReason
from runner.wiring import Clients, make_thread, sandbox_policy

if TYPE_CHECKING:
    # The report modules load when a run finishes: they are not needed before the first
    # request, and importing them costs start-up time (see bench/overhead.py).
    from runner.reports.model import TaskReport


@dataclass(frozen=True)
class CheckResult:
    command: str
    exit_code: int
    passed: bool
    duration_s: float
    output_tail: str


CHECK_TAIL_BYTES = 4000


async def _run_check(
    t: ResolvedTask,
    cwd: Path,
    env: dict[str, str],
    objects: Sequence[Path] | None = None,
    hidden: Sequence[Path] = (),
) -> CheckResult | None:
    """The task's `check`, in the run's workspace with the agent's environment and in the
    agent's sandbox: its exit code, not the model's word, decides whether the run passed."""
    if t.check is None:
        return None
    executor = make_executor(sandbox_policy(t, cwd, hidden), objects=objects)
    res = await executor.run(
        ["bash", "-c", t.check], cwd=cwd, timeout_s=t.check_timeout_s, env=child_env(env)
    )
    text = res.output.decode("utf-8", "replace")
    if res.timed_out:
        text += f"\n[check timed out after {t.check_timeout_s:g} s]"
    tail = text[-CHECK_TAIL_BYTES:]
    return CheckResult(t.check, res.exit_code, res.exit_code == 0, round(res.duration_s, 3), tail)


@dataclass
class TaskRun:
    task: ResolvedTask
    outcome: Outcome | None
    events_file: str
    error: str | None = None
    ws: workspace.Workspace | None = None
    result: workspace.Result | None = None
    pushed: str | None = None
    check: CheckResult | None = None
    not_kept: bool = False
    """Its changes could not be committed, or the runner itself broke while committing or
    checking (the work may be lost, the check unknown): whatever the agent did, the run is
    an error."""
    skipped: SkipReason | None = None
    """Why the run did not start (`budget`, `interrupted`), when it did not."""
    report: TaskReport | None = None
    """Its entry in report.json, made when it finished (or taken from the journal)."""
    output: Any = None
    """The final answer parsed as JSON, when the task has an `output_schema` it matches."""
    current_date: str | None = None
    timezone: str | None = None
    """The day and zone `<environment_context>` told the model (pinned or the machine's)."""

    output_error: str | None = None
    """Why a completed run's final answer does not match its `output_schema`."""
    stopped_before_check: bool = False
    """A signal stopped the batch before this run's check could finish."""

    @property
    def status(self) -> RunStatus:
        return self.status_and_error()[0]

    def status_and_error(self) -> tuple[RunStatus, str | None]:
        """The run's status and error, by one precedence rule: a run that could not start
        or keep its work; changes outside the allowed scope; then, for a completed loop, a
        final answer that breaks the schema, a stop before the check, a failed check;
        else how the loop ended."""
        if self.report is not None:
            return self.report.status, self.report.error
        o = self.outcome
        if o is None or self.not_kept:
            return (RunStatus.SKIPPED if self.skipped else RunStatus.ERROR), (
                self.error if o is None else o.error or self.error
            )
        if self.result is not None and self.result.violations:
            return RunStatus.SCOPE_VIOLATION, "scope violation: " + "; ".join(
                self.result.violations
            )
        if o.status is RunStatus.COMPLETED:
            if self.output_error is not None:
                return RunStatus.FAILED, self.output_error
            if self.stopped_before_check:
                return RunStatus.INTERRUPTED, (
                    "interrupted by a signal before its check finished; the work is kept"
                )
            if self.check is not None and not self.check.passed:
                return RunStatus.CHECK_FAILED, (
                    f"check failed with exit code {self.check.exit_code}: {self.check.command}"
                )
        return o.status, o.error or self.error


class RunSink:
    """Between a thread and its event log: adds each request's cost, feeds the batch's
    spend (for batch limits) and the progress display."""

    def __init__(
        self,
        log: EventLog,
        price: PriceConfig | None,
        spend: BatchSpend,
        run: str,
        progress: Progress,
    ) -> None:
        self.log = log
        self.price = price_of(price)
        self.spend = spend
        self.run = run
        self.progress = progress

    def emit(self, event: dict[str, Any]) -> None:
        if event.get("type") == "request.completed":
            u = event.get("usage")
            unreported = u is None and event.get("error") is None
            u = u or {}
            usage = Usage(
                input_tokens=int(u.get("input_tokens", 0)),
                cached_tokens=int(u.get("cached_tokens", 0)),
                output_tokens=int(u.get("output_tokens", 0)),
                reasoning_tokens=int(u.get("reasoning_tokens", 0)),
                unreported=int(unreported),
            )
            cost = cost_usd(self.price, usage, digits=8)
            event = {**event, "cost_usd": cost}
            self.spend.add(usage, cost)
        self.log.emit(event)
        self.progress.event(self.run, event)


@dataclass
class BatchContext:
    """What every run of a batch shares (made once by `run_batch`)."""

    out_dir: Path
    run_id: str
    env: dict[str, str]
    agent_env: dict[str, str]
    redact: Redactor
    stream: JsonStream | None
    journal: Journal
    previous: Mapping[str, Entry]
    order: Mapping[str, int]
    spend: BatchSpend
    show: Progress
    clients: Clients
    work_root: Path
    today: str
    tz: str
    runner_home: Path | None
    hidden: tuple[Path, ...] = ()
    """What no run's sandbox shows besides its own run's: every batch's run directories,
    the out dir, the runner's own folders (see `BatchContext.hidden_for`)."""
    checks: set[anyio.CancelScope] = field(default_factory=set)
    """Running checks: a signal cancels them (killing their process groups)."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    """Set by Ctrl-C or SIGTERM: no check starts after it."""


def hidden_for(b: BatchContext, ws: workspace.Workspace) -> list[Path]:
    """What the run's commands and check may not see: the batch's `hidden`, the user's
    repository (work tree, git dirs, object stores) and the folder holding it, unless
    that is a system folder (`/srv`) or holds tools (see `user_folder`)."""
    parent = user_folder(ws.repo.parent)
    return [*b.hidden, *ws.user_paths, *([parent] if parent is not None else [])]


async def live(run: TaskRun, b: BatchContext) -> None:
    """The whole life of a run that may start: everything it did is committed, reported
    and journaled, whatever stops it (a crash, a signal, a bad workspace)."""
    t = run.task
    await _forget_attempt(b.previous.get(t.fingerprint), t.repo)
    b.journal.started(t.fingerprint, t.run, branch_for(t, b.run_id))
    try:
        log = EventLog(b.out_dir / run.events_file, task=t.run, redact=b.redact, stdout=b.stream)
    except OSError as exc:
        run.error = f"cannot write its events file {run.events_file}: {exc.strerror}"
        _finished(run, b)
        return
    b.show.run_started(t.run, f"{t.provider_name}/{t.model}")
    try:
        await _agent(run, b, log)
    except (
        ConfigError,
        EngineError,
        SandboxError,
        McpError,
        SkillError,
        workspace.WorkspaceError,
        UnsafeFileError,
    ) as exc:  # an instructions file changed since the pre-flight check, too
        run.error = str(exc)
        log.failed(run.error)
    except Exception as exc:  # a bug in one run must not stop the others
        run.error = _internal(exc)
        log.failed(run.error)
    finally:
        with anyio.CancelScope(shield=True):
            await _wind_up(run, b, log)


async def _agent(run: TaskRun, b: BatchContext, log: EventLog) -> None:
    """The workspace, the MCP servers and the thread: what a signal or an error may cut
    short. `run.outcome` is set however the thread ends."""
    t = run.task
    sink = RunSink(log, t.price, b.spend, t.run, b.show)
    run.ws = ws = await workspace.prepare(t.repo, base=t.git.base, root=b.work_root, name=t.run)
    model = await b.clients.get(t)
    async with McpSessions(t.mcp_servers, cwd=ws.path, env=b.env, emit=sink.emit) as mcp:
        run.current_date = t.current_date or b.today
        run.timezone = t.timezone or b.tz
        thread, notes = make_thread(
            t,
            ws.path,
            model,
            b.agent_env,
            sink,
            today=run.current_date,
            tz=run.timezone,
            runner_home=b.runner_home,
            budget=RunBudget(t.limits, t.price, b.spend),
            extra_tools=mcp.tools,
            redact=b.redact,
            hidden=hidden_for(b, ws),
            skills=_staged(t, ws),
        )
        for note in notes:
            _note(run, log, b.redact(note))
        try:
            run.outcome = await thread.run()
        except anyio.get_cancelled_exc_class():
            run.outcome = thread.interrupted(
                "interrupted by a signal; the work done so far is kept"
            )
            raise
        for note in dict.fromkeys(thread.ctx.executor.limit_notes):
            _note(run, log, b.redact(note))
    _check_output(run)


def _staged(t: ResolvedTask, ws: workspace.Workspace) -> Staged | None:
    """A sandboxed run's skills, copied beside its workspace (see `skills.stage`); None
    under danger-full-access, whose commands read them where they are."""
    if not t.skills or t.sandbox == "danger-full-access":
        return None
    return stage(t.skills, ws.private_dir / "skills")


async def _wind_up(run: TaskRun, b: BatchContext, log: EventLog) -> None:
    """Runs shielded, whatever stopped the run: keep its work, run its check, then clean
    up, report and journal it. Commit first: files the check creates (caches, build
    output) must not land on the branch."""
    ws = run.ws
    try:
        if ws is not None:
            await _keep_result(run, ws, b.out_dir, b.run_id, b.redact, b.env, log, b.journal)
            if run.outcome is not None:
                await _check_unless_stopped(
                    run, ws, b.agent_env, b.checks, b.stop, hidden_for(b, ws)
                )
                if run.check is not None:
                    log.emit(
                        {
                            "type": "check.completed",
                            "exit_code": run.check.exit_code,
                            "passed": run.check.passed,
                            "output_tail": run.check.output_tail,
                        }
                    )
    except Exception as exc:
        run.not_kept = True
        run.error = _internal(exc)
        log.failed(run.error)
    finally:
        if ws is not None:
            await workspace.cleanup(ws)
        log.close()
        _finished(run, b)


def _finished(run: TaskRun, b: BatchContext) -> None:
    """Its report entry, journaled and shown (a run stopped by Ctrl-C is shown too)."""
    run.report = run_report(run, b.out_dir, b.redact, b.order)
    b.journal.finished(run.task.fingerprint, run.report)
    b.show.run_finished(run.report)


def _internal(exc: Exception) -> str:
    return (
        f"internal error in the runner ({type(exc).__name__}: {exc}); the other runs "
        "went on. Please report it with this run's events file."
    )


def branch_for(t: ResolvedTask, run_id: str) -> str | None:
    if t.git.keep != "branch":
        return None
    try:
        return workspace.branch_name(t.git.branch, branch_fields(t, run_id))
    except workspace.WorkspaceError:
        return None


def branch_fields(t: ResolvedTask, run_id: str) -> dict[str, str]:
    return {
        "run": run_id,
        "task": t.id,
        "model": f"{t.provider_name}/{t.model}",
        "repeat": str(t.repeat),
        "name": t.run,
        "variant": t.variant or "",
    }


async def _forget_attempt(entry: Entry | None, repo: Path) -> None:
    """A run redone by `--resume` first deletes the branch its killed attempt may have
    made, so there is one branch per run. Only a branch named in that attempt's journal
    record, and still pointing at the commit recorded there, is touched."""
    if entry is None or not entry.branch or not entry.commit:
        return  # no commit recorded: the attempt never got to make a branch
    await workspace.delete_branch(repo, entry.branch, entry.commit)


async def _check_unless_stopped(
    run: TaskRun,
    ws: workspace.Workspace,
    env: dict[str, str],
    checks: set[anyio.CancelScope],
    stop: anyio.Event,
    hidden: Sequence[Path] = (),
) -> None:
    """Runs the check inside the shielded cleanup, yet in a scope a signal cancels (which
    kills its process group): Ctrl-C must not wait for a long check. A run the signal
    stopped, before or during its check, is `interrupted` (redone by `--resume`), never
    passed or failed by a check that did not finish."""
    assert run.outcome is not None
    if run.outcome.status is not RunStatus.INTERRUPTED and not stop.is_set():
        with anyio.CancelScope() as scope:
            checks.add(scope)
            try:
                run.check = await _run_check(run.task, ws.path, env, ws.sandbox_objects, hidden)
            finally:
                checks.discard(scope)
        if not scope.cancelled_caught:
            return
    run.stopped_before_check = True


def _check_output(run: TaskRun) -> None:
    """A completed run's final answer against the task's `output_schema`: parsed into
    the report, or the run fails saying why. Only the last answer is the run's output."""
    o, schema = run.outcome, run.task.output_schema
    if o is None or schema is None or o.status is not RunStatus.COMPLETED:
        return
    run.output, run.output_error = check_answer(schema, o.final_message)


async def _keep_result(
    run: TaskRun,
    ws: workspace.Workspace,
    out_dir: Path,
    run_id: str,
    redact: Redactor,
    env: dict[str, str],
    log: EventLog,
    journal: Journal | None = None,
) -> None:
    """Commit whatever the run changed, whatever its status: nothing done is lost.
    Secrets are redacted from the files before the commit (see `workspace.finish`)."""
    t = run.task
    status = run.status  # before the check: what the loop and the output schema say
    final = (run.outcome.final_message if run.outcome else None) or ""
    message = redact(
        f"runner: {t.id} with {t.provider_name}/{t.model}: {status}\n\n"
        f"{final[:4000]}\n\nRunner-Run: {run_id}\nRunner-Status: {status}\n"
    )
    g = t.git
    scope = workspace.Scope(
        allowed=list(g.allowed_paths) if g.allowed_paths is not None else None,
        forbidden=list(g.forbidden_paths),
        max_diff_lines=g.max_diff_lines,
    )
    try:
        result = await workspace.finish(
            ws,
            branch_template=g.branch,
            message=message,
            scope=scope,
            create_branch=g.keep == "branch",
            fields=branch_fields(t, run_id),
            patch_path=out_dir / "patches" / f"{t.run}.patch",
            redact=redact if redact else None,
            before_branch=None
            if journal is None
            else functools.partial(journal.branching, t.fingerprint, t.run),
            on_left_out=functools.partial(_left_out, run, log, redact),
        )
    except workspace.WorkspaceError as exc:
        run.error = f"could not keep the result: {exc}"
        run.not_kept = True
        log.emit({"type": "error", "message": run.error})
        return
    run.result = result
    if result is None:
        return
    log.emit(
        {
            "type": "result.committed",
            "commit": result.commit,
            "branch": result.branch,
            "files_changed": len(result.files),
            "insertions": result.insertions,
            "deletions": result.deletions,
            "violations": list(result.violations),
        }
    )
    if g.push is not None and result.branch is not None:
        token = env.get(g.push.token_env) if g.push.token_env else None
        try:
            pushed = await workspace.push(t.repo, result.branch, remote=g.push.remote, token=token)
            run.pushed = pushed.ref
        except workspace.WorkspaceError as exc:
            run.error = redact(f"push failed: {exc}")
            log.emit({"type": "error", "message": run.error})


def _left_out(run: TaskRun, log: EventLog, redact: Redactor, entries: list[str]) -> None:
    """Entries git must not record were left out and the rest committed; the report
    says which, as it says why a push failed."""
    shown = [redact(e) for e in entries[:LEFT_OUT_SHOWN]]
    more = len(entries) - len(shown)
    _note(
        run,
        log,
        "not captured in the result: " + "; ".join(shown) + (f"; and {more} more" if more else ""),
    )


def _note(run: TaskRun, log: EventLog, note: str) -> None:
    """Something the run went on without; the report's `error` says it (as for a failed
    push) whatever the status, and the events file has it as a `note`."""
    run.error = note if run.error is None else f"{run.error}; {note}"
    log.emit({"type": "note", "message": note})


LEFT_OUT_SHOWN = 20
