"""The commands of benchmark suites and their images (issue 27), apart from cli.py:
`runner suite check PATH` and `runner images prune`, and the `--agent` flag of `run` and
`validate`.

`suite check` is a batch like any other (the same config pass, containers, verifier and
report), run through `runner run` on a task file written for it: every task of the suite
once with `agent: oracle` and once with `agent: nop`. A task whose oracle does not score 1
or whose nop does not score 0 is listed: its grading is broken, or its solution is.

The task file (`check.yaml`) and, unless `--out` names one, the out dir are in a temp dir
kept unless every task scored as it should: the hints `runner run` prints (`--resume
--retry-errored`) name both, and must work when copied. (An out dir may not hold the task
file its batch reads, so the two are side by side.)"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from runner.cli_common import say, warn
from runner.errors import ConfigError
from runner.vocabulary import (
    AGENT_KINDS,
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RUNNER,
    EXIT_TASK_FAILED,
    SANITY_PROVIDER,
)

FORMATS = ("harbor", "terminal-bench", "swe-bench")


def add_agent_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent",
        choices=AGENT_KINDS,
        help="who does the work of every suite task: the model (default), `oracle` (the "
        "task's own solution) or `nop` (nothing); no model is called for the last two",
    )


def add_commands(sub: Any) -> None:
    suite = sub.add_parser("suite", help="work with benchmark suites")
    suite_sub = suite.add_subparsers(dest="suite_command", required=True)
    check = suite_sub.add_parser(
        "check",
        help="run oracle and nop on every task of a suite; list the tasks where oracle does "
        "not score 1 or nop does not score 0",
    )
    check.add_argument("path", type=Path, help="the suite's folder, or SWE-bench instances file")
    check.add_argument("--format", choices=FORMATS, help="default: guessed from the path")
    check.add_argument(
        "--out",
        type=Path,
        help="keep the batch's report here (default: a temp dir, removed when every task "
        "scores as it should)",
    )
    check.add_argument("--backend", choices=("podman", "docker"), default="podman")
    check.add_argument(
        "--build",
        type=Path,
        metavar="DIR",
        help="swe-bench: build every instance's image from this folder's Dockerfile",
    )
    check.add_argument("--concurrency", type=int, default=2, help="runs at once (default 2)")
    images = sub.add_parser("images", help="work with the images runner built")
    images_sub = images.add_subparsers(dest="images_command", required=True)
    prune = images_sub.add_parser(
        "prune",
        help="remove the images runner built for you on this host (by their labels), but "
        "not one a running batch uses or will use, nor the base image",
    )
    prune.add_argument("--engine", default="podman", help="podman (default) or docker")
    prune.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would go and what stays, and why; remove nothing",
    )


def run_command(args: argparse.Namespace, main: Callable[[list[str]], int]) -> int:
    """`main`: the CLI's own entry point, which `suite check` runs its batch through."""
    if args.command == "images":
        return _prune(args)
    return _check(args, main)


def guess_format(path: Path) -> str | None:
    if path.is_file():
        return "swe-bench"
    if (path / "task.toml").is_file() or any(path.glob("*/task.toml")):
        return "harbor"
    if (path / "task.yaml").is_file() or any(path.glob("*/task.yaml")):
        return "terminal-bench"
    return None


def check_file(
    path: Path,
    fmt: str,
    backend: str,
    build: Path | None = None,
    ids: dict[str, list[str]] | None = None,
) -> str:
    """The task file of a check: the suite twice, once per sanity agent. The runs are
    labelled `agent/oracle` and `agent/nop` as any sanity run is; the model the file names
    (the config pass resolves one for every task) is never called. `ids`: per agent, the
    tasks it runs (default: all); an agent with none is left out."""
    env = f"backend: {backend}" + (f", build: {json.dumps(str(build.resolve()))}" if build else "")
    entries = "".join(
        f"  - format: {fmt}\n"
        f"    path: {json.dumps(str(path.resolve()))}\n"
        f"    agent: {agent}\n"
        f"    id_prefix: {agent}\n"
        f"    environment: {{{env}}}\n"
        + (f"    select: {{ids: {json.dumps(ids[agent])}}}\n" if ids is not None else "")
        for agent in ("oracle", "nop")
        if ids is None or ids[agent]
    )
    return (
        "version: 1\n"
        f"providers: {{{SANITY_PROVIDER}: {{base_url: 'http://127.0.0.1:9/v1', auth: none}}}}\n"
        f"defaults: {{model: {SANITY_PROVIDER}/none}}\n"
        f"suites:\n{entries}"
    )


