"""Command line: parse flags, load the task file, run, map the outcome to an exit code.

Exit codes: 0 every task completed; 1 a task failed or hit a limit; 2 bad input (task
file, flags, environment); 3 the runner itself could not work.

Why one module: the argument parser and one short function per command; the work is
elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.cli_common import flag_problem, flush_quietly, say, warn
from runner.errors import ConfigError, RunnerError
from runner.report_cli import report_branches, report_compare, report_merge
from runner.suite_cli import add_agent_flag, add_commands, run_command
from runner.vocabulary import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNNER,
    REASONING_EFFORTS,
    SANDBOX_MODES,
    RunStatus,
)

if TYPE_CHECKING:
    from runner.batch import BatchPlan
    from runner.config import Loaded
    from runner.config.resolved import Run


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        warn(f"runner: error: {message}")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="runner", description="Run coding-agent tasks from a YAML file.")
    p.add_argument("--version", action=_VersionAction)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    run = sub.add_parser("run", help="run the tasks of a task file")
    run.add_argument("tasks", type=Path, help="the task file (YAML)")
    run.add_argument(
        "--out",
        type=Path,
        default=Path("runner-out"),
        help="directory for report.json and threads/ (default: runner-out)",
    )
    run.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="PROVIDER/MODEL",
        help="run every task on this model (repeatable; replaces matrix.model)",
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ID",
        help="run only this task id (repeatable)",
    )
    run.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="run only tasks with this tag (repeatable: any of them)",
    )
    run.add_argument(
        "--shard",
        metavar="K/N",
        help="run the K-th of N deterministic slices of the runs (1-based)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="keep the finished runs recorded in --out and run the rest",
    )
    run.add_argument(
        "--retry-errored",
        action="store_true",
        help="with --resume: run the errored runs (error, rate_limited, quota_exhausted) again too",
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="start a new batch in a used --out: the earlier batch's files there are "
        "deleted, other files kept",
    )
    run.add_argument("--concurrency", type=int, default=4, help="threads at once (default 4)")
    run.add_argument(
        "--max-environments",
        type=int,
        metavar="N",
        help="containers or Pods alive at once (default: the task file's max_environments, "
        "else --concurrency)",
    )
    run.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        help="use this sandbox for every task (e.g. read-only on pull requests)",
    )
    run.add_argument(
        "--reasoning-effort",
        choices=REASONING_EFFORTS,
        help="use this reasoning effort for every run (over model_options)",
    )
    run.add_argument(
        "--secret-fd",
        type=int,
        metavar="FD",
        help="read NAME=VALUE lines (e.g. the provider key) from this file descriptor (0: "
        "stdin); they are secrets of this process only, in no process's environment",
    )
    run.add_argument(
        "--json",
        action="store_true",
        help="stream the `codex exec --json` events on stdout, one run after another",
    )
    run.add_argument(
        "--json-extra",
        action="store_true",
        help="with --json: also the runner's own events (requests, "
        "compactions, checks), each line tagged with task and ts",
    )
    _pin_flags(run)
    add_agent_flag(run)
    val = sub.add_parser("validate", help="check a task file, list its runs and exit")
    val.add_argument("tasks", type=Path)
    for flag, kw in (
        ("--model", {"metavar": "PROVIDER/MODEL"}),
        ("--only", {"metavar": "ID"}),
        ("--tag", {"metavar": "TAG"}),
    ):
        val.add_argument(flag, action="append", default=[], **kw)  # type: ignore[arg-type]
    val.add_argument("--shard", metavar="K/N")
    val.add_argument("--sandbox", choices=SANDBOX_MODES, help="as for run")
    _pin_flags(val)
    add_agent_flag(val)
    val.add_argument(
        "--offline",
        action="store_true",
        help="skip the checks that need this machine's runtime environment "
        "(API key variables, repositories), e.g. in a lint job",
    )
    rep = sub.add_parser("report", help="work with report directories")
    rep_sub = rep.add_subparsers(dest="report_command", required=True, parser_class=_Parser)
    merge = rep_sub.add_parser("merge", help="combine the report directories of shards into one")
    merge.add_argument(
        "dirs",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="directories written by `runner run --shard K/N --out DIR`",
    )
    merge.add_argument("--out", type=Path, required=True, help="the merged directory")
    merge.add_argument(
        "--partial",
        action="store_true",
        help="merge even with shards missing (the result says it is partial)",
    )
    merge.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier batch's or merge's files in --out (other files are kept)",
    )
    br = rep_sub.add_parser("branches", help="list (or delete) the branches a batch created")
    br.add_argument("dir", type=Path, metavar="DIR", help="the batch's report directory")
    br.add_argument("--repo", type=Path, required=True, help="the repository the runs used")
    br.add_argument(
        "--delete",
        action="store_true",
        help="delete the branches this batch made: named with its batch id, "
        "still at the runner's commit and checked out nowhere; every "
        "branch kept is listed with the reason",
    )
    br.add_argument(
        "--batch-id",
        "--run-id",
        dest="batch_id",
        action="append",
        default=[],
        metavar="ID",
        help="with --delete, delete only the branches of this batch id (repeat it; "
        "--run-id is its older name); "
        "required for a report that holds several ids (a merged report's shards)",
    )
    cmp = rep_sub.add_parser("compare", help="compare two report directories (A/B)")
    cmp.add_argument("base", type=Path, metavar="BASE", help="the baseline report directory")
    cmp.add_argument("new", type=Path, metavar="NEW", help="the candidate report directory")
    cmp.add_argument("--base-variant", metavar="NAME", help="only BASE's runs of this variant")
    cmp.add_argument("--new-variant", metavar="NAME", help="only NEW's runs of this variant")
    cmp.add_argument(
        "--base-model", metavar="PROVIDER/MODEL", help="only BASE's runs of this model"
    )
    cmp.add_argument("--new-model", metavar="PROVIDER/MODEL", help="only NEW's runs of this model")
    cmp.add_argument(
        "--allow-different-tasks",
        action="store_true",
        help="when BASE and NEW ran different task ids, compare the common ones only "
        "(default: refuse, exit 2)",
    )
    cmp.add_argument("--format", choices=["markdown", "json"], default="markdown")
    cmp.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="significance level of every test (default 0.05)",
    )
    cmp.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 on a significant drop in pass rate or mean reward overall or "
        "for a model/variant; else exit 3 when the comparison is inconclusive "
        "(BASE or NEW partial, a model/variant with no finished run on one side, "
        "or rewards with fewer than 6 tasks graded on both sides); else 0",
    )
    add_commands(sub)
    return p


def _pin_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--date",
        metavar="YYYY-MM-DD",
        help="the day <environment_context> tells the model, for every task "
        "(default: the task file's current_date, else today)",
    )
    p.add_argument(
        "--timezone",
        metavar="ZONE",
        help="the IANA zone <environment_context> tells the model, for every "
        "task (default: the task file's timezone, else this machine's)",
    )


class _VersionAction(argparse.Action):
    """`--version`. The number lives in `runner.__version__` alone (pyproject reads it
    from there), so the command and the package cannot disagree."""

    def __init__(self, option_strings: list[str], dest: str, **_: object) -> None:
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from runner import __version__

        print(f"runner {__version__} (Python {sys.version.split()[0]})")
        raise SystemExit(EXIT_OK)


def main(argv: list[str] | None = None) -> int:
    # httpx loads its own command-line tool (`httpx._main`, which imports rich and click)
    # as soon as those are installed, and rich is (for our progress display): about 80 ms
    # of every start, for a module the runner never uses. A None entry makes that import
    # fail the way httpx expects when they are missing. Here, in the command's entry point
    # only, and only before httpx is loaded: importing `runner` as a library changes
    # nothing for the program that does.
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    # Pydantic's plugin discovery scans every installed distribution (~25 ms of a ~300 ms
    # start); the runner uses no plugins. The agent's commands get the caller's value back.
    if "PYDANTIC_DISABLE_PLUGINS" not in os.environ:
        os.environ["PYDANTIC_DISABLE_PLUGINS"] = "__all__"
        os.environ["RUNNER_UNSET_PYDANTIC_DISABLE_PLUGINS"] = "1"
        # With every plugin off, pydantic's loader only answers "none"; its module still
        # imports importlib.metadata (and the email package with it) at the first model
        # class: 15 M instructions, 1% of a start. Its one function, answering the same.
        if "pydantic" not in sys.modules:
            sys.modules.setdefault("pydantic.plugin._loader", _no_plugins())
    args = build_parser().parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args)
        if args.command in ("suite", "images"):
            return run_command(args, main)
        if args.command == "report" and args.report_command == "branches":
            return report_branches(args)
        if args.command == "report" and args.report_command == "compare":
            return report_compare(args)
        if args.command == "report":
            return report_merge(args)
        return _run(args)
    except ConfigError as exc:
        for problem in exc.problems:
            warn(f"error: {problem}", one_line=True)
        _failed_thread(args, "; ".join(str(p) for p in exc.problems))
        return EXIT_BAD_INPUT
    except RunnerError as exc:
        warn(f"runner: {exc}")
        _failed_thread(args, str(exc))
        return EXIT_RUNNER
    except KeyboardInterrupt:
        warn("runner: interrupted")
        return EXIT_INTERRUPTED
    finally:
        flush_quietly()


def _no_plugins() -> types.ModuleType:
    """Stands in for pydantic's plugin loader: `get_plugins()` gives no plugin, as the
    real one does when PYDANTIC_DISABLE_PLUGINS is `__all__`."""
    module = types.ModuleType("pydantic.plugin._loader")
    module.get_plugins = tuple  # type: ignore[attr-defined]
    return module


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The imports and the config pass make objects that live as long as the batch: a
    cyclic collection among them frees nothing and cost about 7% of the time to the
    first request. Paused for them, then frozen out of later collections (else the first
    one scans them all, 18 ms), once per process; set back as it was (tests call `main`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
        if was:
            gc.enable()


def _failed_thread(args: argparse.Namespace, message: str) -> None:
    """Under `--json`, a batch that could not start (bad task file, missing key) still
    prints one thread that fails, as `codex exec --json` does for a start-up error: a
    consumer waiting for `turn.completed` or `turn.failed` never reads a bare EOF."""
    if args.command != "run" or not (args.json or args.json_extra):
        return
    from runner.reports.events import dumps, failed_thread

    for event in failed_thread(message):
        say(dumps(event))
    sys.stdout.flush()


def _config(args: argparse.Namespace, **kw: Any) -> Loaded:
    """The one config pass (`config.load`) with this command's flags."""
    from runner.config import load

    return load(
        args.tasks,
        models=args.model,
        sandbox=args.sandbox,
        current_date=args.date,
        timezone=args.timezone,
        reasoning_effort=getattr(args, "reasoning_effort", None),
        agent=args.agent,
        only=args.only,
        tags=args.tag,
        shard=args.shard,
        **kw,
    )


