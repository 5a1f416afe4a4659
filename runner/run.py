"""One run's life as a sequence of steps that each return a value: prepare its workspace,
run its thread, keep its work (commit, patch, branch, push), run its check. `live` folds
each value into a new frozen `RunRecord` (record.py); the status, the error and the report
entry are computed from the last one (record.py, report_entry.py), never stored beside it.

The batch (batch.py) decides when a run starts and reads the `Finished` runs `live`
publishes; the clients and tools come from wiring.py.

Why one module: the order that keeps work safe from a signal (start, thread, shielded
wind-up: commit, check, clean up, journal) must stay on one page."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from runner import exec_events as ev
from runner import workspace
from runner.agent import Outcome, Thread
from runner.artifacts import local_artifacts
from runner.budget import BatchSpend, RunBudget, cost_usd
from runner.check import renv_check, run_check
from runner.config import Run, branch_fields, uses_environment
from runner.errors import (
    ConfigError,
    EngineError,
    EnvironmentFault,
    McpError,
    SandboxError,
    SkillError,
    UnsafeFileError,
)
from runner.hostfs import remove_tree
from runner.items import Usage
from runner.journal import Entry, Journal, Pins, earlier_spend
from runner.models import Price
from runner.output_schema import check_answer
from runner.progress import EventSink
from runner.prompt import agents_md_of
from runner.record import Finished, RunRecord, left_out_note, status_of
from runner.redact import Redactor
from runner.report_entry import run_report
from runner.reports.events import EventLog
from runner.reports.inputs import record_inputs
from runner.sandbox import user_folder
from runner.sandbox.environment import Environment
from runner.sanity import run_sanity_agent
from runner.skills import Staged, stage
from runner.tools.mcp import McpSessions
from runner.vocabulary import RunStatus
from runner.wiring import Clients, make_thread

if TYPE_CHECKING:
    # Containers, Pods and grading load with the first run that has them (`live`): a
    # batch of local runs starts without them.
    from runner.envrun import Environments, RunEnvironment


class RunSink:
    """Between a thread and its event log: adds each request's cost and feeds the
    batch's spend (for batch limits); the log hands each event on to the batch's sink."""

    def __init__(self, log: EventLog, price: Price | None, spend: BatchSpend) -> None:
        self.log = log
        self.price = price
        self.spend = spend

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


@dataclass
class BatchContext:
    """What every run of a batch shares (made once by `run_batch`)."""

    out_dir: Path
    batch_id: str
    env: dict[str, str]
    agent_env: dict[str, str]
    redact: Redactor
    journal: Journal
    previous: Mapping[str, Entry]
    order: Mapping[str, int]
    spend: BatchSpend
    show: EventSink
    clients: Clients
    work_root: Path
    today: str
    tz: str
    runner_home: Path | None
    bases: Pins | None = None
    """The commit each repository's `git.base` named when the batch began (a resumed
    batch's remaining runs start there too); None: resolve `git.base` per run."""
    hidden: tuple[Path, ...] = ()
    """What no run's sandbox shows besides its own run's: every batch's run directories,
    the out dir, the runner's own folders (see `BatchContext.hidden_for`)."""
    checks: set[anyio.CancelScope] = field(default_factory=set)
    """Running checks: a signal cancels them (killing their process groups)."""
    stop: anyio.Event = field(default_factory=anyio.Event)
    """Set by Ctrl-C or SIGTERM: no check starts after it."""
    finished: dict[str, Finished] = field(default_factory=dict)
    """Runs done with, by fingerprint: those `--resume` kept, then each run `live` ends.
    The one place the batch reads runs from."""
    environments: Environments | None = None
    """The batch's containers and Pods (builds, the `max_environments` cap); None when
    every run is local."""


def hidden_for(b: BatchContext, ws: workspace.Workspace) -> list[Path]:
    """What the run's commands and check may not see: the batch's `hidden`, the user's
    repository (work tree, git dirs, object stores) and the folder holding it, unless
    that is a system folder (`/srv`) or holds tools (see `user_folder`)."""
    parent = user_folder(ws.repo.parent)
    return [*b.hidden, *ws.user_paths, *([parent] if parent is not None else [])]


