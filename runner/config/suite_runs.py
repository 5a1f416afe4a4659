"""The task file's `suites:` made into tasks: each benchmark task becomes a `TaskSpec` as
if the file had written it (its prompt the task's instruction, its `environment:` the
task's image or Dockerfile, workdir, cpus, memory, network and env, its `limits.timeout_s`
the suite's agent timeout), with the settings its `suites:` entry writes on top. From there
the matrix, variants, repeats, limits, shards, `--resume` and `validate` treat it as any
task; the run keeps its `SuiteTask` (`Run.suite`) for the verifier.

Why a rewrite of the file rather than a second kind of run: every rule the config pass
has (defaults, origins, providers, environment checks) then holds for suite runs too.
"""

from __future__ import annotations

import fnmatch
import os
import random
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.config.environment import EnvironmentSettings
from runner.config.messages import validation_problems
from runner.config.resolve import check_path, merged_layers
from runner.config.schema import COMMAND_LINE, ID_RE, Limits, LineMap, Settings, TaskSpec
from runner.config.suite_entry import SuiteEntry
from runner.config.taskfile import TaskFile
from runner.config.text import Path_, dotted
from runner.errors import ConfigError, Problem
from runner.frozen import frozen
from runner.suites.model import Listed, SuiteListing, SuiteTask
from runner.suites.read import list_suite
from runner.vocabulary import AgentKind

_NOT_AN_ID = re.compile(r"[^A-Za-z0-9._-]+")


@frozen
class Bound:
    """What a suite's task brings to its runs beyond a task's fields."""

    task: SuiteTask
    agent: AgentKind


@frozen
class WithSuites:
    tf: TaskFile
    """The file with each suite task appended to `tasks` (its lines those of its entry)."""
    bound: Mapping[str, Bound]
    """Task id -> its suite task, for the tasks that came from `suites:`."""
    notes: tuple[str, ...] = ()
    """One line per entry whose `select` left tasks of its suite unread."""


def with_suites(
    tf: TaskFile, base_dir: Path, *, file: str, agent: AgentKind | None = None
) -> WithSuites:
    """`tf` with its suites' tasks as tasks; ConfigError with every problem of every suite
    (the suites' own files located in them, the entries' fields in the task file).
    `agent` (`--agent`) replaces every entry's own."""
    problems: list[Problem] = []
    if agent is not None and not tf.suites:
        problems.append(
            Problem(COMMAND_LINE, None, "--agent", "applies to `suites:` runs; this file has none")
        )
    lines = dict(tf._lines.lines)
    ids = {t.id for t in tf.tasks}
    specs: list[TaskSpec] = []
    bound: dict[str, Bound] = {}
    notes: list[str] = []
    for s, entry in enumerate(tf.suites):
        at = _At(file, lines, ("suites", s))
        listing = _list(entry, base_dir, at, problems)
        if listing is None:
            continue
        picked = _selected(listing, entry, at, problems)
        if len(picked) < len(listing.tasks):
            notes.append(
                f"{at.where()} ({entry.path}): {len(listing.tasks) - len(picked)} of "
                f"{len(listing.tasks)} tasks not selected, so not read"
            )
        kind = agent or entry.agent
        for task in _read(picked, kind, at, problems, _timeout(entry)):
            tid = _task_id(task.id, entry.id_prefix)
            if tid in ids:
                problems.append(at.problem("path", f"task id {tid!r} is used twice; set id_prefix"))
                continue
            spec = _spec(tf, entry, task, tid, base_dir, at, problems)
            if spec is None:
                continue
            ids.add(tid)
            i = len(tf.tasks) + len(specs)
            at.lend(("tasks", i))
            specs.append(spec)
            bound[tid] = Bound(task, kind)
    if problems:
        raise ConfigError(list(dict.fromkeys(problems)))
    if not tf.suites:
        return WithSuites(tf, {})
    out = tf.model_copy(update={"tasks": (*tf.tasks, *specs)})
    out._lines = LineMap(lines, tf._lines.sha256)
    return WithSuites(out, bound, tuple(notes))


