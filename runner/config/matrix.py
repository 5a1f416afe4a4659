"""The runs of a task file (task x model x variant x repeat), their names, and where each
run's values were chosen. Every run is built once, complete: nothing is copied later."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from runner.config.envcheck import BuildDirs, environment_problems
from runner.config.environment import EnvironmentSettings
from runner.config.resolve import Resolver, check_path, first_set, merged_layers
from runner.config.resolved import Origin, Run, fingerprint
from runner.config.schema import (
    COMMAND_LINE,
    GitSettings,
    Limits,
    ModelOptions,
    Settings,
    Variant,
    written,
)
from runner.config.taskfile import TaskFile
from runner.config.text import Path_, dotted, line_for
from runner.errors import ConfigError, Problem
from runner.vocabulary import AgentKind, ReasoningEffort, SandboxMode, model_label

if TYPE_CHECKING:
    from runner.config.suite_runs import Bound

__all__ = ["expand", "fingerprint", "resolve"]

_NESTED: dict[str, type[BaseModel]] = {
    "limits": Limits,
    "model_options": ModelOptions,
    "git": GitSettings,
    "environment": EnvironmentSettings,
}
_VARIANT_FIELDS = {
    "instructions_file": "instructions_file",
    "developer_instructions": "developer_instructions",
    "tools": "tools",
    "prompt": "prompt_template",
    "model_options.reasoning_effort": "reasoning_effort",
}
_FLAGS = {
    "sandbox": "--sandbox",
    "current_date": "--date",
    "timezone": "--timezone",
    "model_options.reasoning_effort": "--reasoning-effort",
}


def _paths() -> list[str]:
    """Every field path a run remembers the origin of."""
    out = ["", "repo", "prompt", "turns", "tags", "id"]
    for name in Settings.model_fields:
        out.append(name)
        if name in _NESTED:
            out += [f"{name}.{sub}" for sub in _NESTED[name].model_fields]
    return out


_PATHS = _paths()


class _Origins:
    """Finds where a run's values were chosen, in the order they win: a flag, the variant,
    the task, its `models:` entry (model options), `defaults`, else the task itself."""

    def __init__(self, tf: TaskFile, file: str) -> None:
        self.tf, self.file, self.lines = tf, file, tf._lines.lines

    def here(self, path: Path_, exact: bool = True) -> Origin | None:
        line = self.lines.get(path) if exact else line_for(path, self.lines)
        return None if line is None else Origin(file=self.file, line=line, field=dotted(path))

    def of_run(
        self,
        i: int,
        model: str,
        model_at: Origin,
        j: int | None,
        flags: set[str],
    ) -> dict[str, Origin]:
        task: Path_ = ("tasks", i)
        own = self.here(task, exact=False) or Origin(file=self.file, line=None, field=dotted(task))
        out: dict[str, Origin] = {"": own, "model": model_at}
        for key in _PATHS[1:]:
            if key == "model":
                continue
            if key in flags:
                out[key] = Origin(file=COMMAND_LINE, line=None, field=_FLAGS[key])
                continue
            parts = tuple(key.split("."))
            found: Origin | None = None
            if j is not None:
                vkey = _VARIANT_FIELDS.get(key) or (
                    key if key.startswith(("model_options.", "environment.")) else None
                )
                if vkey is not None:
                    found = self.here(("matrix", "variant", j, *vkey.split(".")))
            candidates: list[Path_] = [(*task, *parts)]
            if parts[0] == "model_options":
                candidates.append(("models", model, *parts))
            candidates.append(("defaults", *parts))
            for cand in candidates:
                if found is None and (found := self.here(cand)) is not None:
                    out.update(self.below(cand, key))
            out[key] = found or Origin(file=self.file, line=own.line, field=dotted((*task, *parts)))
        return out

    def below(self, path: Path_, key: str) -> dict[str, Origin]:
        """Origins of the entries inside a mapping or list value (`mcp_servers.calc.env_vars.1`),
        so a problem with one entry names its own line."""
        n = len(path)
        return {
            ".".join([key, *map(str, sub[n:])]): Origin(
                file=self.file, line=line, field=dotted(sub)
            )
            for sub, line in self.lines.items()
            if len(sub) > n and sub[:n] == path
        }


def expand(
    tf: TaskFile,
    base_dir: Path,
    *,
    file: str = "",
    models: Sequence[str] = (),
    sandbox: SandboxMode | None = None,
    current_date: str | None = None,
    timezone: str | None = None,
    reasoning_effort: ReasoningEffort | None = None,
    suites: Mapping[str, Bound] | None = None,
) -> list[Run]:
    """The runs of a task file: each task × model (`--model` flags, else `matrix.model`,
    else the task's own) × variant × repeat, named so that no two runs share files or
    branches. `sandbox` (`--sandbox`), `current_date` (`--date`) and `timezone`
    (`--timezone`) replace every task's own, e.g. read-only on PRs; `reasoning_effort`
    (`--reasoning-effort`) every run's effort. `suites`: the tasks `suites:` made, by id
    (`suite_runs.with_suites`); an oracle or nop task runs once, not once per model, and is
    named as `agent/oracle` or `agent/nop` (no model works on it). Each user file is read
    once."""
    from_flags = bool(models)
    chosen: list[str | None] = list(models) or list(tf.matrix.model if tf.matrix else ())
    from_matrix = bool(chosen) and not from_flags
    chosen = chosen or [None]
    repeat = tf.matrix.repeat if tf.matrix else 1
    variants: tuple[Variant | None, ...] = (tf.matrix.variant if tf.matrix else ()) or (None,)
    r = Resolver(tf, base_dir, file)
    per_model: list[list[dict[str, Any]]] = []
    for m in chosen:
        r.use_model(m)
        per_model.append([x for i, t in enumerate(tf.tasks) if (x := r.task(i, t)) is not None])
    variant_texts = _variant_texts(r, variants)
    if r.problems:
        raise ConfigError(r.problems)
    where = _Origins(tf, file)
    flags = {
        k
        for k, v in (
            ("sandbox", sandbox),
            ("current_date", current_date),
            ("timezone", timezone),
            ("model_options.reasoning_effort", reasoning_effort),
        )
        if v is not None
    }
    runs: list[Run] = []
    env_problems: list[Problem] = []
    build_dirs = BuildDirs()
    for i in range(len(tf.tasks)):
        for mi, (m, tasks) in enumerate(zip(chosen, per_model, strict=True)):
            base = tasks[i]
            bound = (suites or {}).get(base["id"])
            agent: AgentKind = "model" if bound is None else bound.agent
            if agent != "model" and mi > 0:
                continue  # no model works on it: one run, not one per model
            model = f"{base['provider_name']}/{base['model']}"
            if from_flags:
                model_at = Origin(file=COMMAND_LINE, line=None, field="--model")
            elif from_matrix:
                model_at = where.here(("matrix", "model", mi), exact=False) or Origin(
                    file=file, line=None, field=f"matrix.model[{mi}]"
                )
            else:
                spec = tf.tasks[i]
                path: Path_ = (
                    ("tasks", i, "model") if written(spec, "model") else ("defaults", "model")
                )
                task_at = where.here(("tasks", i), exact=False)
                model_at = where.here(path) or Origin(
                    file=file,
                    line=task_at.line if task_at else None,
                    field=dotted(("tasks", i, "model")),
                )
            for j, v in enumerate(variants):
                values = dict(base)
                if v is not None:
                    values.update(_variant_values(values, v, variant_texts.get(j)))
                opts: ModelOptions = values["model_options"]
                if reasoning_effort is not None:
                    opts = merged_layers(
                        ModelOptions, opts, ModelOptions(reasoning_effort=reasoning_effort)
                    )
                origins = where.of_run(i, m or model, model_at, None if v is None else j, flags)
                if mi == 0:  # the same for every model: said once
                    env_problems += environment_problems(values["environment"], origins)
                build_dir = build_dirs.get(base_dir, values["environment"].build, origins)
                for rep in range(1, repeat + 1):
                    own = {
                        **values,
                        "model_options": opts,
                        "name": _run_name(
                            base["id"],
                            model_label(model, agent),
                            v,
                            rep,
                            several_models=len(chosen) > 1,
                            repeats=repeat > 1,
                        ),
                        "repeat": rep,
                        "variant": None if v is None else v.name,
                        "sandbox": sandbox or values["sandbox"],
                        "current_date": current_date or values["current_date"],
                        "timezone": timezone or values["timezone"],
                        "origins": origins,
                        "build_dir": build_dir,
                        "suite": None if bound is None else bound.task,
                        "agent": agent,
                    }
                    # Every value is already the type its field takes (the task file's
                    # models validated them), so the run is not validated again: that
                    # built Run's validator, ~7 ms of every start (tests/config/
                    # test_matrix.py holds the two to the same runs). Each run gets its
                    # own dicts, as validation gave it: none is shared with a sibling run.
                    fresh: dict[str, Any] = {
                        k: dict(x) if isinstance(x, dict) else x for k, x in own.items()
                    }
                    runs.append(Run.model_construct(**fresh))
    found = list(dict.fromkeys([*env_problems, *build_dirs.problems]))
    if found:
        raise ConfigError(found)
    return runs


def resolve(
    tf: TaskFile, base_dir: Path, *, file: str = "", model_override: str | None = None
) -> list[Run]:
    """One run per task, on `model_override` or the task's model, without the matrix's
    variants and repeats."""
    plain = tf.model_copy(update={"matrix": None})  # keeps the line map
    return expand(plain, base_dir, file=file, models=[model_override] if model_override else ())


def _variant_texts(r: Resolver, variants: tuple[Variant | None, ...]) -> dict[int, Any]:
    """Each variant's instructions file, checked and read once."""
    found: dict[int, Any] = {}
    for j, v in enumerate(variants):
        if v is not None and v.instructions_file is not None:
            at: Path_ = ("matrix", "variant", j, "instructions_file")
            path, wrong = check_path(r.base_dir, v.instructions_file, want_dir=False)
            if wrong is not None:
                r.problem(at, wrong)
            found[j] = (path, r.text(at, path))
    return found


def _variant_values(values: dict[str, Any], v: Variant, text: Any) -> dict[str, Any]:
    opts = merged_layers(ModelOptions, values["model_options"], v.model_options)
    if v.reasoning_effort is not None:
        opts = merged_layers(ModelOptions, opts, ModelOptions(reasoning_effort=v.reasoning_effort))
    out: dict[str, Any] = {
        "prompt": v.prompt_template.replace("{prompt}", values["prompt"])
        if v.prompt_template
        else values["prompt"],
        "developer_instructions": first_set(
            v.developer_instructions, values["developer_instructions"]
        ),
        "tools": v.tools if written(v, "tools") else values["tools"],
        "model_options": opts,
        "environment": merged_layers(EnvironmentSettings, values["environment"], v.environment),
    }
    if text is not None and text[0] is not None:
        path, read = text
        out["instructions_file"] = path
        out["instructions"] = read.text if read else None
        out["instructions_sha256"] = read.sha256 if read else None
    return out


def _run_name(
    task_id: str, model: str, v: Variant | None, repeat: int, *, several_models: bool, repeats: bool
) -> str:
    """Task id, then what tells this run from its siblings: model, variant, repeat."""
    name = task_id
    if several_models:
        name += "." + re.sub(r"[^A-Za-z0-9._-]+", "-", model.replace("/", "-", 1))
    if v is not None:
        name += f".{v.name}"
    if repeats:
        name += f".r{repeat}"
    return name
