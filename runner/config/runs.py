"""The config pass: a task file and the command line's choices in, the runs this process
will start out, or one `ConfigError` listing every located problem. `runner validate`,
`runner run` and the public `runner.load_runs` all come through here, so what validates
runs, and nothing is checked again later."""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from runner.config import preflight
from runner.config.load import load_task_file
from runner.config.matrix import expand
from runner.config.resolved import Origin, Run
from runner.config.schema import COMMAND_LINE, pin_problems
from runner.config.select import Selection, select
from runner.config.taskfile import TaskFile, field_line
from runner.errors import ConfigError, Problem
from runner.frozen import frozen
from runner.vocabulary import AgentKind, ReasoningEffort, SandboxMode

if TYPE_CHECKING:
    from runner.config.suite_runs import Bound


@frozen
class Loaded:
    """What one pass found: the runs to start, and what the batch's identity (`selection`)
    and its limits (`task_file.budget`) are made from."""

    runs: tuple[Run, ...]
    selection: Selection
    task_file: TaskFile
    file: str
    notes: tuple[str, ...] = ()
    """What `validate` says beside the runs (a suite's tasks its `select` left unread)."""
    bases: tuple[tuple[str, str, str], ...] = ()
    """(repository, base, commit) as the checks found them (none when offline): the
    batch's resume pins take these rather than ask git again."""


def load(
    path: str | Path,
    *,
    models: Sequence[str] = (),
    sandbox: SandboxMode | None = None,
    current_date: str | None = None,
    timezone: str | None = None,
    reasoning_effort: ReasoningEffort | None = None,
    only: Sequence[str] = (),
    tags: Sequence[str] = (),
    shard: str | None = None,
    env: Mapping[str, str] | None = None,
    offline: bool = False,
    concurrency: int | None = None,
    secret_vars: Collection[str] = (),
    agent: AgentKind | None = None,
) -> Loaded:
    """Read, resolve, select and check, in that order; each stage needs the one before
    it, so a stage's problems end the pass, joined to what the flags got wrong. `env` is
    the environment the runs will see (default this process's); `offline` skips the
    checks that need this machine (see `preflight`)."""
    env = os.environ if env is None else env
    path = Path(path)
    file = str(path)
    flags = _flag_problems(models, current_date, timezone, concurrency)
    try:
        tf = load_task_file(path)
    except ConfigError as exc:
        raise ConfigError([*flags, *exc.problems]) from None
    bound: Mapping[str, Bound] = {}
    notes: tuple[str, ...] = ()
    if tf.suites or agent is not None:
        # The suite readers load only for a file that has suites (or `--agent`, which
        # says it needs them).
        from runner.config.suite_runs import with_suites

        try:
            suites = with_suites(tf, path.resolve().parent, file=file, agent=agent)
        except ConfigError as exc:
            raise ConfigError([*flags, *exc.problems]) from None
        tf, bound, notes = suites.tf, suites.bound, suites.notes
    if flags:
        raise ConfigError(flags)
    runs = expand(
        tf,
        path.resolve().parent,
        file=file,
        models=models,
        sandbox=sandbox,
        current_date=current_date,
        timezone=timezone,
        reasoning_effort=reasoning_effort,
        suites=bound,
    )
    chosen = select(runs, file=file, only=only, tags=tags, shard=shard, env=env)
    budget_at = Origin(
        file=file, line=field_line(tf, ("budget", "max_cost_usd")), field="budget.max_cost_usd"
    )
    bases: dict[tuple[str, str], str] = {}
    found = preflight.problems(
        chosen.runs,
        env=env,
        budget=tf.budget,
        budget_at=budget_at,
        offline=offline,
        concurrency=concurrency,
        secret_vars=secret_vars,
        bases=bases,
    )
    if found:
        raise ConfigError(found)
    known = tuple((r, b, sha) for (r, b), sha in bases.items())
    return Loaded(chosen.runs, chosen, tf, file, notes, known)


def load_runs(
    path: str | Path,
    *,
    models: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    offline: bool = False,
) -> tuple[Run, ...]:
    """Every run of the task file at `path` (task x model x variant x repeat), each value
    resolved once and remembering where it was chosen, checked as `runner validate`
    checks them. `models` replaces the file's models as `--model` does."""
    return load(path, models=models, env=env, offline=offline).runs


def _flag_problems(
    models: Sequence[str],
    current_date: str | None,
    timezone: str | None,
    concurrency: int | None,
) -> list[Problem]:
    found = pin_problems(current_date, timezone)
    if any(not re.fullmatch(r"[^/\s]+/\S+", m) for m in models):
        found.append(
            Problem(
                COMMAND_LINE, None, "--model", "must look like provider/model, e.g. local/smollm2"
            )
        )
    if concurrency is not None and concurrency < 1:
        found.append(Problem(COMMAND_LINE, None, "--concurrency", "must be at least 1"))
    return found