class _At:
    """A suite entry's place in the task file, and its lines lent to the tasks it makes,
    so a problem with one of them names the entry's line."""

    def __init__(self, file: str, lines: dict[Path_, int], path: Path_) -> None:
        self.file, self.lines, self.path = file, lines, path

    def line(self, *sub: str | int) -> int | None:
        here: Path_ = (*self.path, *sub)
        while here:
            if here in self.lines:
                return self.lines[here]
            here = here[:-1]
        return None

    def problem(self, field: str, message: str) -> Problem:
        """`field` below the entry, given dotted (`select.ids.0`), named as every field of
        the task file is (`suites[1].select.ids[0]`)."""
        sub = tuple(int(p) if p.isdigit() else p for p in field.split("."))
        return Problem(self.file, self.line(*sub), dotted((*self.path, *sub)), message)

    def where(self) -> str:
        return f"{self.file}:{self.line()}: {dotted(self.path)}"

    def lend(self, task: Path_) -> None:
        n = len(self.path)
        for sub, line in list(self.lines.items()):
            if sub[:n] == self.path:
                self.lines[(*task, *sub[n:])] = line


def _list(
    entry: SuiteEntry, base_dir: Path, at: _At, problems: list[Problem]
) -> SuiteListing | None:
    path, wrong = check_path(base_dir, entry.path, want_dir=entry.format != "swe-bench")
    if wrong is not None or path is None:
        problems.append(at.problem("path", wrong or "not found"))
        return None
    try:
        return list_suite(
            entry.format,
            path,
            prompt_template=entry.prompt_template,
            image_template=entry.image_template,
            variables=entry.variables,
        )
    except ConfigError as exc:
        problems.extend(exc.problems)
        return None


def _read(
    picked: list[Listed],
    agent: AgentKind,
    at: _At,
    problems: list[Problem],
    verifier_timeout_s: float | None = None,
) -> list[SuiteTask]:
    """The selected tasks read in full; each one's faults are problems (the solution's
    only for `agent: oracle`, the one agent that runs it). `verifier_timeout_s`: the
    entry's, over the suite's own (SWE-bench only)."""
    tasks = []
    for listed in picked:
        task, found = listed.read()
        problems.extend(found)
        if task is None:
            continue
        if agent == "oracle" and task.solution is None:
            why = "it has none" if not task.solution_problems else "it has none runner runs"
            problems.append(
                at.problem("agent", f"{task.id}: agent oracle needs the task's solution; {why}")
            )
            problems.extend(task.solution_problems)
            continue
        if verifier_timeout_s is not None:
            task = replace(task, verifier=replace(task.verifier, timeout_s=verifier_timeout_s))
        tasks.append(task)
    return tasks


def _selected(
    listing: SuiteListing, entry: SuiteEntry, at: _At, problems: list[Problem]
) -> list[Listed]:
    """The entry's `select`, decided on the ids and tags the suite gives, in the suite's
    order. `count` draws from the ids sorted, every id the suite names whether runner can
    read its task or not, so the draw is the same on every machine and every version of
    runner. A name, pattern or tag that picks nothing, and a count over what there is,
    are refused: most often a typo, and a batch of 2 runs where 50 were asked for is not
    what the user measures."""
    sel = entry.select
    tasks = listing.tasks
    known = {t.id for t in tasks}
    if not (sel.ids or sel.globs or sel.tags):
        problems.extend(listing.unlisted)
    for k, wanted in enumerate(sel.ids):
        if wanted not in known:
            problems.append(at.problem(f"select.ids.{k}", f"no task {wanted!r} in the suite"))
    for k, pattern in enumerate(sel.globs):
        if not any(fnmatch.fnmatchcase(t.id, pattern) for t in tasks):
            problems.append(
                at.problem(f"select.globs.{k}", f"{pattern!r} matches no task id of the suite")
            )
    named = [
        t for t in tasks if t.id in sel.ids or any(fnmatch.fnmatchcase(t.id, g) for g in sel.globs)
    ]
    by_tag = _tagged(tasks, named, entry, at, problems) if sel.tags else []
    picked = tasks
    if sel.ids or sel.globs or sel.tags:
        chosen = {t.id for t in (*named, *by_tag)}
        picked = tuple(t for t in tasks if t.id in chosen)
    if sel.count is not None and sel.count > len(picked):
        problems.append(
            at.problem(
                "select.count",
                f"asks for {sel.count} tasks, but the selection has {len(picked)}: write "
                f"count: {len(picked)} or less, or leave count out to run them all",
            )
        )
    elif sel.count is not None and sel.count < len(picked):
        drawn = set(random.Random(sel.seed).sample(sorted(t.id for t in picked), sel.count))
        picked = tuple(t for t in picked if t.id in drawn)
    return list(picked)