FAILURES = (
    ConfigError,
    EngineError,
    EnvironmentFault,
    SandboxError,
    McpError,
    SkillError,
    workspace.WorkspaceError,
    UnsafeFileError,
)
"""What stops a run with its own message (an instructions file changed since the
pre-flight check, too); anything else is a bug in the runner, reported as such."""

INTERRUPTED = "interrupted by a signal; the work done so far is kept"


async def live(rec: RunRecord, b: BatchContext) -> None:
    """The whole life of a run that may start: everything it did is committed, reported,
    journaled and published in `b.finished`, whatever stops it (a crash, a signal, a bad
    workspace). `rec` is only ever rebound to a new record, so the shielded wind-up sees
    every step that returned, and the one a signal cut short."""
    t = rec.run
    earlier = b.previous.get(t.fingerprint)
    await _forget_attempt(earlier, t.repo)
    rec = rec.but(redone=earlier_spend(earlier))
    b.journal.started(t.fingerprint, t.name, branch_for(t, b.batch_id), rec.redone)
    try:
        log = EventLog(
            b.out_dir / rec.events_file,
            task=t.name,
            redact=b.redact,
            then=functools.partial(b.show.event, t.name),
        )
    except OSError as exc:
        _finished(rec.noted(f"cannot write its events file {rec.events_file}: {exc.strerror}"), b)
        return
    b.show.run_started(t.name, t.label)
    sink = RunSink(log, t.price, b.spend)
    renv: RunEnvironment | None = None
    try:
        ws = None
        if not uses_environment(t) or t.repo_named:
            base = b.bases.base(t.repo, t.git.base) if b.bases else t.git.base
            ws = await workspace.prepare(t.repo, base=base, root=b.work_root, name=t.name)
        rec = rec.but(
            workspace=ws, current_date=t.current_date or b.today, timezone=t.timezone or b.tz
        )
        if uses_environment(t):
            from runner.envrun import RunEnvironment

            assert b.environments is not None
            renv = RunEnvironment(b.environments, t, b.out_dir)
            await renv.prepare(None if ws is None else ws.path)
            rec = rec.but(environment=renv.info)
            if renv.fault is not None:
                return  # an error naming the backend; the wind-up still runs
        if t.agent != "model":
            assert renv is not None  # the config pass puts suite tasks in a container
            rec = rec.but(outcome=await _sanity(t, renv, sink))
        else:
            # A signal cancels the phase: its record so far comes back through `kept`.
            kept = [rec]
            try:
                rec = await _model_phase(kept, ws, renv, sink, log, b)
            except anyio.get_cancelled_exc_class():
                rec = kept[0]
                raise
        rec = with_output(rec)
    except FAILURES as exc:
        rec = _failed(rec, log, str(exc))
    except Exception as exc:  # a bug in one run must not stop the others
        rec = _failed(rec, log, _internal(exc))
    finally:
        if rec.outcome is None and b.stop.is_set():
            # Cut short in its build or container start (or failed there because the
            # signal reached the engine too): interrupted, for --resume, not an error.
            rec = rec.but(stopped_before_start=True)
        with anyio.CancelScope(shield=True):
            _finished(await _wind_up(rec, b, log, renv), b)


async def _model_phase(
    kept: list[RunRecord],
    ws: workspace.Workspace | None,
    renv: RunEnvironment | None,
    sink: RunSink,
    log: EventLog,
    b: BatchContext,
) -> RunRecord:
    """The agent's phase with a model: its thread, with the MCP servers it names.
    `kept[0]` is the record as far as the phase got (read when a signal cancels it)."""
    rec = kept[0]
    t = rec.run
    model = await b.clients.get(t)
    here = ws.path if ws is not None else _scratch(b, t)
    async with McpSessions(t.mcp_servers, cwd=here, env=b.env, emit=sink.emit) as mcp:
        thread, notes = _thread_for(rec, ws, model, mcp.tools, sink, b, renv)
        rec = kept[0] = _noted(rec.but(inputs=_inputs(rec.run, thread, b)), log, *notes)
        try:
            rec = rec.but(outcome=await _run_thread(thread, renv))
        except anyio.get_cancelled_exc_class():
            kept[0] = rec.but(outcome=thread.interrupted(INTERRUPTED))
            raise
        limits = dict.fromkeys(thread.ctx.environment.limit_notes)
        return _noted(rec, log, *(b.redact(n) for n in limits))