def unreadable_tasks(path: Path, fmt: str) -> tuple[dict[str, list[str]], list[str]]:
    """Every task of the suite read as a batch would read it: (per sanity agent, the ids
    it can run; one line per task, or agent, that cannot run and why, located). A task
    that cannot be read is listed, not a reason to check none; a path that is no suite
    at all is a ConfigError (exit 2)."""
    from runner.suites.model import SuiteFormat
    from runner.suites.read import list_suite

    listing = list_suite(cast(SuiteFormat, fmt), path.resolve())
    ids: dict[str, list[str]] = {"oracle": [], "nop": []}
    lines = [f"{p}" for p in listing.unlisted]
    for listed in listing.tasks:
        task, found = listed.read()
        lines += [f"{listed.id}: cannot be read: {p}" for p in found]
        if task is None:
            continue
        ids["nop"].append(listed.id)
        if task.solution is not None:
            ids["oracle"].append(listed.id)
        elif task.solution_problems:
            lines += [f"{listed.id}: oracle cannot run: {p}" for p in task.solution_problems]
        else:
            lines.append(f"{listed.id}: oracle cannot run: the task has no solution")
    return ids, lines


UNFINISHED = ("interrupted", "skipped")
"""Runs a signal (or the batch budget) stopped: they say nothing of the task."""


def broken_tasks(report: dict[str, Any]) -> list[str]:
    """One line per task whose oracle did not score 1 or whose nop did not score 0 (an
    error, e.g. a verifier that gave no grade, counts as not scoring). A run the user
    stopped is not listed: it was not scored at all."""
    lines: list[str] = []
    for run in report.get("runs", []):
        if run.get("status") in UNFINISHED:
            continue
        agent = str(run.get("agent", ""))
        want = 1.0 if agent == "oracle" else 0.0
        reward = run.get("reward")
        if reward == want and run.get("status") != "error":
            continue
        task = str(run.get("suite", "")).partition(":")[2]  # the suite's own id
        got = "no reward" if reward is None else f"reward {reward:g}"
        why = f": {run['error']}" if run.get("error") else ""
        lines.append(f"{task}: {agent} got {got}, wants {want:g} ({run.get('status')}){why}")
    return lines


def _check(args: argparse.Namespace, main: Callable[[list[str]], int]) -> int:
    fmt = args.format or guess_format(args.path)
    if fmt is None:
        print(
            f"error: {args.path}: not a suite runner knows (give --format)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    try:
        ids, unreadable = unreadable_tasks(args.path, fmt)
    except ConfigError as exc:
        for problem in exc.problems:
            warn(f"error: {problem}", one_line=True)
        return EXIT_BAD_INPUT
    if unreadable:
        say(f"suite check: {len(unreadable)} problem(s) keep tasks from being checked:")
        for line in unreadable:
            say(f"  {line}", one_line=True)
    if not ids["oracle"] and not ids["nop"]:
        return EXIT_TASK_FAILED
    work = Path(tempfile.mkdtemp(prefix="runner-suite-check-"))
    out = args.out or work / "out"
    task_file = work / "check.yaml"
    task_file.write_text(check_file(args.path, fmt, args.backend, args.build, ids))
    code = _check_batch(args, task_file, out, main)
    if code == EXIT_OK or not (out / "journal").is_dir():
        shutil.rmtree(work, ignore_errors=True)  # nothing to look at or to resume
    else:
        kept = "its task file" if args.out else "its task file and out dir"
        print(f"suite check: {kept} are kept in {work}")
    return EXIT_TASK_FAILED if code == EXIT_OK and unreadable else code


def _check_batch(
    args: argparse.Namespace, task_file: Path, out: Path, main: Callable[[list[str]], int]
) -> int:
    argv = ["run", str(task_file), "--out", str(out), "--concurrency", str(args.concurrency)]
    if args.out is not None:
        argv.append("--force")
    code = main(argv)
    if code == EXIT_BAD_INPUT or not (out / "report.json").is_file():
        return code if code != EXIT_OK else EXIT_RUNNER  # an errored run is listed below
    report = json.loads((out / "report.json").read_text())
    broken = broken_tasks(report)
    runs = len(report.get("runs", []))
    if code == EXIT_INTERRUPTED:
        stopped = sum(r.get("status") in UNFINISHED for r in report.get("runs", []))
        print(f"suite check: interrupted; {stopped} of {runs} runs not scored (--resume them)")
        for line in broken:
            print(f"  does not score as it should: {line}")
        return EXIT_INTERRUPTED
    if broken:
        print(f"suite check: {len(broken)} of {runs} runs do not score as they should:")
        for line in broken:
            print(f"  {line}")
        return EXIT_TASK_FAILED
    print(f"suite check: the {runs} runs score 1 with oracle and 0 with nop")
    return EXIT_OK


def _prune(args: argparse.Namespace) -> int:
    import anyio

    from runner.errors import EnvironmentFault
    from runner.sandbox.engine import Engine
    from runner.sandbox.images import prune_built

    try:
        done = anyio.run(prune_built, Engine(args.engine), args.dry_run)
    except EnvironmentFault as exc:
        print(f"runner: {exc}", file=sys.stderr)
        return EXIT_RUNNER
    verb = "would remove" if args.dry_run else "removed"
    for line in done.gone:
        print(f"{verb} {line}")
    for line in done.kept:
        print(f"kept {line}")
    print(f"{verb} {len(done.gone)} image(s) runner built; kept {len(done.kept)}")
    for why in done.refused:
        print(f"runner: not removed: {why}", file=sys.stderr)
    return EXIT_RUNNER if done.refused else EXIT_OK