def _tagged(
    tasks: tuple[Listed, ...],
    named: list[Listed],
    entry: SuiteEntry,
    at: _At,
    problems: list[Problem],
) -> list[Listed]:
    """The tasks with one of `select.tags`. A task whose tags cannot be read, and that no
    id or pattern selects, is a problem: whether it is selected cannot be told."""
    wanted = set(entry.select.tags)
    seen: set[str] = set()
    out = []
    for t in tasks:
        tags, found = t.tags()
        if found and t not in named:
            problems.extend(found)
        seen |= set(tags)
        if wanted & set(tags):
            out.append(t)
    for k, tag in enumerate(entry.select.tags):
        if tag not in seen:
            problems.append(at.problem(f"select.tags.{k}", f"no task of the suite has tag {tag!r}"))
    return out


def _task_id(raw: str, prefix: str | None) -> str:
    """The suite's id as a task id (letters, digits, '.', '_', '-'; 64 at most), after
    `prefix` and a '.', or after `prefix` alone when it ends in one of '.', '_', '-'
    (`oracle-` gives `oracle-django__django-1`, not `oracle-.django__django-1`). Two
    entries that make one id are refused by the caller."""
    joined = raw
    if prefix:
        joined = prefix + ("" if prefix[-1] in "._-" else ".") + raw
    tid = _NOT_AN_ID.sub("-", joined).strip(".-_") or "task"
    return tid[:64]


def _tag(raw: str) -> str | None:
    tag = _NOT_AN_ID.sub("-", raw).strip(".-_")[:64]
    return tag if re.fullmatch(ID_RE, tag) else None


def _spec(
    tf: TaskFile,
    entry: SuiteEntry,
    task: SuiteTask,
    tid: str,
    base_dir: Path,
    at: _At,
    problems: list[Problem],
) -> TaskSpec | None:
    written = entry.model_fields_set & set(Settings.model_fields)
    own: dict[str, Any] = {name: getattr(entry, name) for name in written}
    limits: Limits = entry.limits
    try:
        if task.agent_timeout_s is not None and "timeout_s" not in entry.limits.model_fields_set:
            limits = merged_layers(Limits, entry.limits, Limits(timeout_s=task.agent_timeout_s))
        env = suite_environment(task, entry, tf.defaults.environment, base_dir)
        if env.backend == "local":
            why = "a suite's tasks run in their image: backend podman, docker or kubernetes"
            problems.append(at.problem("environment.backend", why))
            return None
        if env.backend == "kubernetes" and task.verifier.user is not None:
            why = (
                f"{task.id}: its verifier runs as user {task.verifier.user!r} "
                f"({task.source}), and kubectl exec cannot run a command as another user "
                "than the pod's: use backend podman or docker for this suite"
            )
            problems.append(at.problem("environment.backend", why))
            return None
        data = {
            **own,
            "id": tid,
            "prompt": task.instruction,
            "tags": tuple(t for t in map(_tag, task.tags) if t),
            "limits": limits,
            "environment": env,
        }
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        # The readers check what a suite writes against these models' bounds
        # (runner/suites/bounds.py) and name it in the suite's own file; this is the net
        # under them, naming the task as runner's field.
        for p in validation_problems(exc, str(task.source), {}):
            said = f"{task.id} ({task.source}): runner's {p.field}: {p.message}"
            problems.append(at.problem("path", said))
        return None


def suite_environment(
    task: SuiteTask, entry: SuiteEntry, defaults: EnvironmentSettings, base_dir: Path
) -> EnvironmentSettings:
    """The task's own environment as an `environment:` section (podman unless the entry or
    `defaults` name a container backend), the entry's section over it. The build folder
    is written relative to the task file, as a user would, so the run's fingerprint holds
    no path of this machine."""
    e = task.environment
    backend = defaults.backend if defaults.backend != "local" else "podman"
    base: dict[str, Any] = {"backend": backend, "workdir": e.workdir, "network": e.network}
    if e.build_dir is not None:
        base["build"] = os.path.relpath(e.build_dir, base_dir)
    elif e.image is not None:
        base["image"] = e.image
    if e.cpus is not None:
        base["cpus"] = float(e.cpus)
    if e.memory_mb is not None:
        base["memory_mb"] = e.memory_mb
    if e.user is not None:
        base["user"] = e.user
    if e.env:
        base["run_args"] = tuple(f"--env={k}={v}" for k, v in e.env)
    if task.build_timeout_s is not None:
        base["timeout_s"] = float(task.build_timeout_s)
    return merged_layers(
        EnvironmentSettings, EnvironmentSettings.model_validate(base), entry.environment
    )


def _timeout(entry: SuiteEntry) -> float | None:
    return None if entry.verifier_timeout_s is None else float(entry.verifier_timeout_s)
