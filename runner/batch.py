"""Wires a task file into threads: one model client per provider, one thread per task,
all inside one anyio task group, then the report.

This is the only module that knows every part; each part knows only its protocols.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fcntl
import functools
import json
import os
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from runner import preflight, workspace
from runner import prompt as prompts
from runner.agent import Budget, Outcome, Sink, Thread, ThreadSpec
from runner.budget import BatchSpend, RunBudget, price_of
from runner.config import BatchLimits, ModelOptions, PriceConfig, ResolvedTask, TaskFile
from runner.errors import EngineError, ModelError, SandboxError, UnsafeFileError
from runner.hostfs import remove_tree
from runner.items import Usage
from runner.journal import Entry, Journal, done
from runner.output_schema import check_answer, text_format
from runner.progress import Progress, QuietProgress, make_progress
from runner.providers import ModelClient, ModelResponse, Prompt, StreamEvent, find_compactor
from runner.providers.http import provider_headers
from runner.redact import MIN_SECRET_LEN, Redactor
from runner.reports.events import EventLog, JsonStream
from runner.sandbox import make_executor, make_policy
from runner.sandbox.env import SECRET_NAME, child_env
from runner.sandbox.policy import PROTECTED_NAMES
from runner.tools import Tool, ToolCall, ToolContext, ToolResult
from runner.tools.apply_patch import ApplyPatchTool
from runner.tools.hosted import WebSearchTool
from runner.tools.mcp import SANDBOX_NOTE as MCP_NOTE
from runner.tools.mcp import McpError, McpSessions
from runner.tools.plan import PlanTool
from runner.tools.shell import ShellTool

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


async def _run_check(t: ResolvedTask, cwd: Path, env: dict[str, str],
                     objects: Path | None = None) -> CheckResult | None:
    """The task's `check`, in the run's workspace with the agent's environment and in the
    agent's sandbox: its exit code, not the model's word, decides whether the run passed."""
    if t.check is None:
        return None
    executor = make_executor(make_policy(
        t.sandbox, workspace=cwd, writable_roots=t.writable_roots, network=t.network_access,
        hidden=[cwd.parent]), objects=None if objects is None else [objects])
    res = await executor.run(["bash", "-c", t.check], cwd=cwd, timeout_s=t.check_timeout_s,
                             env=child_env(env))
    text = res.output.decode("utf-8", "replace")
    if res.timed_out:
        text += f"\n[check timed out after {t.check_timeout_s:g} s]"
    tail = text[-CHECK_TAIL_BYTES:]
    return CheckResult(t.check, res.exit_code, res.exit_code == 0, round(res.duration_s, 3),
                       tail)


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
    """Its changes could not be committed: whatever the agent did, the run is an error."""
    skipped: str | None = None
    """Why the run did not start (`budget`, `interrupted`), when it did not."""
    report: TaskReport | None = None
    """Its entry in report.json, made when it finished (or taken from the journal)."""
    output: Any = None
    """The final answer parsed as JSON, when the task has an `output_schema` it matches."""
    current_date: str | None = None
    timezone: str | None = None
    """The day and zone `<environment_context>` told the model (pinned or the machine's)."""

    @property
    def status(self) -> str:
        if self.report is not None:
            return self.report.status
        if self.outcome is None or self.not_kept:
            return "skipped" if self.skipped else "error"
        if self.result is not None and self.result.violations:
            return "scope_violation"
        if self.outcome.status == "completed" and self.check is not None \
                and not self.check.passed:
            return "check_failed"
        return self.outcome.status


@dataclass
class BatchResult:
    runs: list[TaskRun]
    report_path: Path
    interrupted: bool = False
    resumed: int = 0
    """Runs taken from the journal of an earlier attempt instead of being run again."""

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return 130
        return exit_code(r.status for r in self.runs)


NOT_WORKING = frozenset({"error", "rate_limited", "quota_exhausted"})
"""Statuses meaning the runner could not work: a provider down after retries, out of quota
or rate-limited past the cap."""


def exit_code(statuses: Iterable[str]) -> int:
    """3 when any run could not work, else 0 when all completed, else 1; `runner run` and
    `runner report merge` exit alike."""
    seen = set(statuses)
    if seen & NOT_WORKING:
        return 3
    return 0 if seen <= {"completed"} else 1


@dataclass(frozen=True)
class BatchPlan:
    """The whole batch a (possibly sharded) run belongs to, for the report's identity."""

    fingerprints: tuple[str, ...]
    """Every run of the batch in task-file order, before `--shard`."""
    task_file_sha256: str
    shard: int = 1
    shards: int = 1
    not_selected: int = 0

    def identity(self) -> dict[str, Any]:
        import hashlib

        return {"task_file_sha256": self.task_file_sha256,
                "run_set": hashlib.sha256("\n".join(self.fingerprints).encode()).hexdigest(),
                "runs": len(self.fingerprints), "shard": self.shard, "shards": self.shards,
                "not_selected": self.not_selected}


CHECKPOINT_S = 3.0
"""Least time between two rewrites of the reports while a batch runs."""


class RunSink:
    """Between a thread and its event log: adds each request's cost, feeds the batch's
    spend (for batch limits) and the progress display."""

    def __init__(self, log: EventLog, price: PriceConfig | None, spend: BatchSpend,
                 run: str, progress: Progress) -> None:
        self.log = log
        self.price = price_of(price)
        self.spend = spend
        self.run = run
        self.progress = progress

    def emit(self, event: dict[str, Any]) -> None:
        if str(event.get("type", "")).startswith("stream."):
            # Token deltas: one JSON line, redaction scan and flush per token for text the
            # completed message carries anyway (`codex exec --json` has none either).
            return
        if event.get("type") == "request.completed":
            u = event.get("usage") or {}
            usage = Usage(input_tokens=int(u.get("input_tokens", 0)),
                          cached_tokens=int(u.get("cached_tokens", 0)),
                          output_tokens=int(u.get("output_tokens", 0)),
                          reasoning_tokens=int(u.get("reasoning_tokens", 0)))
            cost = None if self.price is None else round(self.price.cost(usage), 8)
            event = {**event, "cost_usd": cost}
            self.spend.add(usage, cost)
        self.log.emit(event)
        self.progress.event(self.run, event)


def secret_names(env: Mapping[str, str], tasks: Sequence[ResolvedTask] = ()) -> set[str]:
    """Variables whose values are secrets: names that look secret, the task file's
    `secrets:`, and every provider key and push token in use, whatever its name."""
    names = {k for k in env if SECRET_NAME.search(k)}
    for t in tasks:
        names.update(t.secrets)
        if t.provider.env_key:
            names.add(t.provider.env_key)
        if t.git.push is not None and t.git.push.token_env:
            names.add(t.git.push.token_env)
    return names


def secrets_from_env(env: Mapping[str, str], tasks: Sequence[ResolvedTask] = ()) -> list[str]:
    return [env[k] for k in sorted(secret_names(env, tasks)) if env.get(k)]


def without_secrets(env: Mapping[str, str], tasks: Sequence[ResolvedTask]) -> dict[str, str]:
    """The environment the agent's commands and the check start from: no secret variable,
    and no variable that carries a secret's value inside (`DB_URL=postgres://u:KEY@h`)."""
    names = secret_names(env, tasks)
    values = [v for v in secrets_from_env(env, tasks) if len(v) >= MIN_SECRET_LEN]
    return {k: v for k, v in env.items()
            if k not in names and not any(s in v for s in values)}


def sampling(opts: ModelOptions) -> tuple[dict[str, Any], dict[str, Any] | None,
                                          dict[str, Any] | None]:
    """Split model options into extra body fields, `reasoning` and `text`."""
    extra = {k: v for k, v in (("temperature", opts.temperature), ("top_p", opts.top_p),
                               ("seed", opts.seed),
                               ("max_output_tokens", opts.max_output_tokens)) if v is not None}
    reasoning: dict[str, Any] | None = None
    if opts.reasoning_effort is not None:
        reasoning = {"effort": opts.reasoning_effort}
        if opts.reasoning_summary not in (None, "none"):
            reasoning["summary"] = opts.reasoning_summary
    text = {"verbosity": opts.verbosity} if opts.verbosity else None
    return extra, reasoning, text


def local_timezone() -> str:
    """This machine's IANA zone for the prompt: `$TZ` if it names one, else the zone
    /etc/localtime links to, else UTC. Anything else in `$TZ` (a path, POSIX rules, junk)
    never reaches the prompt or the report."""
    from runner.config import timezone_problem

    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        link = os.readlink("/etc/localtime")
        candidates.append(link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else "")
    except OSError:
        pass
    for name in candidates:
        if name and timezone_problem(name) is None:
            return name
    return "UTC"


def make_tools(task: ResolvedTask) -> list[Tool]:
    """Tools in Codex's fixed order (shell, update_plan, apply_patch): part of the prefix."""
    chosen: list[Tool] = []
    if "shell" in task.tools:
        freeform = "apply_patch" in task.tools and task.apply_patch_tool == "freeform"
        chosen.append(ShellTool(default_timeout_ms=task.shell_timeout_ms,
                                plain_output=freeform))
    if "update_plan" in task.tools:
        chosen.append(PlanTool())
    if "apply_patch" in task.tools:
        chosen.append(ApplyPatchTool(freeform=task.apply_patch_tool == "freeform"))
    if task.web_search:  # where Codex puts it: after apply_patch, before MCP tools
        chosen.append(WebSearchTool())
    return chosen


class Clients:
    """One client per provider, opened on first use and closed with the batch."""

    def __init__(self, stack: AsyncExitStack, env: dict[str, str]) -> None:
        self._stack = stack
        self._env = env
        self._clients: dict[str, ModelClient] = {}
        self._lock = anyio.Lock()

    async def get(self, task: ResolvedTask) -> ModelClient:
        async with self._lock:
            if task.provider_name not in self._clients:
                client = await self._open(task)
                if task.provider.max_connections is not None:
                    client = _Capped(client, task.provider.max_connections)
                self._clients[task.provider_name] = client
            return self._clients[task.provider_name]

    async def _open(self, task: ResolvedTask) -> ModelClient:
        p = task.provider
        base_url = p.base_url
        if task.provider_name == "local":
            from runner.providers.local import LocalEngine

            engine = await self._stack.enter_async_context(LocalEngine())
            base_url = engine.base_url
        headers, api_key = provider_headers(
            http_headers=p.http_headers, env_http_headers=p.env_http_headers,
            env_key=p.env_key, auth=p.auth, env=self._env)
        client: ModelClient
        if p.wire_api == "chat":
            from runner.providers.chat import ChatClient, Constrained

            client = ChatClient(base_url, api_key=api_key, headers=headers,
                                query_params=p.query_params,
                                constrained_tools=p.constrained_tools,
                                constrained=Constrained(grammar=p.constrained_grammar),
                                stream_idle_timeout_s=p.stream_idle_timeout_s,
                                request_timeout_s=p.request_timeout_s)
        else:
            from runner.providers.responses import ResponsesClient

            client = ResponsesClient(base_url, api_key=api_key, headers=headers,
                                     query_params=p.query_params, store=p.store,
                                     stream_idle_timeout_s=p.stream_idle_timeout_s,
                                     request_timeout_s=p.request_timeout_s)
        from runner.providers.retry import RetryingClient

        client = RetryingClient(client, request_max_retries=p.request_max_retries,
                                stream_max_retries=p.stream_max_retries,
                                max_wait_s=p.max_retry_wait_s, key_env=p.env_key)
        self._stack.push_async_callback(client.aclose)
        return client


class _Capped:
    """At most `n` requests in flight to one provider, whatever `--concurrency` is."""

    def __init__(self, inner: ModelClient, n: int) -> None:
        self.inner = inner
        self.slots = anyio.CapacityLimiter(n)

    async def generate(self, prompt: Prompt,
                       *, on_event: Callable[[StreamEvent], None] | None = None
                       ) -> ModelResponse:
        async with self.slots:
            return await self.inner.generate(prompt, on_event=on_event)

    async def compact(self, prompt: Prompt) -> ModelResponse:
        """Compaction requests count against the same connection cap."""
        inner = find_compactor(self.inner)
        if inner is None:
            raise ModelError("this provider has no compaction endpoint")
        async with self.slots:
            return await inner.compact(prompt)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def run_batch(
    tasks: Sequence[ResolvedTask],
    *,
    out_dir: Path,
    task_file: str,
    concurrency: int = 4,
    json_out: IO[str] | None = None,
    json_extra: bool = False,
    progress: IO[str] | None = None,
    resume: bool = False,
    budget: BatchLimits | None = None,
    plan: BatchPlan | None = None,
    tf: TaskFile | None = None,
    models: Sequence[str] = (),
) -> BatchResult:
    """`tf` and `models` (`--model`) only locate problems the pre-flight check finds."""
    env = dict(os.environ)
    preflight.check(tasks, file=task_file, env=env, tf=tf, models=models, budget=budget)
    redact = Redactor(secrets_from_env(env, tasks))
    agent_env = without_secrets(env, tasks)
    stream = JsonStream(json_out, extra=json_extra) if json_out is not None else None
    journal = Journal(out_dir)
    run_id = journal.start_batch(run_id=uuid.uuid4().hex[:12], task_file=task_file,
                                 resume=resume)
    previous = journal.entries() if resume else {}
    started = dt.datetime.now(dt.UTC)
    today = dt.datetime.now().astimezone().date().isoformat()
    tz = local_timezone()
    runner_home = Path(env["RUNNER_HOME"]) if env.get("RUNNER_HOME") else None
    runs: list[TaskRun] = [TaskRun(t, None, f"threads/{t.run}.jsonl") for t in tasks]
    if plan is None:
        plan = BatchPlan(tuple(t.fingerprint for t in tasks), "")
    order = {f: i for i, f in enumerate(plan.fingerprints)}
    resumed = 0
    for run in runs:
        kept = done(previous.get(run.task.fingerprint))
        if kept is not None:
            run.report = kept.model_copy(update={"index": order.get(run.task.fingerprint)})
            resumed += 1
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    spend = BatchSpend(budget)
    show: Progress = make_progress(progress) if progress is not None else QuietProgress()
    if resumed and progress is not None:
        progress.write(f"resuming batch {run_id}: {resumed} of {len(runs)} runs already "
                       "finished\n")
    show.start(len(runs) - resumed)

    async def one(run: TaskRun, clients: Clients) -> None:
        run.skipped = "interrupted"
        run.error = "interrupted before it started"
        async with limiter:
            t = run.task
            why = spend.exceeded()
            if why is not None:
                run.skipped, run.error = "budget", f"not started: {why}"
                return
            run.skipped = run.error = None
            await _forget_attempt(previous.get(t.fingerprint), t.repo)
            journal.started(t.fingerprint, t.run, _branch(t, run_id))
            try:
                log = EventLog(out_dir / run.events_file, task=t.run, redact=redact,
                               stdout=stream)
            except OSError as exc:
                run.error = f"cannot write its events file {run.events_file}: {exc.strerror}"
                run.report = _run_report(run, out_dir, redact, order)
                journal.finished(t.fingerprint, run.report)
                show.run_finished(run.report)
                return
            show.run_started(t.run, f"{t.provider_name}/{t.model}")
            sink = RunSink(log, t.price, spend, t.run, show)
            ws: workspace.Workspace | None = None
            try:
                ws = await workspace.prepare(t.repo, base=t.git.base, root=work_root,
                                             name=t.run)
                run.ws = ws
                model = await clients.get(t)
                async with McpSessions(t.mcp_servers, cwd=ws.path, env=env,
                                       emit=sink.emit) as mcp:
                    run.current_date = t.current_date or today
                    run.timezone = t.timezone or tz
                    notes: list[str] = []
                    thread = _make_thread(t, ws.path, model, agent_env, sink,
                                          today=run.current_date, tz=run.timezone,
                                          runner_home=runner_home,
                                          budget=RunBudget(t.limits, t.price, spend),
                                          extra_tools=mcp.tools, redact=redact, notes=notes)
                    for note in notes:
                        _note(run, log, redact(note))
                    try:
                        run.outcome = await thread.run()
                    except anyio.get_cancelled_exc_class():
                        run.outcome = thread.interrupted("interrupted by a signal; the work "
                                                         "done so far is kept")
                        raise
                _check_output(run)
            except (EngineError, SandboxError, McpError, workspace.WorkspaceError,
                    UnsafeFileError) as exc:
                run.error = str(exc)
                log.failed(run.error)
            except Exception as exc:  # a bug in one run must not stop the others
                run.error = _internal(exc)
                log.failed(run.error)
            finally:
                with anyio.CancelScope(shield=True):
                    try:
                        if ws is not None:
                            # Commit first: files the check creates (caches, build output)
                            # must not land on the branch.
                            await _keep_result(run, ws, out_dir, run_id, redact, env, log,
                                               journal)
                            if run.outcome is not None:
                                run.check = await _run_check(t, ws.path, agent_env, ws.objects)
                                if run.check is not None:
                                    log.emit({"type": "check.completed",
                                              "exit_code": run.check.exit_code,
                                              "passed": run.check.passed,
                                              "output_tail": run.check.output_tail})
                    except Exception as exc:
                        run.error = _internal(exc)
                        log.failed(run.error)
                    finally:
                        if ws is not None:
                            await workspace.cleanup(ws)
                        log.close()
                        run.report = _run_report(run, out_dir, redact, order)
                        journal.finished(t.fingerprint, run.report)
                        # Here, not after: a run stopped by Ctrl-C must be shown too.
                        show.run_finished(run.report)
            await checkpoint()

    last_write = [0.0]
    writing = anyio.Lock()

    async def checkpoint() -> None:
        """Reports of the runs finished so far, at most every few seconds (in a worker
        thread: JUnit for thousands of runs takes a second), so a job killed or timed out
        by CI still leaves readable reports; the final write replaces them."""
        if time.monotonic() - last_write[0] < CHECKPOINT_S or writing.locked():
            return
        from runner.reports.files import write_reports
        from runner.reports.json_report import build_report

        async with writing:
            last_write[0] = time.monotonic()
            done_reports = [r.report for r in runs if r.report is not None]
            partial = build_report(tasks=done_reports, run_id=run_id, task_file=task_file,
                                   started=started, finished=dt.datetime.now(dt.UTC),
                                   pending=len(runs) - len(done_reports),
                                   batch=plan.identity())
            await anyio.to_thread.run_sync(functools.partial(
                write_reports, partial, out_dir, redact=redact, page=False))

    interrupted: list[int] = []
    with _work_root() as work_root:
        async with AsyncExitStack() as stack:
            clients = Clients(stack, env)
            async with anyio.create_task_group() as outer:
                outer.start_soon(_stop_on_signal, outer.cancel_scope, interrupted)
                async with anyio.create_task_group() as tg:
                    for run in runs:
                        if run.report is None:
                            run.skipped = "interrupted"  # until it starts
                            tg.start_soon(one, run, clients)
                outer.cancel_scope.cancel()
    show.close()
    async with writing:   # a checkpoint still writing must not land after the final report
        pass
    from runner.reports.files import write_reports
    from runner.reports.json_report import build_report

    finished = dt.datetime.now(dt.UTC)
    reports = [r.report if r.report is not None else _run_report(r, out_dir, redact, order)
               for r in runs]
    report = build_report(tasks=reports, run_id=run_id, task_file=task_file,
                          started=started, finished=finished, batch=plan.identity())
    report_path = write_reports(report, out_dir, redact=redact,
                                step_summary=env.get("GITHUB_STEP_SUMMARY"))
    return BatchResult(runs, report_path, interrupted=bool(interrupted), resumed=resumed)


def _internal(exc: Exception) -> str:
    return (f"internal error in the runner ({type(exc).__name__}: {exc}); the other runs "
            "went on. Please report it with this run's events file.")


def _run_report(run: TaskRun, out_dir: Path, redact: Redactor,
                order: Mapping[str, int]) -> TaskReport:
    from runner.reports.json_report import task_report
    from runner.reports.model import TaskReport

    t = run.task
    base = task_report(run, out_dir)
    price = price_of(t.price)
    cost = None if price is None else round(
        price.cost(run.outcome.usage if run.outcome else Usage()), 6)
    rep = base.model_copy(update={"variant": t.variant, "tags": list(t.tags),
                                  "fingerprint": t.fingerprint, "cost_usd": cost,
                                  "index": order.get(t.fingerprint),
                                  "skip_reason": run.skipped if base.status == "skipped"
                                  else None})
    # Redacted once here: the journal and every report are made from this copy. Text from
    # the model may hold lone surrogates (valid in JSON, not in UTF-8): replaced first.
    return TaskReport.model_validate_json(redact(json.dumps(
        _utf8_safe(rep.model_dump(mode="json")), ensure_ascii=False)))


def _utf8_safe(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_utf8_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _utf8_safe(v) for k, v in value.items()}
    return value


def _branch(t: ResolvedTask, run_id: str) -> str | None:
    if t.git.keep != "branch":
        return None
    try:
        return workspace.branch_name(t.git.branch, _branch_fields(t, run_id))
    except workspace.WorkspaceError:
        return None


def _branch_fields(t: ResolvedTask, run_id: str) -> dict[str, str]:
    return {"run": run_id, "task": t.id, "model": f"{t.provider_name}/{t.model}",
            "repeat": str(t.repeat), "name": t.run, "variant": t.variant or ""}


async def _forget_attempt(entry: Entry | None, repo: Path) -> None:
    """A run redone by `--resume` first deletes the branch its killed attempt may have
    made, so there is one branch per run. Only a branch named in that attempt's journal
    record, and still pointing at the commit recorded there, is touched."""
    if entry is None or not entry.branch or not entry.commit:
        return   # no commit recorded: the attempt never got to make a branch
    await workspace.delete_branch(repo, entry.branch, entry.commit)


async def _stop_on_signal(scope: anyio.CancelScope, interrupted: list[int]) -> None:
    """Ctrl-C or SIGTERM cancels every run; each one still commits its work (shielded
    cleanup in `one`) and the reports are written before the runner exits."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            interrupted.append(signum)
            scope.cancel()
            return


def _make_thread(t: ResolvedTask, cwd: Path, model: ModelClient, env: dict[str, str],
                 log: Sink, *, today: str, tz: str, runner_home: Path | None,
                 budget: Budget | None = None, extra_tools: Sequence[Tool] = (),
                 redact: Redactor | None = None, notes: list[str] | None = None) -> Thread:
    from runner import compaction


    extra, reasoning, text = sampling(t.model_options)
    # One policy for what the sandbox enforces and what the model is told. The runs'
    # directory (cwd's parent) holds the other runs and the runner's private git dirs.
    policy = make_policy(t.sandbox, workspace=cwd, writable_roots=t.writable_roots,
                         network=t.network_access, hidden=[cwd.parent])
    executor = make_executor(policy)  # SandboxError where bubblewrap cannot run
    context = prompts.initial_context(
        cwd=cwd, sandbox=t.sandbox, network=policy.network,
        writable_roots=list(policy.prompt_roots()),
        developer_instructions=t.developer_instructions, runner_home=runner_home,
        shell="bash", current_date=today, timezone=tz,
        permission_notes=[*policy.notes(), *([MCP_NOTE] if extra_tools else [])],
        skills=prompts.skills_instructions(t.skills, context_window=t.context_window),
        notes=notes)
    if t.output_schema is not None:
        text = {**(text or {}), "format": text_format(t.output_schema)}
    spec = ThreadSpec(
        thread_id=str(uuid.uuid4()), model=t.api_model or t.model,
        instructions=prompts.load_instructions(t.instructions_file),
        context=context, prompts=(t.prompt, *t.turns),
        max_requests=t.limits.max_turns, timeout_s=t.limits.timeout_s,
        max_tool_calls=t.limits.max_tool_calls, budget=budget,
        parallel_tool_calls=bool(t.model_options.parallel_tool_calls),
        reasoning=reasoning, text=text, extra=extra,
        compaction=compaction.CompactionSettings(
            limit=t.auto_compact_limit, prompt=compaction.load_prompt(t.compact_prompt_file)),
        compactor=find_compactor(model) if t.provider.remote_compaction else None)
    ctx = ToolContext(cwd=cwd, executor=executor, env=child_env(env),
                      read_only=policy.mode == "read-only",
                      protected=PROTECTED_NAMES if policy.sandboxed else ())
    tools: list[Tool] = [*make_tools(t), *extra_tools]
    if redact:
        tools = [Redacting(tool, redact) for tool in tools]
    return Thread(spec, model, tools, ctx, log)


class Redacting:
    """A tool whose output is redacted before the model sees it: without a sandbox a
    command can read the runner's own environment (/proc/$PPID/environ), and what the
    model reads is sent to the provider and may be echoed into any artifact."""

    def __init__(self, inner: Tool, redact: Redactor) -> None:
        self.inner = inner
        self.name = inner.name
        self.redact = redact

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return self.inner.started(call)

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        result = await self.inner.run(call, ctx)
        return dataclasses.replace(result, output=self.redact(result.output))


def _check_output(run: TaskRun) -> None:
    """A completed run's final answer against the task's `output_schema`: parsed into
    the report, or the run fails saying why. Only the last answer is the run's output."""
    o, schema = run.outcome, run.task.output_schema
    if o is None or schema is None or o.status != "completed":
        return
    run.output, why = check_answer(schema, o.final_message)
    if why is not None:
        o.status, o.error = "failed", why


async def _keep_result(run: TaskRun, ws: workspace.Workspace, out_dir: Path, run_id: str,
                       redact: Redactor, env: dict[str, str], log: EventLog,
                       journal: Journal | None = None) -> None:
    """Commit whatever the run changed, whatever its status: nothing done is lost.
    Secrets are redacted from the files before the commit (see `workspace.finish`)."""
    t = run.task
    if run.outcome is not None:
        # What the model said goes to stdout and reports: never with a secret in it.
        o = run.outcome
        o.final_message = redact(o.final_message) if o.final_message else o.final_message
        o.error = redact(o.error) if o.error else o.error
    status = run.outcome.status if run.outcome else "error"
    final = (run.outcome.final_message if run.outcome else None) or ""
    message = redact(f"runner: {t.id} with {t.provider_name}/{t.model}: {status}\n\n"
                     f"{final[:4000]}\n\nRunner-Run: {run_id}\nRunner-Status: {status}\n")
    g = t.git
    scope = workspace.Scope(allowed=list(g.allowed_paths) if g.allowed_paths is not None
                            else None, forbidden=list(g.forbidden_paths),
                            max_diff_lines=g.max_diff_lines)
    try:
        result = await workspace.finish(
            ws, branch_template=g.branch, message=message, scope=scope,
            create_branch=g.keep == "branch",
            fields=_branch_fields(t, run_id),
            patch_path=out_dir / "patches" / f"{t.run}.patch",
            redact=redact if redact else None,
            before_branch=None if journal is None else functools.partial(
                journal.branching, t.fingerprint, t.run),
            on_left_out=functools.partial(_left_out, run, log, redact))
    except workspace.WorkspaceError as exc:
        run.error = f"could not keep the result: {exc}"
        run.not_kept = True
        log.emit({"type": "error", "message": run.error})
        return
    run.result = result
    if result is None:
        return
    log.emit({"type": "result.committed", "commit": result.commit, "branch": result.branch,
              "files_changed": len(result.files), "insertions": result.insertions,
              "deletions": result.deletions, "violations": list(result.violations)})
    if g.push is not None and result.branch is not None:
        token = env.get(g.push.token_env) if g.push.token_env else None
        try:
            pushed = await workspace.push(t.repo, result.branch, remote=g.push.remote,
                                          token=token)
            run.pushed = pushed.ref
        except workspace.WorkspaceError as exc:
            run.error = redact(f"push failed: {exc}")
            log.emit({"type": "error", "message": run.error})


def _left_out(run: TaskRun, log: EventLog, redact: Redactor, entries: list[str]) -> None:
    """Entries git must not record were left out and the rest committed; the report
    says which, as it says why a push failed."""
    shown = [redact(e) for e in entries[:LEFT_OUT_SHOWN]]
    more = len(entries) - len(shown)
    _note(run, log, "not captured in the result: " + "; ".join(shown)
          + (f"; and {more} more" if more else ""))


def _note(run: TaskRun, log: EventLog, note: str) -> None:
    """Something the run went on without; the report's `error` says it (as for a failed
    push) whatever the status, and the events file has it as a `note`."""
    run.error = note if run.error is None else f"{run.error}; {note}"
    log.emit({"type": "note", "message": note})


LEFT_OUT_SHOWN = 20


@contextmanager
def _work_root() -> Iterator[Path]:
    """Where the run checkouts live: outside any repository, at the same path every time
    (`$TMPDIR/runner-work/0`, or `/1`... while another batch holds `0`), because the path is
    part of the prompt (cwd): a stable prompt keeps runs reproducible and cacheable. A lock
    held for the batch tells a concurrent batch to take the next slot; whatever a killed
    batch left in a free slot is removed first."""
    base = Path(tempfile.gettempdir()) / "runner-work"
    base.mkdir(exist_ok=True)
    for slot in range(1000):
        lock = (base / f"{slot}.lock").open("w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        root = base / str(slot)
        try:
            _clear_slot(root)
            root.mkdir()
            yield root
        finally:
            _clear_slot(root)
            lock.close()
        return
    raise RuntimeError(f"no free workspace slot under {base}")


def _clear_slot(root: Path) -> None:
    """Whatever a run left (any depth, any permissions) never blocks the next batch: what
    cannot be deleted is moved out of the way."""
    try:
        remove_tree(root)
    except OSError:
        os.rename(root, root.with_name(f".stale-{root.name}-{uuid.uuid4().hex[:8]}"))
