"""The task file as a whole: its sections (schema.py), its tasks and its suites
(suite_entry.py), and the line map kept with it so later passes can locate problems."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BeforeValidator,
    Field,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from runner.config.base import Frozen, PathText, StrictBool, StrictInt
from runner.config.schema import (
    MODEL_RE,
    PROVIDER_NAME_RE,
    BatchLimits,
    EnvName,
    LineMap,
    Matrix,
    ModelConfig,
    ProviderConfig,
    Settings,
    TaskSpec,
    check_version,
)
from runner.config.suite_entry import SuiteEntry
from runner.config.text import Path_, line_for


class TaskFile(Frozen):
    version: Annotated[Literal[1], BeforeValidator(check_version)]
    providers: dict[Annotated[str, Field(pattern=PROVIDER_NAME_RE)], ProviderConfig] = {}
    defaults: Settings = Settings()
    matrix: Matrix | None = None
    models: dict[Annotated[str, Field(pattern=MODEL_RE)], ModelConfig] = {}
    """Context window, compaction limit and price per provider/model, over the built-in
    table."""
    budget: BatchLimits | None = None
    max_environments: Annotated[StrictInt, Field(ge=1, le=10_000)] | None = None
    """Containers or Pods alive at once, over the whole batch (default: `--concurrency`);
    `--max-environments` overrides it."""
    secrets: tuple[EnvName, ...] = ()
    """Environment variables whose values are secrets: kept from the agent's commands and
    redacted from every report, log, commit and patch. Provider keys (`env_key`) and push
    tokens (`token_env`) are secrets without being listed."""
    codex_config: StrictBool | PathText | None = None
    """Also read `[model_providers.*]` from Codex's config.toml: `true` for
    `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), or a path."""
    suites: tuple[SuiteEntry, ...] = ()
    """Benchmark suites whose tasks run as tasks written here would (issue 27)."""
    tasks: tuple[TaskSpec, ...] = ()

    _lines: LineMap = PrivateAttr(default_factory=LineMap)

    @model_validator(mode="after")
    def _something_to_run(self) -> TaskFile:
        if not self.tasks and not self.suites:
            raise ValueError("at least one task is needed (`tasks:`), or a suite (`suites:`)")
        return self

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, v: tuple[TaskSpec, ...], info: ValidationInfo) -> tuple[TaskSpec, ...]:
        if not v and not info.data.get("suites"):
            raise ValueError("at least one task is needed (`tasks:`), or a suite (`suites:`)")
        first: dict[str, int] = {}
        for i, t in enumerate(v):
            if t.id in first:
                # The context lets parse_task_file blame the second id, not the whole list.
                raise PydanticCustomError(
                    "duplicate_task_id",
                    "task id {id} is used twice; ids must be unique",
                    {"id": repr(t.id), "index": i, "first": first[t.id]},
                )
            first[t.id] = i
        return v


def source_sha256(tf: TaskFile) -> str:
    """The hash of the bytes `tf` was loaded from ("" for text parsed directly)."""
    return tf._lines.sha256


def field_line(tf: TaskFile, path: Path_, *, exact: bool = False) -> int | None:
    """The line of `path` in the file `tf` was parsed from; with `exact`, None unless that
    very field is written there (else the nearest enclosing one's line)."""
    lines = tf._lines.lines
    if exact:
        return lines.get(path)
    return line_for(path, lines)