async def _sanity(t: Run, renv: RunEnvironment, sink: RunSink) -> Outcome:
    """`agent: oracle` or `nop` in the run's environment, started here (no model request
    to start it beside)."""
    await renv.start()
    if renv.fault is not None:
        raise EnvironmentFault(renv.fault)
    return await run_sanity_agent(t, renv.guarded(), sink.emit)


async def _run_thread(thread: Thread, renv: RunEnvironment | None) -> Outcome:
    """The thread, its environment started beside the first model request (the first
    tool call waits for it). A lost environment ends the thread at once."""
    if renv is None:
        return await thread.run()
    async with anyio.create_task_group() as tg:
        tg.start_soon(renv.start)
        with anyio.CancelScope() as scope:
            renv.thread_scope = scope
            outcome = await thread.run()
        renv.thread_scope = None
        if scope.cancelled_caught:
            outcome = thread.interrupted(renv.fault or "the environment was lost")
    return outcome


def _scratch(b: BatchContext, t: Run) -> Path:
    """A run without a host workspace still gives its MCP servers a folder of its own."""
    path = b.work_root / t.name
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _thread_for(
    rec: RunRecord,
    ws: workspace.Workspace | None,
    model: Any,
    tools: Sequence[Any],
    sink: RunSink,
    b: BatchContext,
    renv: RunEnvironment | None = None,
) -> tuple[Thread, list[str]]:
    """The run's thread, and the notes its making left (redacted)."""
    t = rec.run
    hidden: list[Path] = []
    environment: Environment | None = None
    docs_from: Path | None = None
    if renv is not None:
        assert renv.info.workdir is not None
        cwd, skills = Path(renv.info.workdir), renv.skills
        environment, docs_from = renv.guarded(), None if ws is None else ws.path
    else:
        assert ws is not None
        cwd, skills, hidden = ws.path, _staged(t, ws), hidden_for(b, ws)
    thread, notes = make_thread(
        t,
        cwd,
        model,
        b.agent_env,
        sink,
        today=rec.current_date or b.today,
        tz=rec.timezone or b.tz,
        runner_home=b.runner_home,
        budget=RunBudget(t.limits, t.price, b.spend),
        extra_tools=tools,
        redact=b.redact,
        hidden=hidden,
        skills=skills,
        environment=environment,
        docs_from=docs_from,
    )
    return thread, [b.redact(n) for n in notes]


def _inputs(t: Run, thread: Thread, b: BatchContext) -> dict[str, str]:
    """The thread's exact input, stored once per distinct value (`reports.inputs`). Not
    the whole developer message: it names the workspace's path on this machine."""
    return record_inputs(
        b.out_dir,
        b.redact,
        prompts=list(thread.spec.prompts),
        instructions=thread.spec.instructions,
        developer_instructions=t.developer_instructions,
        tools=[dict(t) for t in thread.tool_specs],
        agents_md=agents_md_of(thread.spec.context),
    )


def _staged(t: Run, ws: workspace.Workspace) -> Staged | None:
    """A sandboxed run's skills, copied beside its workspace (see `skills.stage`); None
    under danger-full-access, whose commands read them where they are."""
    if not t.skills or t.sandbox == "danger-full-access":
        return None
    return stage(t.skills, ws.private_dir / "skills")


