"""The runs of a task file (task x model x variant x repeat), their names, and the
fingerprint that identifies a run on any machine (for `--shard` and `--resume`)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from pathlib import Path

from runner.config.resolve import check_path, first_set, merged_layers, resolve
from runner.config.schema import (
    ModelOptions,
    ResolvedTask,
    TaskFile,
    Variant,
)
from runner.config.text import Path_, dotted, line_for
from runner.errors import ConfigError, Problem
from runner.vocabulary import ReasoningEffort, SandboxMode


def _with_variant(t: ResolvedTask, v: Variant, instructions: Path | None) -> ResolvedTask:
    opts = merged_layers(ModelOptions, t.model_options, v.model_options)
    if v.reasoning_effort is not None:
        opts = opts.model_copy(update={"reasoning_effort": v.reasoning_effort})
    return t.model_copy(
        update={
            "variant": v.name,
            "prompt": v.prompt_template.replace("{prompt}", t.prompt)
            if v.prompt_template
            else t.prompt,
            "instructions_file": instructions or t.instructions_file,
            "developer_instructions": first_set(v.developer_instructions, t.developer_instructions),
            "tools": first_set(v.tools, t.tools) or (),
            "model_options": opts,
        }
    )


def fingerprint(t: ResolvedTask) -> str:
    """What makes a run this run, without machine-specific paths; instructions count by
    content, so editing them makes `--resume` redo the runs that used them."""
    data = t.model_dump(
        mode="json",
        exclude={
            "repo",
            "instructions_file",
            "fingerprint",
            "run",
            "compact_prompt_file",
            "compact_prompt",
            "writable_roots",
            "skills",
        },
    )
    data["skills"] = [[s.name, s.description] for s in t.skills]  # not their paths
    for unset in ("current_date", "timezone"):  # unpinned: as before these fields existed
        if data.get(unset) is None:
            data.pop(unset, None)
    if t.instructions_file is not None:
        data["instructions"] = hashlib.sha256(t.instructions_file.read_bytes()).hexdigest()
    if t.compact_prompt_file is not None:
        data["compact_prompt"] = hashlib.sha256(t.compact_prompt_file.read_bytes()).hexdigest()
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


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
) -> list[ResolvedTask]:
    """The runs of a task file: each task × model (`--model` flags, else `matrix.model`,
    else the task's own) × variant × repeat, named so that no two runs share files or
    branches. `sandbox` (`--sandbox`), `current_date` (`--date`) and `timezone`
    (`--timezone`) replace every task's own, e.g. read-only on PRs; `reasoning_effort`
    (`--reasoning-effort`) every run's effort."""
    chosen = list(models) or list(tf.matrix.model if tf.matrix else ())
    repeat = tf.matrix.repeat if tf.matrix else 1
    variants: tuple[Variant | None, ...] = (tf.matrix.variant if tf.matrix else ()) or (None,)
    if chosen:
        per_model = [resolve(tf, base_dir, file=file, model_override=m) for m in chosen]
    else:
        per_model = [resolve(tf, base_dir, file=file)]
    variant_files = _variant_files(tf, base_dir, file, variants)
    several_models = len(per_model) > 1
    runs: list[ResolvedTask] = []
    for i in range(len(tf.tasks)):
        for tasks in per_model:
            for j, v in enumerate(variants):
                t = tasks[i] if v is None else _with_variant(tasks[i], v, variant_files.get(j))
                for r in range(1, repeat + 1):
                    run = t.model_copy(
                        update={
                            "run": _run_name(
                                t, v, r, several_models=several_models, repeats=repeat > 1
                            ),
                            "repeat": r,
                            "sandbox": sandbox or t.sandbox,
                            "current_date": current_date or t.current_date,
                            "timezone": timezone or t.timezone,
                        }
                    )
                    if reasoning_effort is not None:
                        run = run.model_copy(
                            update={
                                "model_options": run.model_options.model_copy(
                                    update={"reasoning_effort": reasoning_effort}
                                )
                            }
                        )
                    runs.append(run.model_copy(update={"fingerprint": fingerprint(run)}))
    return runs


def _variant_files(
    tf: TaskFile, base_dir: Path, file: str, variants: tuple[Variant | None, ...]
) -> dict[int, Path | None]:
    problems: list[Problem] = []
    found_files: dict[int, Path | None] = {}
    for j, v in enumerate(variants):
        if v is not None and v.instructions_file is not None:
            found, wrong = check_path(base_dir, v.instructions_file, want_dir=False)
            path: Path_ = ("matrix", "variant", j, "instructions_file")
            if wrong is not None:
                problems.append(Problem(file, line_for(path, tf._lines.lines), dotted(path), wrong))
            found_files[j] = found
    if problems:
        raise ConfigError(problems)
    return found_files


def _run_name(
    t: ResolvedTask, v: Variant | None, repeat: int, *, several_models: bool, repeats: bool
) -> str:
    """Task id, then what tells this run from its siblings: model, variant, repeat."""
    name = t.id
    if several_models:
        name += "." + re.sub(r"[^A-Za-z0-9._-]+", "-", f"{t.provider_name}-{t.model}")
    if v is not None:
        name += f".{v.name}"
    if repeats:
        name += f".r{repeat}"
    return name
