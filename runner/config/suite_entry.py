"""The task file's `suites:` entries: a benchmark suite read as it is, its tasks made into
ordinary runs (issue 27). Only what one value can be checked for is checked here; reading
the suite's own files is the config pass's (`suite_runs.py`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from runner.config.base import Frozen, PathText, StrictFloat, StrictInt
from runner.config.schema import ID_RE, Settings
from runner.vocabulary import AgentKind

VARIABLE_RE = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A name `${VAR}` may use in a suite's files."""


class SuiteSelect(Frozen):
    """Which of the suite's tasks run; unset: all. `ids`, `globs` and `tags` keep a task
    that any of them names; `count` then draws that many, the same ones on every machine
    for one `seed`."""

    ids: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    globs: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    """fnmatch patterns over task ids, e.g. `django__*`."""
    tags: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    count: Annotated[StrictInt, Field(ge=1, le=1_000_000)] | None = None
    seed: StrictInt = 0
    """For `count`: the draw is a function of the seed and the sorted ids alone."""

    @model_validator(mode="before")
    @classmethod
    def _selects_something(cls, data: Any) -> Any:
        """An empty list or mapping (a template that found nothing) would select the
        whole suite; a name written twice is a slip. Both refused, as an id that matches
        nothing is."""
        if isinstance(data, dict):
            if not data:
                raise ValueError(
                    "selects nothing: give ids, globs, tags or count, or leave select out "
                    "to run every task"
                )
            for name in ("ids", "globs", "tags"):
                values = data.get(name)
                if isinstance(values, list | tuple) and not values:
                    raise ValueError(f"{name}: an empty list would select every task")
                if isinstance(values, list | tuple):
                    twice = sorted({str(v) for v in values if values.count(v) > 1})
                    if twice:
                        raise ValueError(f"{name}: {', '.join(twice)} written twice")
        return data


class SuiteEntry(Settings):
    """One suite: its tasks run as tasks written here would, with the settings this entry
    writes (model, limits, environment overrides such as backend or cpus, ...) over
    `defaults`; the suite supplies each task's prompt, image and timeouts."""

    format: Literal["harbor", "terminal-bench", "swe-bench"]
    path: PathText
    """The suite's folder (harbor, terminal-bench), or instances file (swe-bench),
    relative to the task file."""
    select: SuiteSelect = Field(default_factory=SuiteSelect.model_construct)
    """Unset: every task (an empty `select: {}` is refused, as a slip)."""
    agent: AgentKind = "model"
    id_prefix: Annotated[str, Field(pattern=ID_RE)] | None = None
    """Put before each task id, when two suites share ids: `p` gives `p.<id>`; a prefix
    ending in '.', '_' or '-' is put as it is (`oracle-` gives `oracle-<id>`)."""
    prompt_template: str | None = None
    """swe-bench: the prompt, with `{problem_statement}` and the instance's other fields."""
    image_template: str | None = None
    """swe-bench: the image name, with `{image_id}`, `{instance_id}`, `{repo}`, `{version}`
    (default: the official `sweb.eval` naming)."""
    verifier_timeout_s: Annotated[StrictFloat, Field(ge=1, le=24 * 3600)] | None = None
    """swe-bench: the grading's time (the official harness's `--timeout`; default 1800 s).
    Harbor and Terminal-Bench tasks set their own in their files."""
    variables: dict[Annotated[str, Field(pattern=VARIABLE_RE)], str] = {}
    """harbor, terminal-bench: values for `${VAR}` and `${VAR:-default}` in the tasks'
    `env` tables and compose files (never the host's environment)."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if v is not None}
        return data

    @model_validator(mode="after")
    def _format_fields(self) -> SuiteEntry:
        swe_only = [
            n
            for n in ("prompt_template", "image_template", "verifier_timeout_s")
            if getattr(self, n) is not None
        ]
        if self.format != "swe-bench" and swe_only:
            raise ValueError(f"{swe_only[0]} is for format swe-bench, not {self.format}")
        if self.format == "swe-bench" and self.variables:
            raise ValueError("variables are for formats harbor and terminal-bench")
        if "check" in self.model_fields_set:
            raise ValueError("a suite's tasks are graded by their own verifier: remove `check`")
        return self