async def _wind_up(
    rec: RunRecord, b: BatchContext, log: EventLog, renv: RunEnvironment | None = None
) -> RunRecord:
    """Runs shielded, whatever stopped the run: keep its work, run its check, then clean
    up. Commit first: files the check creates (caches, build output) must not land on the
    branch. A container's changes are its workdir's diff, applied to the host workspace
    (when it has one) before the commit; its artifacts are copied out after the check,
    and it is removed last, or, for a run graded in a fresh container (SWE-bench), before
    that container starts, so `max_environments` holds with the graders counted."""
    ws = rec.workspace
    try:
        if renv is not None:
            notes = await renv.finish(None if ws is None else ws.path, b.redact)
            rec = _noted(rec.but(environment=renv.info), log, *notes)
        if ws is not None:
            rec = await keep(rec, ws, b.out_dir, b.batch_id, b.redact, b.env, log, b.journal)
            kept = rec.result.patch_path if rec.result is not None else None
            if renv is not None and kept is not None and kept.is_relative_to(b.out_dir):
                # The container's diff became the workspace's commit: one patch, named in both.
                renv.info = replace(renv.info, patch=str(kept.relative_to(b.out_dir)))
                rec = rec.but(environment=renv.info)
        if (ws is not None or renv is not None) and rec.outcome is not None:
            rec = await _check_unless_stopped(rec, ws, b, renv)
            if rec.check is not None:
                log.emit(
                    {
                        "type": "check.completed",
                        "exit_code": rec.check.exit_code,
                        "passed": rec.check.passed,
                        "output_tail": rec.check.output_tail,
                    }
                )
        graded_here = renv is not None and rec.run.suite is not None and rec.outcome is not None
        fresh = graded_here and _grades_fresh(rec)
        if renv is not None and fresh:
            # Graded in a container of its own: the agent's goes first, its slot passed on.
            rec = _noted(rec, log, *await renv.artifacts(b.redact))
            await renv.retire()
        if renv is not None and graded_here:
            from runner.verify import graded

            rec = await graded(rec, renv, stop=b.stop, checks=b.checks, redact=b.redact, log=log)
        if renv is not None:
            if not fresh:
                rec = _noted(rec, log, *await renv.artifacts(b.redact))
        elif ws is not None:
            info, notes = await local_artifacts(rec.run, ws.path, b.out_dir, b.redact)
            rec = _noted(rec.but(environment=info), log, *notes)
    except Exception as exc:
        rec = _failed(rec.but(not_kept=True), log, _internal(exc))
    finally:
        try:
            if renv is not None:
                await renv.stop()
                rec = rec.but(environment=renv.info)
            if ws is not None:
                await workspace.cleanup(ws)
            elif renv is not None:
                await anyio.to_thread.run_sync(remove_tree, b.work_root / rec.run.name)
        finally:
            log.close()
    return rec


def _grades_fresh(rec: RunRecord) -> bool:
    """SWE-bench: graded from the run's patch in a fresh container (`swe_graded`)."""
    return rec.run.suite is not None and rec.run.suite.verifier.grading == "swe-bench"


def _finished(rec: RunRecord, b: BatchContext) -> None:
    """Its report entry, journaled, shown (a run stopped by Ctrl-C is shown too) and
    published for the batch."""
    report = run_report(rec, b.out_dir, b.redact, b.order)
    b.journal.finished(rec.run.fingerprint, report)
    b.finished[rec.run.fingerprint] = Finished(rec, report)
    b.show.run_finished(report)


def _noted(rec: RunRecord, log: EventLog, *notes: str) -> RunRecord:
    """Something the run went on without: the report's `error` says it whatever the
    status, and the events file has it as a `note`."""
    for note in notes:
        log.emit({"type": "note", "message": note})
    return rec.noted(*notes)


def _failed(rec: RunRecord, log: EventLog, message: str) -> RunRecord:
    """What stopped the run outside the loop: a consumer of the events still sees a
    thread whose turn failed."""
    log.failed(message)
    return rec.noted(message)


def _internal(exc: Exception) -> str:
    return (
        f"internal error in the runner ({type(exc).__name__}: {exc}); the other runs "
        "went on. Please report it with this run's events file."
    )


def branch_for(t: Run, batch_id: str) -> str | None:
    if t.git.keep != "branch":
        return None
    try:
        return workspace.branch_name(t.git.branch, branch_fields(t, batch_id))
    except workspace.WorkspaceError:
        return None


async def _forget_attempt(entry: Entry | None, repo: Path) -> None:
    """A run redone by `--resume` first deletes the branch its killed attempt may have
    made, so there is one branch per run. Only a branch named in that attempt's journal
    record, and still pointing at the commit recorded there, is touched."""
    if entry is None or not entry.branch or not entry.commit:
        return  # no commit recorded: the attempt never got to make a branch
    await workspace.delete_branch(repo, entry.branch, entry.commit)