def _load(args: argparse.Namespace, **kw: Any) -> tuple[Loaded, BatchPlan]:
    """The config pass and the batch's identity from what it selected."""
    from runner.batch import BatchPlan
    from runner.config import source_sha256

    loaded = _config(args, **kw)
    chosen = loaded.selection
    plan = BatchPlan(
        tuple(t.fingerprint for t in chosen.selected),
        source_sha256(loaded.task_file),
        chosen.shard,
        chosen.shards,
        chosen.not_selected,
        loaded.bases,
    )
    return loaded, plan


def _validate(args: argparse.Namespace) -> int:
    # The config pass alone: the batch's identity (runner.batch, and through it the run
    # machinery and the report model) is not needed to check a file.
    loaded = _config(args, offline=args.offline)
    for t in loaded.runs:
        say(f"{t.name}: {t.label}, {len(t.turns) + 1} turn(s), {_starts_from(t)}", one_line=True)
    for note in loaded.notes:
        say(note, one_line=True)
    ids = {t.id for t in loaded.runs}
    say(f"{loaded.file}: ok, {len(ids)} task(s), {len(loaded.runs)} run(s)", one_line=True)
    return EXIT_OK


def _starts_from(t: Run) -> str:
    """What the run's work starts from: the repo copied in, or for a suite's task (nothing
    copied) its image or build folder and the workdir the agent starts in."""
    if t.suite is None:
        return f"repo {t.repo}"
    env = t.environment
    where = f"image {env.image}" if env.image is not None else f"build {env.build}"
    return f"{where}, workdir {env.workdir} (nothing copied in)"


