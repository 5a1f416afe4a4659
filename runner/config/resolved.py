"""A run as the config pass hands it over: every value final, each remembering where in
the task file (or on the command line) it was chosen, so a check that runs late still
names the file, line and field to fix without going back to the YAML."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from runner.config.base import Frozen
from runner.config.environment import EnvironmentSettings
from runner.config.schema import ProviderConfig, RunSettings
from runner.errors import Problem
from runner.models import Price
from runner.skills import Skill
from runner.suites.model import SuiteTask
from runner.vocabulary import AgentKind, model_label


class Origin(Frozen):
    """Where a value was chosen: a task-file field (file, line, dotted path) or a flag."""

    file: str
    line: int | None
    field: str

    def problem(self, message: str) -> Problem:
        return Problem(self.file, self.line, self.field, message)


class Run(RunSettings):
    """One run: a task with defaults, model, variant, repeat and command-line overrides
    applied and paths made absolute. Built once by the config pass, never copied.

    The settings a run uses as written are inherited from `RunSettings`; the fields below
    are the run's own and what the config pass made of `Sources` (same names)."""

    id: str
    name: str
    """This run's name: the task id, plus model, variant and repeat when a matrix makes
    several runs of one task. Used for file names, workspaces and the report."""
    prompt: str
    turns: tuple[str, ...]
    repo: Path
    repo_named: bool = True
    """Whether the task wrote `repo:`. A container run's changes become a branch only
    then; without it `repo` is the task file's folder and is not used."""
    build_dir: Path | None = None
    """`environment.build` made absolute and checked (a folder with a Dockerfile)."""
    provider_name: str
    provider: ProviderConfig
    model: str
    api_model: str
    """The model name sent to the server (`model` is the task file's name, maybe an
    alias from `models:`)."""
    instructions_file: Path | None
    instructions: str | None
    """The trimmed text of `instructions_file`, read once by the config pass; None: the
    bundled instructions."""
    instructions_sha256: str | None
    writable_roots: tuple[Path, ...]
    repeat: int
    secrets: tuple[str, ...]
    """The task file's `secrets:` (names of environment variables)."""
    variant: str | None
    tags: tuple[str, ...]
    context_window: int | None
    compact_prompt_file: Path | None
    compact_prompt: str | None
    """The text of `compact_prompt_file`; None: the bundled hand-off request."""
    compact_prompt_sha256: str | None
    price: Price | None
    """None when the price is unknown: cost is then reported as null."""
    skills: tuple[Skill, ...]
    output_schema: dict[str, Any] | None
    origins: dict[str, Origin]
    """Dotted field path -> where its value was chosen; "" is the task itself."""
    suite: SuiteTask | None = None
    """The benchmark task this run came from (`suites:`): its verifier grades the run."""
    agent: AgentKind = "model"
    """`oracle` or `nop` (suite runs only): no model is called."""

    def at(self, *path: str | int) -> Origin:
        """Where the value at `path` (e.g. "limits", "max_cost_usd") was chosen: its own
        origin, else the nearest enclosing one's, else the task's."""
        parts = [str(p) for p in path]
        while parts:
            found = self.origins.get(".".join(parts))
            if found is not None:
                return found
            parts.pop()
        return self.origins[""]

    @property
    def label(self) -> str:
        """Who the run counts as: `provider/model`, or `agent/oracle` / `agent/nop` for a
        sanity run (`vocabulary.model_label`)."""
        return model_label(f"{self.provider_name}/{self.model}", self.agent)

    @functools.cached_property
    def fingerprint(self) -> str:
        """Hash of everything that defines the run except machine paths: equal on every
        machine, so `--shard` slices agree and `--resume` knows a run it has finished."""
        return fingerprint(self)


def uses_environment(t: Run) -> bool:
    """The run's commands go to a container or Pod (not this machine's sandbox)."""
    return t.environment.backend != "local"


def branch_fields(t: Run, batch_id: str) -> dict[str, str]:
    """The values a `git.branch` template may name (`{batch}`, `{name}`, ...)."""
    return {
        "batch": batch_id,
        "run": batch_id,  # the older spelling of {batch}: same value, same branches
        "task": t.id,
        "model": t.label,
        "repeat": str(t.repeat),
        "name": t.name,
        "variant": t.variant or "",
    }


_NOT_IN_FINGERPRINT = {
    "repo",
    "instructions_file",
    "instructions",
    "instructions_sha256",
    "name",
    "compact_prompt_file",
    "compact_prompt",
    "compact_prompt_sha256",
    "writable_roots",
    "skills",
    "origins",
    "repo_named",
    "build_dir",
    "suite",
    "agent",
}


_LOCAL = EnvironmentSettings().model_dump(mode="json")


def fingerprint(t: Run) -> str:
    """What makes a run this run, without machine-specific paths; instructions count by
    content, so editing them makes `--resume` redo the runs that used them."""
    data = t.model_dump(mode="json", exclude=_NOT_IN_FINGERPRINT)
    data["skills"] = [[s.name, s.description] for s in t.skills]  # not their paths
    # Hashed under the names they had before issue 29's renames, so a run keeps its
    # fingerprint (and `--resume`, `--shard` agree with batches older runners started):
    # `max_requests` was `max_turns`, and `{batch}` means what `{run}` means.
    limits, git = data.get("limits"), data.get("git")
    if isinstance(limits, dict) and "max_requests" in limits:
        limits["max_turns"] = limits.pop("max_requests")
    if isinstance(git, dict) and isinstance(git.get("branch"), str):
        git["branch"] = git["branch"].replace("{batch}", "{run}")
    for unset in ("current_date", "timezone"):  # unpinned: as before these fields existed
        if data.get(unset) is None:
            data.pop(unset, None)
    if data.get("environment") == _LOCAL:  # as before `environment:` existed
        data.pop("environment", None)
    if t.suite is not None:  # its id and format; its files count through the prompt and image
        data["suite"] = f"{t.suite.format}:{t.suite.id}"
    if t.agent != "model":
        data["agent"] = t.agent
    if t.instructions_sha256 is not None:
        data["instructions"] = t.instructions_sha256
    if t.compact_prompt_sha256 is not None:
        data["compact_prompt"] = t.compact_prompt_sha256
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