async def _check_unless_stopped(
    rec: RunRecord, ws: workspace.Workspace | None, b: BatchContext, renv: RunEnvironment | None
) -> RunRecord:
    """Runs the check inside the shielded cleanup, yet in a scope a signal cancels (which
    kills its process group): Ctrl-C must not wait for a long check. A run the signal
    stopped, before or during its check, is `interrupted` (redone by `--resume`), never
    passed or failed by a check that did not finish."""
    assert rec.outcome is not None
    if rec.outcome.status is not RunStatus.INTERRUPTED and not b.stop.is_set():
        with anyio.CancelScope() as scope:
            b.checks.add(scope)
            try:
                if renv is not None:
                    check = await renv_check(rec.run, renv)
                else:
                    assert ws is not None
                    check = await run_check(
                        rec.run, ws.path, b.agent_env, ws.sandbox_objects, hidden_for(b, ws)
                    )
            finally:
                b.checks.discard(scope)
        if not scope.cancelled_caught:
            return rec.but(check=check)
    return rec.but(stopped_before_check=True)


def with_output(rec: RunRecord) -> RunRecord:
    """A completed run's final answer against the task's `output_schema`: parsed into
    the report, or the run fails saying why. Only the last answer is the run's output."""
    o, schema = rec.outcome, rec.run.output_schema
    if o is None or schema is None or o.status is not RunStatus.COMPLETED:
        return rec
    output, error = check_answer(schema, o.final_message)
    return rec.but(output=output, output_error=error)


async def keep(
    rec: RunRecord,
    ws: workspace.Workspace,
    out_dir: Path,
    batch_id: str,
    redact: Redactor,
    env: Mapping[str, str],
    log: EventLog,
    journal: Journal | None = None,
) -> RunRecord:
    """Commit whatever the run changed, whatever its status: nothing done is lost, then
    push the branch if asked. Secrets are redacted from the files before the commit (see
    `workspace.finish`)."""
    t = rec.run
    status = status_of(rec)  # before the check: what the loop and the output schema say
    final = (rec.outcome.final_message if rec.outcome else None) or ""
    message = redact(
        f"runner: {t.id} with {t.label}: {status}\n\n"
        f"{final[:4000]}\n\nRunner-Run: {batch_id}\nRunner-Status: {status}\n"
    )
    g = t.git
    scope = workspace.Scope(
        allowed=list(g.allowed_paths) if g.allowed_paths is not None else None,
        forbidden=list(g.forbidden_paths),
        max_diff_lines=g.max_diff_lines,
    )
    left_out: list[str] = []
    fields = branch_fields(t, batch_id)
    try:
        result = await workspace.finish(
            ws,
            branch_template=g.branch,
            message=message,
            scope=scope,
            create_branch=False,  # below, once the journal says which
            fields=fields,
            patch_path=out_dir / "patches" / f"{t.name}.patch",
            redact=redact if redact else None,
            on_left_out=left_out.extend,
        )
        if result is not None and not result.violations and g.keep == "branch":
            name = workspace.branch_name(g.branch, fields)
            if journal is not None:  # first: a resume may then delete the branch
                journal.branching(t.fingerprint, t.name, name, result.commit)
            result = await workspace.make_branch(ws, result, name)
    except workspace.WorkspaceError as exc:
        note = f"could not keep the result: {exc}"
        log.emit(ev.error(note))
        return rec.but(not_kept=True).noted(note)
    if left_out:
        rec = _noted(rec, log, left_out_note(left_out, redact, "result"))
    rec = rec.but(result=result)
    if result is None:
        return rec
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
    if g.push is None or result.branch is None:
        return rec
    token = env.get(g.push.token_env) if g.push.token_env else None
    try:
        pushed = await workspace.push(t.repo, result.branch, remote=g.push.remote, token=token)
    except workspace.WorkspaceError as exc:
        note = redact(f"push failed: {exc}")
        log.emit(ev.error(note))
        return rec.noted(note)
    return rec.but(pushed=pushed.ref)
