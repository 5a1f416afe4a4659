"""Scheduling a batch: which runs start and when (concurrency, the batch budget,
`--resume`), signals, checkpoints of the reports while it runs, and the final report.
One run's life is run.py; the clients and tools it uses are wiring.py.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import functools
import os
import signal
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from runner import clock, outdir
from runner.budget import BatchSpend
from runner.config import BatchLimits, Run, uses_environment
from runner.config.preflight import FULL_ACCESS
from runner.config.secrets import secrets_from_env, without_secrets
from runner.errors import ConfigError, EnvironmentFault, Problem, RunnerError
from runner.frozen import frozen
from runner.hostfs import remove_tree
from runner.journal import Journal, Pins, done, pin_note, resume_note
from runner.progress import EventSink, QuietProgress
from runner.record import Finished, RunRecord
from runner.redact import Redactor
from runner.report_entry import run_report
from runner.run import BatchContext, live
from runner.sandbox import RUN_DIRS, registry, user_folder
from runner.sandbox.bwrap import probe_ahead
from runner.vocabulary import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNNER,
    EXIT_TASK_FAILED,
    NOT_WORKING,
    RunStatus,
)
from runner.wiring import Clients

if TYPE_CHECKING:
    from runner.envrun import Environments
    from runner.reports.model import Report, RunReport  # loaded when the first run ends


@frozen
class BatchResult:
    runs: list[Finished]
    """Every run in task-file order, with its report entry."""
    report_path: Path
    interrupted: bool = False

    @property
    def exit_code(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return exit_code(r.status for r in self.runs)


def exit_code(statuses: Iterable[RunStatus]) -> int:
    """3 when any run could not be done or graded (a verifier's error too), else 0 when all
    completed, else 1; `runner run` and `runner report merge` exit alike."""
    seen = set(statuses)
    if seen & NOT_WORKING:
        return EXIT_RUNNER
    return EXIT_OK if seen <= {RunStatus.COMPLETED} else EXIT_TASK_FAILED


@frozen
class BatchPlan:
    """The whole batch a (possibly sharded) run belongs to, for the report's identity."""

    fingerprints: tuple[str, ...]
    """Every run of the batch in task-file order, before `--shard`."""
    task_file_sha256: str
    shard: int = 1
    shards: int = 1
    not_selected: int = 0
    bases: tuple[tuple[str, str, str], ...] = ()
    """(repository, base, commit) the config pass found moments ago (`Loaded.bases`)."""

    def identity(self) -> dict[str, Any]:
        import hashlib

        return {
            "task_file_sha256": self.task_file_sha256,
            "run_set": hashlib.sha256("\n".join(self.fingerprints).encode()).hexdigest(),
            "runs": len(self.fingerprints),
            "shard": self.shard,
            "shards": self.shards,
            "not_selected": self.not_selected,
        }


CHECKPOINT_S = 3.0
"""Least time between two rewrites of the reports while a batch runs."""


async def run_batch(
    tasks: Sequence[Run],
    *,
    out_dir: Path,
    concurrency: int = 4,
    resume: bool = False,
    budget: BatchLimits | None = None,
    plan: BatchPlan | None = None,
    env: Mapping[str, str] | None = None,
    secret_vars: Collection[str] = (),
    events: EventSink | None = None,
    force: bool = False,
    retry_errored: bool = False,
    max_environments: int | None = None,
) -> BatchResult:
    """Run `tasks`, as the config pass made and checked them (`config.load`): nothing is
    checked again here. `env` is the runner's environment (default os.environ);
    `secret_vars` name variables of it that are secrets whatever their names
    (`--secret-fd`). `events` hears everything the batch does while it runs. The out
    dir is held for the batch's life (`outdir.claim`); `force` lets a fresh batch replace
    an earlier one there; `retry_errored` makes `resume` redo the errored runs too;
    `max_environments` caps the containers and Pods alive at once (default: as many as
    `concurrency`)."""
    holds = [Path(tasks[0].origins[""].file), *{t.repo for t in tasks}] if tasks else []
    with outdir.claim(out_dir, resume=resume, force=force, holds=holds):
        return await _run_batch(
            tasks,
            out_dir=out_dir,
            concurrency=concurrency,
            resume=resume,
            budget=budget,
            plan=plan,
            env=env,
            secret_vars=secret_vars,
            events=events,
            retry_errored=retry_errored,
            max_environments=max_environments or concurrency,
        )


async def _run_batch(
    tasks: Sequence[Run],
    *,
    out_dir: Path,
    concurrency: int,
    resume: bool,
    budget: BatchLimits | None,
    plan: BatchPlan | None,
    env: Mapping[str, str] | None,
    secret_vars: Collection[str],
    events: EventSink | None,
    retry_errored: bool,
    max_environments: int,
) -> BatchResult:
    env = dict(os.environ if env is None else env)
    task_file = tasks[0].origins[""].file if tasks else ""
    _temp_outside_repos(task_file, tasks)
    show: EventSink = events if events is not None else QuietProgress()
    _warn_unisolated(tasks, concurrency, show)
    redact = Redactor(secrets_from_env(env, tasks, secret_vars))
    agent_env = without_secrets(env, tasks, secret_vars)
    journal = Journal(out_dir)
    if plan is None:
        plan = BatchPlan(tuple(t.fingerprint for t in tasks), "")
    here = await _pins_here(tasks, plan.bases)
    batch_id = journal.start_batch(
        batch_id=uuid.uuid4().hex[:12],
        task_file=task_file,
        resume=resume,
        batch=plan.identity(),
        pins=here,
    )
    previous = journal.entries() if resume else {}
    started = dt.datetime.now(dt.UTC)
    pins = journal.pins(here) if resume else here
    today, tz = pins.today, pins.tz
    runner_home = Path(env["RUNNER_HOME"]) if env.get("RUNNER_HOME") else None
    order = {f: i for i, f in enumerate(plan.fingerprints)}
    finished: dict[str, Finished] = {}
    for t in tasks:
        kept = done(previous.get(t.fingerprint), retry_errored=retry_errored)
        if kept is not None:
            entry = kept.model_copy(update={"index": order.get(t.fingerprint)})
            finished[t.fingerprint] = Finished(None, entry)
    resumed = len(finished)
    skipped: dict[str, RunRecord] = {}  # runs the batch budget kept from starting
    limiter = anyio.CapacityLimiter(max(1, concurrency))
    spend = BatchSpend(budget)
    if resume:
        show.note(resume_note(batch_id, [f.report for f in finished.values()], len(tasks)))
        if (changed := pin_note(pins, here)) is not None and resumed < len(tasks):
            show.note(changed)
    show.start(len(tasks) - resumed)

    def report_of(tasks: list[RunReport], pending: int = 0) -> Report:
        """The batch's report of these runs, as of now (checkpoints and the final one)."""
        from runner.reports.json_report import build_report

        now = dt.datetime.now(dt.UTC)
        return build_report(
            runs=tasks,
            batch_id=batch_id,
            task_file=task_file,
            started=started,
            finished=now,
            pending=pending,
            batch=plan.identity(),
        )

    def so_far() -> Report:
        now = [f.report for t in tasks if (f := finished.get(t.fingerprint)) is not None]
        return report_of(now, pending=len(tasks) - len(now))

    checkpoints = Checkpoints(so_far, out_dir, redact)

    async def one(t: Run, ctx: BatchContext) -> None:
        async with limiter:
            held = held_back(t, spend, ctx.clients)
            if held is not None:
                skipped[t.fingerprint] = held
                return
            await live(RunRecord(t, events_file(t)), ctx)
            await checkpoints.due()

    stop = anyio.Event()
    with _work_root(out_dir, task_file, tasks) as work_root:
        async with AsyncExitStack() as stack:
            envs = await _environments(tasks, batch_id, max_environments, env, show, stack)
            ctx = BatchContext(
                out_dir=out_dir,
                batch_id=batch_id,
                env=env,
                agent_env=agent_env,
                redact=redact,
                journal=journal,
                previous=previous,
                order=order,
                spend=spend,
                show=show,
                clients=Clients(stack, env, (budget or BatchLimits()).max_connect_failures),
                work_root=work_root,
                today=today,
                tz=tz,
                bases=pins,
                runner_home=runner_home,
                stop=stop,
                finished=finished,
                environments=envs,
                hidden=(work_root.parent, out_dir, *_own_dirs(env), *_task_places(task_file)),
            )
            async with anyio.create_task_group() as outer:
                checkpoints.waiting_in = outer  # cancelled with it: the final report follows
                outer.start_soon(_stop_on_signal, outer.cancel_scope, stop, ctx.checks)
                if any(_in_bwrap(t) for t in tasks if t.fingerprint not in finished):
                    outer.start_soon(anyio.to_thread.run_sync, probe_ahead)
                async with anyio.create_task_group() as tg:
                    for t in tasks:
                        if t.fingerprint not in finished:
                            tg.start_soon(one, t, ctx)
                outer.cancel_scope.cancel()
    show.close()
    await checkpoints.settled()  # a checkpoint still writing must not land after this
    from runner.reports.files import write_reports

    runs = [
        finished.get(t.fingerprint)
        or _unfinished(skipped.get(t.fingerprint) or _not_started(t), out_dir, redact, order)
        for t in tasks
    ]
    report = report_of([f.report for f in runs])
    report_path = write_reports(
        report, out_dir, redact=redact, step_summary=env.get("GITHUB_STEP_SUMMARY")
    )
    return BatchResult(runs, report_path, interrupted=stop.is_set())


async def _pins_here(tasks: Sequence[Run], known: Sequence[tuple[str, str, str]]) -> Pins:
    """This machine's day and zone now, the pinned ones, and the commit each repository's
    `git.base` names now: what a fresh batch records for `--resume` (`journal.Pins`).
    `known`: commits the config pass found moments before, not asked of git again."""
    from runner import workspace

    found: dict[tuple[str, str], str] = {(r, b): sha for r, b, sha in known}
    asked = {
        (str(t.repo), t.git.base): t.repo for t in tasks if not uses_environment(t) or t.repo_named
    }

    def commits() -> tuple[tuple[str, str, str], ...]:
        for (repo, base), path in asked.items():
            if (repo, base) not in found:
                with contextlib.suppress(workspace.WorkspaceError):  # the run says why
                    found[(repo, base)] = workspace.check_base(path, base)
        return tuple((r, b, found[(r, b)]) for r, b in asked if (r, b) in found)

    return Pins(
        clock.today(),
        clock.local_timezone(),
        tuple(sorted({t.current_date for t in tasks if t.current_date})),
        tuple(sorted({t.timezone for t in tasks if t.timezone})),
        commits() if asked.keys() <= found.keys() else await anyio.to_thread.run_sync(commits),
    )


async def _environments(
    tasks: Sequence[Run],
    batch_id: str,
    max_environments: int,
    env: Mapping[str, str],
    show: EventSink,
    stack: AsyncExitStack,
) -> Environments | None:
    """The batch's containers and Pods, when any run has one: first the containers a
    killed batch of this user's left behind are removed (a resumed batch's own among
    them, before it marks its id alive), then the batch is marked alive for its life."""
    if not any(uses_environment(t) for t in tasks):
        return None
    from runner.envrun import Environments  # containers and Pods: not a local batch's cost
    from runner.sandbox.orphans import live_batch

    envs = Environments(batch_id, max_environments, env)
    try:
        gone = await envs.reap(tasks)
    except EnvironmentFault as exc:
        show.note(f"runner: warning: could not look for containers left behind: {exc}")
    else:
        images = sum(g.startswith("image ") for g in gone)
        parts = [f"{len(gone) - images} container(s) or Pod(s)"] if len(gone) > images else []
        parts += [f"{images} untagged build image(s)"] if images else []
        if parts:
            show.note(f"runner: removed {' and '.join(parts)} a killed batch left behind")
    envs.mark = stack.enter_context(live_batch(batch_id))
    await envs.reserve(tasks)
    return envs


def _in_bwrap(t: Run) -> bool:
    """Whether the run's commands (or its check) run in bubblewrap on this host."""
    return t.sandbox != FULL_ACCESS and not uses_environment(t)


def _warn_unisolated(tasks: Sequence[Run], concurrency: int, show: EventSink) -> None:
    """Said before anything runs, since nothing enforces it: a full-access command is a
    process of the runner's user on the host, so it can reach every other run of the batch
    running beside it (its workspace, its git's pipes through /proc/<pid>/fd, its MCP
    servers)."""
    full = [t.name for t in tasks if t.sandbox == FULL_ACCESS]
    if concurrency > 1 and len(tasks) > 1 and full:
        more = f" and {len(full) - 1} more" if len(full) > 1 else ""
        show.note(
            f"runner: warning: {full[0]}{more} run(s) with danger-full-access at "
            f"--concurrency {concurrency}: runs that overlap are not isolated from "
            "each other (a full-access command can read and change the others' "
            "workspaces and processes); use --concurrency 1 or a sandbox to keep "
            "them apart"
        )


def held_back(t: Run, spend: BatchSpend, clients: Clients) -> RunRecord | None:
    """The record of a run that must not start: the batch budget is spent, or its
    provider stopped answering (the other providers' runs go on)."""
    why = spend.exceeded()
    if why is not None:
        return RunRecord(t, events_file(t), skipped="budget", notes=(f"not started: {why}",))
    down = clients.down(t)
    if down is not None:
        note = f"not started: {down}"
        return RunRecord(t, events_file(t), skipped="provider_down", notes=(note,))
    return None


def events_file(t: Run) -> str:
    return f"threads/{t.name}.jsonl"


def _not_started(t: Run) -> RunRecord:
    """A run a signal stopped before it started."""
    return RunRecord(
        t, events_file(t), skipped="interrupted", notes=("interrupted before it started",)
    )


def _unfinished(
    rec: RunRecord, out_dir: Path, redact: Redactor, order: Mapping[str, int]
) -> Finished:
    return Finished(rec, run_report(rec, out_dir, redact, order))


class Checkpoints:
    """Reports of the runs finished so far, rewritten while the batch runs, so a job
    killed or timed out by CI still leaves readable reports; the final write replaces them.

    At most one write every `CHECKPOINT_S` (in a worker thread: JUnit for thousands of runs
    takes a second). A run finishing too soon after the last write leaves one write waiting
    for the interval to end, so no finished run is missing for longer than that."""

    def __init__(self, report: Callable[[], Report], out_dir: Path, redact: Redactor) -> None:
        self._report = report
        self._out_dir = out_dir
        self._redact = redact
        self._writing = anyio.Lock()
        self._last_write = 0.0
        self._last_page = 0.0
        self._page_took = 0.0
        self._waiting = False
        self.waiting_in: anyio.abc.TaskGroup | None = None
        """Where a deferred write waits; none before the batch's task group exists."""

    async def due(self) -> None:
        wait = CHECKPOINT_S - (time.monotonic() - self._last_write)
        if wait > 0 or self._writing.locked():
            if not self._waiting and self.waiting_in is not None:
                self._waiting = True
                self.waiting_in.start_soon(self._later, max(wait, 0.05))
            return
        await self._write()

    async def settled(self) -> None:
        """Returns once no write is under way."""
        async with self._writing:
            pass

    async def _later(self, delay: float) -> None:
        await anyio.sleep(delay)
        self._waiting = False
        await self.due()

    async def _write(self) -> None:
        from runner.reports.files import write_reports

        async with self._writing:
            self._last_write = time.monotonic()
            partial = self._report()
            # report.html too, but at most a tenth of the time: with thousands of runs
            # it takes seconds (transcripts are read), the other reports milliseconds.
            now = time.monotonic()
            page = now - self._last_page >= max(CHECKPOINT_S, 10 * self._page_took)
            await anyio.to_thread.run_sync(
                functools.partial(
                    write_reports, partial, self._out_dir, redact=self._redact, page=page
                )
            )
            if page:
                self._last_page, self._page_took = now, time.monotonic() - now


async def _stop_on_signal(
    scope: anyio.CancelScope, stop: anyio.Event, checks: set[anyio.CancelScope]
) -> None:
    """Ctrl-C or SIGTERM cancels every run and every running check; each run still
    commits its work (shielded cleanup in `run.live`) and the reports are written before
    the runner exits."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for _ in signals:
            stop.set()
            scope.cancel()
            for check in list(checks):
                check.cancel()
            return


def _own_dirs(env: Mapping[str, str]) -> list[Path]:
    """The runner's own folders the environment names: its global AGENTS.md
    (`RUNNER_HOME`) and the Codex config it reads providers from (`CODEX_HOME`)."""
    return [Path(env[k]).absolute() for k in ("RUNNER_HOME", "CODEX_HOME") if env.get(k)]


def _task_places(task_file: str) -> list[Path]:
    """The task file (its check commands, expected answers, the other runs' prompts) and
    the folder holding it, when that is a folder of the user's (see `user_folder`):
    what lies beside a benchmark's task file is the benchmark's."""
    path = Path(os.path.realpath(task_file))
    if not path.is_file():
        return []
    folder = user_folder(path.parent)
    return [path] if folder is None else [path, folder]


def _temp_outside_repos(task_file: str, tasks: Sequence[Run]) -> list[Path]:
    """The tasks' repositories, resolved. ConfigError when TMPDIR (where the workspaces
    go) lies in one: the repository's path would be every command's cwd and show in
    its mount table."""
    temp = Path(os.path.realpath(tempfile.gettempdir()))
    repos = list(dict.fromkeys(Path(os.path.realpath(t.repo)) for t in tasks))
    for repo in repos:
        if temp.is_relative_to(repo):
            problem = (
                f"{temp} lies inside the repository {repo}; the runs' workspaces would "
                "name the repository in every command's cwd and mount table: set TMPDIR "
                "outside it"
            )
            raise ConfigError([Problem(task_file, None, "TMPDIR", problem)])
    return repos


@contextmanager
def _work_root(out_dir: Path, task_file: str, tasks: Sequence[Run]) -> Iterator[Path]:
    """Where the run checkouts live: outside any repository, at the same path every time
    (`$TMPDIR/runner-work/0`, or `/1`... while another batch holds `0`), because the path is
    part of the prompt (cwd): a stable prompt keeps runs reproducible and cacheable. A lock
    held for the batch tells a concurrent batch to take the next slot; whatever a killed
    batch left in a free slot is removed first.

    The folder, the out dir, the repositories and the task folder are registered
    (runner/sandbox/registry.py), so every sandbox of the user's leaves them out wherever
    they are, while the batch lives and after a kill; the out dir stays registered once
    the batch ends."""
    temp = Path(os.path.realpath(tempfile.gettempdir()))
    repos = _temp_outside_repos(task_file, tasks)
    base = Path(os.path.realpath(_private_run_dirs(temp)))
    out = Path(os.path.realpath(out_dir))
    places = [base, out, *repos, *_task_places(task_file)[1:]]
    with registry.live(places, keep=[out]):
        yield from _slot(base)


def _slot(base: Path) -> Iterator[Path]:
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
            root.mkdir(0o700)
            yield root
        finally:
            _clear_slot(root)
            lock.close()
        return
    raise RunnerError(f"no free workspace slot under {base}: 1,000 batches hold one")


def _private_run_dirs(temp: Path) -> Path:
    """`temp/runner-work`, made mode 0700 or checked to be a folder of the runner's own
    with no access for others (a group or other bit left by an older runner is taken
    away); when someone else made it (root's `/tmp/runner-work` for a user whose TMPDIR is
    unset) or it is a link, `temp/runner-work-<uid>` the same way. The runs' workspaces
    lie inside, and a root runner's commands all run as the same user, so on the host
    this folder is what keeps one batch's commands out of another's runs (the sandbox
    also leaves every `runner-work` it knows of out of its view)."""
    why = ""
    for base in (temp / RUN_DIRS, temp / f"{RUN_DIRS}-{os.geteuid()}"):
        problem = _own_folder(base)
        if problem is None:
            return base
        why += f"{base}: {problem}; "
    raise RunnerError(
        f"{why}the runs' workspaces cannot be kept private there: remove them or set "
        "TMPDIR elsewhere"
    )


def _own_folder(base: Path) -> str | None:
    """None once `base` is a folder of this uid's with mode 0700, else what is wrong."""
    with contextlib.suppress(OSError):
        os.mkdir(base, 0o700)
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            return "someone else's"
        if stat.S_IMODE(os.fstat(fd).st_mode) != 0o700:
            os.fchmod(fd, 0o700)
        return None
    finally:
        os.close(fd)


def _clear_slot(root: Path) -> None:
    """Whatever a run left (any depth, any permissions) never blocks the next batch: what
    cannot be deleted is moved out of the way."""
    try:
        remove_tree(root)
    except OSError:
        os.rename(root, root.with_name(f".stale-{root.name}-{uuid.uuid4().hex[:8]}"))
