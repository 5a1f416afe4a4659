"""The task file: its schema, a YAML loader that remembers lines, the messages that
name file, line and field, and resolution into runs.

    schema.py      frozen pydantic models: what a task file may say; each setting's
                   type and default (`RunSettings`, shared by `Settings`, `Run` and,
                   for the settings a matrix variant may write, `Variant`)
    yaml_lines.py  YAML text to data plus a map from field path to line
    messages.py    pydantic's errors, said in the task file's words
    load.py        text or file to a validated `TaskFile` (pure but for reading the file)
    resolve.py     defaults applied, paths and providers checked, user files read once
    matrix.py      task x model x variant x repeat: complete runs, each value's origin
    resolved.py    `Run` (a run) and its fingerprint
    select.py      `--only`, `--tag`, `--shard`
    secrets.py     which environment variables are secrets
    preflight.py   what would fail late (names, branches, prices, keys, repos), found now
    runs.py        the one pass: file and flags in, checked runs out (`load`, `load_runs`)
    codex_config.py  Codex's config.toml providers, read as ours
    pins.py        the pinned day and zone (`current_date`, `timezone`): what is valid
    text.py        small wording helpers shared by the above

Data flows down that list; nothing here runs a model or a sandbox (preflight asks git
whether each repository's base names a commit).
"""

from runner.config.load import MAX_TASK_FILE_BYTES, load_task_file, parse_task_file
from runner.config.matrix import expand, fingerprint, resolve
from runner.config.pins import timezone_problem
from runner.config.resolve import read_text_file
from runner.config.resolved import Origin, Run, branch_fields, uses_environment
from runner.config.runs import Loaded, load, load_runs
from runner.config.schema import (
    BUILTIN_PROVIDERS,
    COMMAND_LINE,
    DEFAULT_TOOLS,
    BatchLimits,
    GitSettings,
    Limits,
    McpServerConfig,
    ModelConfig,
    ModelOptions,
    ProviderConfig,
    PushSettings,
    RunSettings,
    Settings,
    Sources,
    TaskSpec,
    Variant,
    pin_problems,
    written,
)
from runner.config.select import Selection, parse_shard, select
from runner.config.taskfile import TaskFile, field_line, source_sha256
from runner.config.text import dotted
from runner.vocabulary import ReasoningEffort, SandboxMode

__all__ = [
    "BUILTIN_PROVIDERS",
    "COMMAND_LINE",
    "DEFAULT_TOOLS",
    "MAX_TASK_FILE_BYTES",
    "BatchLimits",
    "GitSettings",
    "Limits",
    "Loaded",
    "McpServerConfig",
    "ModelConfig",
    "ModelOptions",
    "Origin",
    "ProviderConfig",
    "PushSettings",
    "ReasoningEffort",
    "Run",
    "RunSettings",
    "SandboxMode",
    "Selection",
    "Settings",
    "Sources",
    "TaskFile",
    "TaskSpec",
    "Variant",
    "branch_fields",
    "dotted",
    "expand",
    "field_line",
    "load",
    "load_runs",
    "fingerprint",
    "load_task_file",
    "parse_shard",
    "parse_task_file",
    "read_text_file",
    "pin_problems",
    "resolve",
    "select",
    "source_sha256",
    "timezone_problem",
    "uses_environment",
    "written",
]