def _print_answers(answers: list[str]) -> None:
    """The final answers on stdout, through the one printing rule: a model's text could
    hold workflow commands (`::add-mask::`, `::set-output`), and a log may reach GitHub
    Actions without `GITHUB_ACTIONS` set (a container step)."""
    for answer in answers:
        say(answer)


def _run(args: argparse.Namespace) -> int:
    if args.retry_errored and not args.resume:
        raise flag_problem(
            "--retry-errored", "goes with --resume (it reruns a batch's errored runs)"
        )
    if args.max_environments is not None and args.max_environments < 1:
        raise flag_problem("--max-environments", "must be at least 1")
    with _gc_paused():
        import anyio

        from runner.batch import run_batch
        from runner.config.secrets import secret_names
        from runner.journal import retry_hint
        from runner.progress import CommandLineEvents, SafeStream, make_progress
        from runner.reports.events import JsonStream
        from runner.secret_env import hide_own, read_secret_fd

        secrets = read_secret_fd(args.secret_fd) if args.secret_fd is not None else {}
        env = {**os.environ, **secrets}
        loaded, plan = _load(
            args, env=env, concurrency=args.concurrency, secret_vars=frozenset(secrets)
        )
    runs = loaded.runs
    # From here on the secrets live in `env` alone: not in what children inherit, nor in
    # what /proc shows of this process (danger-full-access commands look there).
    hide_own(sorted(secret_names(env, runs, frozenset(secrets))))
    out: Path = args.out
    # Nothing written to stdout or stderr may stop the batch (a closed pipe: `--json |
    # head -1`, `2>&1 | head -1`): the reports, branches and exit code come first.
    json_out = SafeStream(sys.stdout).as_io() if args.json or args.json_extra else None
    err = SafeStream(sys.stderr).as_io()
    stream = JsonStream(json_out, extra=args.json_extra) if json_out is not None else None
    events = CommandLineEvents(make_progress(err), err, stream)
    result = anyio.run(
        lambda: run_batch(
            runs,
            out_dir=out,
            concurrency=args.concurrency,
            resume=args.resume,
            budget=loaded.task_file.budget,
            plan=plan,
            env=env,
            secret_vars=frozenset(secrets),
            events=events,
            force=args.force,
            retry_errored=args.retry_errored,
            max_environments=args.max_environments or loaded.task_file.max_environments,
        )
    )
    if json_out is None:
        # From the report entries: redacted, and only runs of this session answer.
        _print_answers(
            [
                f"--- {run.report.run}\n{run.report.final_message}"
                for run in result.runs
                if run.record is not None
                and run.record.outcome is not None
                and run.report.final_message
            ]
        )
    say(f"report: {result.report_path}", stream=err, one_line=True)
    not_started = sum(r.status is RunStatus.SKIPPED for r in result.runs)
    stopped = sum(r.status is RunStatus.INTERRUPTED for r in result.runs)
    if not_started or stopped:
        say(
            f"runner: {not_started} run(s) never started, {stopped} stopped; "
            f"finish the batch with: {_again(args)} --resume (finished runs are kept)",
            stream=err,
            one_line=True,
        )
    if hint := retry_hint([r.status for r in result.runs], _again(args)):
        say(hint, stream=err, one_line=True)
    if os.environ.get("RUNNER_DEBUG"):
        say(f"exit code {result.exit_code}", stream=err)
    return result.exit_code


def _again(args: argparse.Namespace) -> str:
    """`runner run` with this batch's task file, out dir and every flag that selects or
    pins its runs: the hint to finish or retry it works when copied as it is."""
    import shlex

    words = ["runner", "run", str(args.tasks), "--out", str(args.out)]
    selecting = ("model", "only", "tag", "shard", "sandbox", "reasoning_effort")
    for flag in (*selecting, "date", "timezone"):
        values = getattr(args, flag)
        for value in values if isinstance(values, list) else [values]:
            if value is not None:
                words += [f"--{flag.replace('_', '-')}", value]
    return shlex.join(words)
