"""The task file: frozen pydantic models and a YAML loader that remembers line numbers.

PyYAML's node tree carries a position for every key and value; we keep a map from field
path to line so every validation error can name file, line and field. Pydantic does the
validation itself; this module only translates its errors into located `Problem`s.

The text is parsed once: composed into a node tree (line map, duplicate keys, non-string
keys, alias cycles and alias bombs are checked on the tree), then constructed from that
same tree. Anything wrong with the input ends as `ConfigError`, never as a traceback.
"""

from __future__ import annotations

import bisect
import datetime
import errno
import hashlib
import json
import os
import re
import stat
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    Strict,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from runner.errors import ConfigError, Problem
from runner.models import codex_defaults
from runner.skills import Skill, SkillError, load_skills

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
ToolName = Literal["shell", "apply_patch", "update_plan"]
ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MODEL_RE = r"^[^/\s]+/\S+$"
PROVIDER_NAME_RE = r"^[A-Za-z0-9_-]+$"
COMMAND_LINE = "(command line)"

# YAML 1.1 reads yes/no/on/off as booleans and 1.0 as a float; strict fields keep those
# from passing as integers (true == 1) or flags. Floats still take integers (60 -> 60.0).
StrictInt = Annotated[int, Strict()]
StrictFloat = Annotated[float, Strict(), Field(allow_inf_nan=False)]
StrictBool = Annotated[bool, Strict()]


def _describe(value: object) -> str:
    """What a value is, in YAML words (never a Python class name)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()}; YAML reads yes/no/on/off as booleans)"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (datetime.date, datetime.datetime)):
        return "a date"
    if isinstance(value, bytes):
        return "binary data"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (set, frozenset)):
        return "a set"
    return "an unsupported value"


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty or only whitespace")
    return v


def _path_text(v: str) -> str:
    if not v:
        raise ValueError("must not be empty; leave the field out to use the default")
    return v


def _version(v: object) -> object:
    # Literal[1] alone would take `true` and `1.0`, which compare equal to 1.
    if isinstance(v, (bool, float)):
        raise ValueError(f"must be 1, got {_describe(v)}")
    return v


def _env_name(v: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
        raise ValueError("must be an environment variable name: letters, digits and '_', "
                         "not starting with a digit")
    return v


def _iso_date(v: object) -> object:
    """YAML reads an unquoted 2026-01-31 as a date: the prompt wants its ISO text. A
    timestamp, a number or text that is not a real calendar day is refused."""
    if isinstance(v, datetime.datetime):
        raise ValueError("must be a day, YYYY-MM-DD, without a time")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, str):
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            raise ValueError(f"must be a day written YYYY-MM-DD, e.g. 2026-01-31, got {v!r}")
        try:
            datetime.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"{v!r} is not a day of the calendar") from None
    return v


TIMEZONE_RE = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,3}$"
"""The shape of an IANA name (Europe/Paris, UTC, Etc/GMT+3)."""


def timezone_problem(name: str) -> str | None:
    """Why `name` is not an IANA zone, or None. Checked against the `tzdata` package's
    database as well as the system's, so a file valid on one machine is valid on all."""
    if len(name) > 64 or not re.fullmatch(TIMEZONE_RE, name):
        return f"must be an IANA zone name such as UTC or Europe/Paris, got {_esc(_short(name))!r}"
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return (f"{name!r} is not a zone of the IANA database; use a name such as UTC or "
                "Europe/Paris")
    return None


def _timezone(v: str) -> str:
    wrong = timezone_problem(v)
    if wrong is not None:
        raise ValueError(wrong)
    return v

def pin_problems(current_date: str | None, timezone: str | None) -> list[Problem]:
    """What is wrong with `--date` / `--timezone`, in the task file's words."""
    problems = []
    if current_date is not None:
        try:
            _iso_date(current_date)
        except ValueError as exc:
            problems.append(Problem(COMMAND_LINE, None, "--date", str(exc)))
    wrong = timezone_problem(timezone) if timezone is not None else None
    if wrong is not None:
        problems.append(Problem(COMMAND_LINE, None, "--timezone", wrong))
    return problems


NonBlank = Annotated[str, AfterValidator(_not_blank)]
IsoDate = Annotated[str, BeforeValidator(_iso_date)]
TimeZone = Annotated[str, AfterValidator(_timezone)]
EnvName = Annotated[str, AfterValidator(_env_name)]
PathText = Annotated[str, AfterValidator(_path_text)]


class Frozen(BaseModel):
    # The attribute docstrings below are for readers. Pydantic would read them into field
    # descriptions by re-parsing this file's source at import (~100 ms of every start), and
    # nothing uses those descriptions: no schema is generated from the task-file models.
    model_config = ConfigDict(frozen=True, extra="forbid")


class ProviderConfig(Frozen):
    """An endpoint that speaks the Responses API (or Chat Completions)."""

    base_url: str = Field(default="", pattern=r"^(https?://[^/\s?#]+\S*)?$")
    """Required for a provider of your own; a built-in one keeps its own when left out
    (an entry named like a built-in provider overrides only the fields it sets)."""
    env_key: EnvName | None = None
    """Environment variable holding the API key, sent the way `auth` says."""
    name: str | None = None
    """A display name (Codex's `name`); tasks use the key under `providers:`."""
    auth: Literal["bearer", "api-key", "none"] = "bearer"
    """How the key is sent: `Authorization: Bearer` (OpenAI and most servers), an
    `api-key` header (Azure), or not at all."""
    env_http_headers: dict[str, EnvName] = {}
    """Header -> environment variable, sent when the variable is set and not empty."""
    query_params: dict[str, str] = {}
    http_headers: dict[str, str] = {}
    wire_api: Literal["responses", "chat"] = "responses"
    store: StrictBool = False
    """Azure's Responses endpoint needs `store: true` for reasoning items to round-trip."""
    constrained_tools: StrictBool = False
    """For models that cannot call tools: force tool calls through a JSON schema (chat only)."""
    constrained_grammar: StrictBool = False
    """With `constrained_tools` on a llama.cpp server: send the answer format as a GBNF
    `grammar` of compact JSON whose every bound is sized to `max_output_tokens`, so the
    answer always closes before the cap (`response_format` cannot promise that)."""
    remote_compaction: StrictBool = False
    context_window: Annotated[StrictInt, Field(ge=256)] | None = None
    """For every model of this provider that `models:` and the built-in table do not size
    (e.g. a local server's own models)."""
    auto_compact_limit: Annotated[StrictInt, Field(ge=128)] | None = None
    """The server has `POST {base_url}/responses/compact`: compact long threads there
    (local compaction is the fallback when it fails)."""
    max_connections: Annotated[StrictInt, Field(ge=1, le=1000)] | None = None
    """Requests in flight to this provider at once, over all runs (default: no cap beyond
    `--concurrency`)."""
    request_max_retries: Annotated[StrictInt, Field(ge=0, le=100)] = 4
    """How often a request the server did not answer with 200 (network error, 5xx, 408,
    409, 429) is resent."""
    stream_max_retries: Annotated[StrictInt, Field(ge=0, le=100)] = 5
    """How often a request is resent after its stream failed (cut, stalled, incomplete,
    failed with a transient code); counted apart from `request_max_retries`."""
    max_retry_wait_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 120.0
    """A server asking for a longer wait than this fails the run at once as rate-limited."""
    stream_idle_timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 300.0
    """A stream with no event for this long is cut and the request resent."""
    request_timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 600.0
    """One attempt's whole time, first byte to `response.completed`; then it is resent."""


PLACEHOLDER_HOST = "YOUR-RESOURCE"
"""Stands in the built-in azure endpoint: a task file must name its own resource."""

BUILTIN_PROVIDERS: dict[str, ProviderConfig] = {
    "openai": ProviderConfig(base_url="https://api.openai.com/v1", env_key="OPENAI_API_KEY",
                             env_http_headers={"OpenAI-Organization": "OPENAI_ORGANIZATION",
                                               "OpenAI-Project": "OPENAI_PROJECT"},
                             remote_compaction=True),
    "azure": ProviderConfig(base_url=f"https://{PLACEHOLDER_HOST}.openai.azure.com/openai/v1",
                            env_key="AZURE_OPENAI_API_KEY", auth="api-key", store=True,
                            remote_compaction=True),
    "ollama": ProviderConfig(base_url="http://localhost:11434/v1"),
    "lmstudio": ProviderConfig(base_url="http://localhost:1234/v1"),
    "vllm": ProviderConfig(base_url="http://localhost:8000/v1"),
    # The embedded engine: base_url is filled in when it starts on a random port.
    "local": ProviderConfig(base_url="http://127.0.0.1:0/v1", wire_api="chat",
                            constrained_tools=True, constrained_grammar=True),
}


class Limits(Frozen):
    """Per run; a run that reaches one stops with its own status and keeps its work."""

    max_turns: Annotated[StrictInt, Field(ge=1, le=100_000)] = 500
    """Model requests per thread. Codex has no such cap and real threads take 50-300
    requests; 500 (OpenHands' default iteration cap) only stops a model stuck in a loop,
    while `timeout_s` and the token and cost limits bound ordinary runs."""
    """Model requests per thread, follow-up turns included."""
    timeout_s: Annotated[StrictFloat, Field(gt=0, le=7 * 24 * 3600)] = 1800
    max_tool_calls: Annotated[StrictInt, Field(ge=1)] | None = None
    max_input_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    """Input tokens summed over the run's requests (cached ones included)."""
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    """Output tokens summed over the run's requests."""
    max_cost_usd: Annotated[StrictFloat, Field(gt=0)] | None = None
    """Needs a known price for the model (`models:` or the built-in table)."""


class BatchLimits(Frozen):
    """For the whole batch: when one is reached, running runs stop (status `budget`) and
    runs not yet started are skipped (`--resume` runs them later)."""

    max_input_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_cost_usd: Annotated[StrictFloat, Field(gt=0)] | None = None


class PriceConfig(Frozen):
    """US dollars per million tokens."""

    input: Annotated[StrictFloat, Field(ge=0)]
    cached_input: Annotated[StrictFloat, Field(ge=0)]
    output: Annotated[StrictFloat, Field(ge=0)]


class ModelConfig(Frozen):
    """Overrides for one provider/model over the built-in table."""

    context_window: Annotated[StrictInt, Field(ge=256)] | None = None
    auto_compact_limit: Annotated[StrictInt, Field(ge=128)] | None = None
    """Compact the thread when its token count passes this (default 90% of the window)."""
    price: PriceConfig | None = None
    model: str | None = Field(default=None, min_length=1)
    """The name sent to the server, when the entry is an alias: two entries for one model
    with different `model_options` compare settings in one matrix."""
    model_options: ModelOptions | None = None
    """Over `defaults.model_options`, under a task's and a variant's own."""


class ModelOptions(Frozen):
    """Sampling settings sent with each request; unset ones are not sent."""

    temperature: Annotated[StrictFloat, Field(ge=0, le=2)] | None = None
    top_p: Annotated[StrictFloat, Field(gt=0, le=1)] | None = None
    seed: StrictInt | None = None
    max_output_tokens: Annotated[StrictInt, Field(ge=1, le=10_000_000)] | None = None
    """Per request (`max_tokens` on the Chat wire)."""
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed", "none"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    parallel_tool_calls: StrictBool | None = None


class PushSettings(Frozen):
    remote: str = Field(default="origin", min_length=1)
    """A remote name of the task's repository, or a URL."""
    token_env: str | None = None
    """Environment variable with the token for HTTPS pushes; it never reaches the agent."""


class GitSettings(Frozen):
    """How a run's changes become a branch and a patch. Merged field by field."""

    base: str = Field(default="HEAD", min_length=1)
    """The commit each run starts from; uncommitted changes are not included."""
    branch: str = Field(default="runner/{run}/{name}", min_length=1)
    """Branch name template: {run} (the batch id), {name} (the run name), {task}, {model},
    {variant}, {repeat}."""
    keep: Literal["branch", "patch"] = "branch"
    """`patch`: keep each run's changes as a patch file only and create no branch (for
    benchmarks, which would otherwise leave one branch per run in the repository)."""
    allowed_paths: tuple[str, ...] | None = None
    """Globs the agent may change (all when unset)."""
    forbidden_paths: tuple[str, ...] = ()
    """Globs the agent may not change; `.github/workflows/**` is always forbidden unless an
    allowed path names it."""
    max_diff_lines: Annotated[StrictInt, Field(ge=1)] | None = None
    push: PushSettings | None = None


class McpServerConfig(Frozen):
    """One MCP server: a command spoken to over stdio, or a streamable HTTP `url`."""

    command: tuple[NonBlank, ...] | None = None
    """The program and its arguments, e.g. [npx, -y, some-mcp-server]."""
    env: dict[str, str] = {}
    """Variables set for a stdio server (besides PATH, HOME, USER, SHELL, TERM, LOGNAME)."""
    env_vars: tuple[EnvName, ...] = ()
    """Names of the runner's own environment variables passed on to a stdio server."""
    cwd: PathText | None = None
    """Working directory of a stdio server, relative to the task file (default: the run's
    workspace)."""
    url: str | None = Field(default=None, pattern=r"^https?://")
    http_headers: dict[str, str] = {}
    """Headers for a `url` server."""
    bearer_token_env_var: EnvName | None = None
    """Environment variable whose value a `url` server gets as a Bearer token."""
    startup_timeout_s: Annotated[StrictFloat, Field(gt=0, le=3600)] = 10.0
    """Start, handshake and tool listing must finish within this, or the run fails."""
    tool_timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 60.0
    """One tool call's limit; a call past it gets an error output, the run goes on."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (streamable "
                             "HTTP), not both and not neither")
        if self.command is not None and not self.command:
            raise ValueError("`command` must name a program")
        return self


class Settings(Frozen):
    """Fields a task may set and `defaults` may set for every task."""

    model: str | None = Field(default=None, pattern=MODEL_RE)
    instructions_file: PathText | None = None
    developer_instructions: str | None = None
    tools: tuple[ToolName, ...] | None = None
    sandbox: SandboxMode | None = None
    network_access: StrictBool | None = None
    """Whether sandboxed commands reach the network (default: no). `danger-full-access`
    has no sandbox, so there it is always on."""
    writable_roots: tuple[PathText, ...] | None = None
    """Directories besides the workspace that commands may change in `workspace-write`,
    relative to the task file's directory."""
    limits: Limits | None = None
    """Merged field by field: the task's fields over the defaults' over the built-in ones."""
    model_options: ModelOptions | None = None
    """Merged field by field, like `limits`."""
    shell_timeout_ms: Annotated[StrictInt, Field(ge=1, le=24 * 3600 * 1000)] | None = None
    apply_patch_tool: Literal["function", "freeform"] | None = None
    """`freeform` offers apply_patch as a custom grammar tool (models that support it)."""
    git: GitSettings | None = None
    check: NonBlank | None = None
    """A shell command run in the run's workspace after the agent; exit 0 means pass."""
    check_timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] | None = None
    auto_compact_limit: Annotated[StrictInt, Field(ge=128)] | None = None
    """Compact the thread when its token count reaches this; wins over `models:` and the
    built-in 90% of the context window."""
    compact_prompt_file: PathText | None = None
    """Replaces the bundled hand-off summary request of local compaction."""
    mcp_servers: dict[Annotated[str, Field(pattern=PROVIDER_NAME_RE)],
                      McpServerConfig] | None = None
    """MCP servers whose tools the agent gets, by name; a task's entry replaces the
    defaults' entry of the same name."""
    skills: tuple[PathText, ...] | None = None
    """Skill folders, relative to the task file: each holds a SKILL.md, or subfolders
    that do."""
    web_search: StrictBool | None = None
    """Offer the provider's hosted `web_search` tool (Responses providers; default off)."""
    output_schema: dict[str, Any] | PathText | None = None
    """A JSON schema the final answer must match: a mapping, or a path to a JSON file."""
    current_date: IsoDate | None = None
    """The day `<environment_context>` tells the model (default: today on this machine).
    Pin it, with `timezone`, for prompts that are byte-identical on any day."""
    timezone: TimeZone | None = None
    """The IANA zone `<environment_context>` tells the model (default: this machine's)."""

    @field_validator("tools")
    @classmethod
    def _unique(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("each tool may be listed once")
        return v


class TaskSpec(Settings):
    id: str = Field(pattern=ID_RE)
    prompt: NonBlank
    repo: PathText = "."
    turns: tuple[NonBlank, ...] = ()
    tags: tuple[Annotated[str, Field(pattern=ID_RE)], ...] = ()
    """Select tasks with `--tag` on the command line."""


class _LineMap:
    """Field path -> line, kept with a parsed TaskFile so `resolve` can locate problems.

    Metadata, not part of the value: any two line maps compare equal, so two TaskFiles with
    the same content are equal however their files were laid out.
    """

    __slots__ = ("lines",)

    def __init__(self, lines: dict[Path_, int] | None = None) -> None:
        self.lines: dict[Path_, int] = lines if lines is not None else {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _LineMap)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"_LineMap({len(self.lines)} paths)"


class Variant(Frozen):
    """A named set of overrides, so a matrix compares prompts and settings, not only models."""

    name: str = Field(pattern=ID_RE)
    instructions_file: PathText | None = None
    developer_instructions: str | None = None
    prompt_template: str | None = None
    """The task prompt is put where `{prompt}` stands, e.g. "Think first.\n\n{prompt}"."""
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    tools: tuple[ToolName, ...] | None = None
    model_options: ModelOptions | None = None

    @field_validator("prompt_template")
    @classmethod
    def _has_slot(cls, v: str | None) -> str | None:
        if v is not None and v.count("{prompt}") != 1:
            raise ValueError("must contain {prompt} exactly once (where the task prompt goes)")
        return v


class Matrix(Frozen):
    """Every task runs once per model, variant and repeat, each run its own thread and
    branch."""

    model: tuple[Annotated[str, Field(pattern=MODEL_RE)], ...] = ()
    """provider/model entries; when given, every task runs on each of them."""
    variant: tuple[Variant, ...] = ()
    repeat: Annotated[StrictInt, Field(ge=1, le=1000)] = 1

    @field_validator("variant")
    @classmethod
    def _unique_names(cls, v: tuple[Variant, ...]) -> tuple[Variant, ...]:
        names = [x.name for x in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"variant name {dup[0]!r} is used twice; names must be unique")
        return v


class TaskFile(Frozen):
    version: Annotated[Literal[1], BeforeValidator(_version)]
    providers: dict[Annotated[str, Field(pattern=PROVIDER_NAME_RE)], ProviderConfig] = {}
    defaults: Settings = Settings()
    matrix: Matrix | None = None
    models: dict[Annotated[str, Field(pattern=MODEL_RE)], ModelConfig] = {}
    """Context window, compaction limit and price per provider/model, over the built-in
    table."""
    budget: BatchLimits | None = None
    secrets: tuple[EnvName, ...] = ()
    """Environment variables whose values are secrets: kept from the agent's commands and
    redacted from every report, log, commit and patch. Provider keys (`env_key`) and push
    tokens (`token_env`) are secrets without being listed."""
    codex_config: StrictBool | PathText | None = None
    """Also read `[model_providers.*]` from Codex's config.toml: `true` for
    `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`), or a path."""
    tasks: tuple[TaskSpec, ...]

    _lines: _LineMap = PrivateAttr(default_factory=_LineMap)

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, v: tuple[TaskSpec, ...]) -> tuple[TaskSpec, ...]:
        if not v:
            raise ValueError("at least one task is needed")
        first: dict[str, int] = {}
        for i, t in enumerate(v):
            if t.id in first:
                # The context lets parse_task_file blame the second id, not the whole list.
                raise PydanticCustomError(
                    "duplicate_task_id", "task id {id} is used twice; ids must be unique",
                    {"id": repr(t.id), "index": i, "first": first[t.id]})
            first[t.id] = i
        return v


DEFAULT_TOOLS: tuple[ToolName, ...] = ("shell", "apply_patch", "update_plan")


class ResolvedTask(Frozen):
    """One task with defaults applied and paths made absolute: what a run needs."""

    id: str
    prompt: str
    turns: tuple[str, ...]
    repo: Path
    provider_name: str
    provider: ProviderConfig
    model: str
    instructions_file: Path | None
    developer_instructions: str | None
    tools: tuple[ToolName, ...]
    sandbox: SandboxMode
    limits: Limits
    model_options: ModelOptions
    shell_timeout_ms: int
    network_access: bool = False
    writable_roots: tuple[Path, ...] = ()
    apply_patch_tool: Literal["function", "freeform"] = "function"
    git: GitSettings = GitSettings()
    check: str | None = None
    check_timeout_s: float = 600.0
    run: str = ""
    """This run's name: the task id, plus model and repeat when a matrix makes several
    runs of one task. Used for file names, workspaces and the report."""
    repeat: int = 1
    secrets: tuple[str, ...] = ()
    """The task file's `secrets:` (names of environment variables)."""
    variant: str | None = None
    tags: tuple[str, ...] = ()
    api_model: str = ""
    """The model name sent to the server (`model` is the task file's name, maybe an
    alias from `models:`)."""
    context_window: int | None = None
    auto_compact_limit: int | None = None
    compact_prompt_file: Path | None = None
    price: PriceConfig | None = None
    """None when the price is unknown: cost is then reported as null."""
    mcp_servers: dict[str, McpServerConfig] = {}
    skills: tuple[Skill, ...] = ()
    web_search: bool = False
    output_schema: dict[str, Any] | None = None
    current_date: str | None = None
    """Pinned day for the prompt; None: the day the batch starts."""
    timezone: str | None = None
    """Pinned zone for the prompt; None: this machine's."""
    fingerprint: str = ""
    """Hash of everything that defines the run except machine paths: equal on every
    machine, so `--shard` slices agree and `--resume` knows a run it has finished."""


# ---------------------------------------------------------------- loading

Path_ = tuple[str | int, ...]

_TAG = "tag:yaml.org,2002:"
_STR_TAGS = {_TAG + "str", _TAG + "value"}
_MERGE_TAG = _TAG + "merge"
_KEY_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "null": "null",
              "timestamp": "a date", "binary": "binary data"}
ALIAS_EXPANSION_LIMIT = 100_000
"""How many values aliases may add to a file once expanded (a "billion laughs" guard)."""


def _esc(text: str) -> str:
    """Text made safe for a one-line message: unprintable characters escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _short_tag(tag: str) -> str:
    return "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag


class _Lines:
    """Line numbers as editors, `grep -n` and `wc -l` count them: only "\\n" ends a line.

    PyYAML also counts U+0085, U+2028 and U+2029 (and a lone CR), so its `mark.line` drifts
    after such a character; the character index of a mark is exact.
    """

    def __init__(self, text: str) -> None:
        self._newlines = [m.start() for m in re.finditer("\n", text)]

    def __call__(self, index: int) -> int:
        # == text.count("\n", 0, index) + 1, in O(log n)
        return bisect.bisect_left(self._newlines, index) + 1


class _BadValue(yaml.constructor.ConstructorError):
    """A scalar whose explicit tag does not fit it, e.g. `!!int ten`."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that remembers anchor names and where aliases stand in sequences, and
    turns the constructor's own ValueError/KeyError/... on bad tagged values into a
    located error."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.anchor_names: dict[int, str] = {}
        self.alias_marks: dict[tuple[int, int], yaml.Mark] = {}

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        # An alias is the anchored node itself in the tree; keep where the alias stands.
        if parent is not None and isinstance(index, int) and self.check_event(yaml.AliasEvent):
            event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
            if isinstance(event.start_mark, yaml.Mark):
                self.alias_marks[(id(parent), index)] = event.start_mark
        node = super().compose_node(parent, index)
        if parent is None:  # the root: every anchor of the document is known now
            self.anchor_names = {id(n): name for name, n in self.anchors.items()}
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError):
            value = node.value if isinstance(node, yaml.ScalarNode) else ""
            shown = f"`{_esc(_short(value))}`" if value else "an empty value"
            raise _BadValue(None, None, f"{shown} is not a valid {_short_tag(node.tag)}",
                            node.start_mark) from None


# `=` resolves to the YAML 1.1 "value" tag, which SafeLoader cannot construct: read it as text.
def _construct_text(loader: _Loader, node: yaml.Node) -> str:
    return loader.construct_yaml_str(node)


_Loader.add_constructor(_TAG + "value", _construct_text)


class _Walker:
    """One pass over the node tree: line map, duplicate and non-string keys.

    Aliases reuse node objects, so each node is walked once (remembered by id); a
    self-referencing alias therefore ends, and a "billion laughs" file stays linear.
    """

    def __init__(self, file: str, at: _Lines, alias_marks: dict[tuple[int, int], yaml.Mark]):
        self.file = file
        self.at = at
        self.alias_marks = alias_marks
        self.lines: dict[Path_, int] = {}
        self.paths: dict[int, Path_] = {}  # node id -> the path it was first seen at
        self.by_index: dict[int, Path_] = {}  # text index -> deepest path starting there
        self.problems: list[Problem] = []

    def line(self, node: yaml.Node) -> int:
        return self.at(node.start_mark.index)

    def walk(self, node: yaml.Node, path: Path_) -> None:
        self.lines.setdefault(path, self.line(node))
        if id(node) in self.paths:
            return
        self.paths[id(node)] = path
        self.by_index[node.start_mark.index] = path
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, path)
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                mark = self.alias_marks.get((id(node), i))
                if mark is not None:
                    self.lines.setdefault(path + (i,), self.at(mark.index))
                self.walk(child, path + (i,))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> None:
        seen: dict[str, int] = {}
        merged: list[yaml.Node] = []
        for knode, vnode in node.value:
            if knode.tag == _MERGE_TAG:
                merged.append(vnode)
                self.walk(vnode, path + ("<<",))
                continue
            if not (isinstance(knode, yaml.ScalarNode) and knode.tag in _STR_TAGS):
                self._non_string_key(knode, path)
                continue
            key = str(knode.value)
            kpath = path + (key,)
            line = self.line(knode)
            if key in seen:
                self.problems.append(Problem(
                    self.file, line, _dotted(kpath),
                    f"duplicate key; each key may appear once (first at line {seen[key]})"))
            else:
                seen[key] = line
            self.lines[kpath] = line
            self.walk(vnode, kpath)
        # Keys brought in by `<<: *base` point at their line in the merged mapping.
        for m in merged:
            sources = m.value if isinstance(m, yaml.SequenceNode) else [m]
            for src in sources:
                if isinstance(src, yaml.MappingNode):
                    for knode, _ in src.value:
                        if isinstance(knode, yaml.ScalarNode) and knode.tag in _STR_TAGS:
                            self.lines.setdefault(path + (str(knode.value),), self.line(knode))

    def _non_string_key(self, knode: yaml.Node, path: Path_) -> None:
        if isinstance(knode, yaml.ScalarNode):
            text = _esc(_short(str(knode.value)))
            kind = _KEY_KINDS.get(knode.tag[len(_TAG):], _short_tag(knode.tag))
            name = text or "~"
            message = (f"keys must be strings; `{name}` reads as {kind}: quote it, as in "
                       f"'{text}', if it is meant as a name")
        else:
            name = "(list)" if isinstance(knode, yaml.SequenceNode) else "(mapping)"
            message = f"keys must be strings, not a {name[1:-1]}"
        self.problems.append(Problem(self.file, self.line(knode), _dotted(path + (name,)),
                                     message))


def _alias_problems(root: yaml.Node, walker: _Walker,
                    anchor_names: dict[int, str]) -> list[Problem]:
    """A node that contains itself through an alias, or aliases that expand the file
    beyond ALIAS_EXPANSION_LIMIT values: neither can be a task file."""
    size: dict[int, int] = {}
    active: set[int] = set()
    cycles: list[yaml.Node] = []

    def children(node: yaml.Node) -> list[yaml.Node]:
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        if isinstance(node, yaml.SequenceNode):
            return list(node.value)
        return []

    def expanded(node: yaml.Node) -> int:
        key = id(node)
        if key in size:
            return size[key]
        if key in active:
            cycles.append(node)
            return 0
        active.add(key)
        total = 1 + sum(expanded(child) for child in children(node))
        active.discard(key)
        size[key] = total
        return total

    total = expanded(root)
    file, lines = walker.file, walker.lines
    if cycles:
        node = cycles[0]
        path = walker.paths.get(id(node), ())
        name = anchor_names.get(id(node))
        through = f"the alias *{_esc(name)}" if name else "an alias"
        return [Problem(file, _line_for(path, lines), _dotted(path),
                        f"contains itself through {through}; recursive structures are "
                        f"not allowed")]
    if total - len(size) > ALIAS_EXPANSION_LIMIT:
        node = root  # blame the smallest node that is still too big
        while True:
            big = [c for c in children(node) if size.get(id(c), 0) > ALIAS_EXPANSION_LIMIT]
            if not big:
                break
            node = max(big, key=lambda c: size[id(c)])
        path = walker.paths.get(id(node), ())
        return [Problem(file, _line_for(path, lines), _dotted(path),
                        f"aliases expand this to more than {ALIAS_EXPANSION_LIMIT:,} values; "
                        f"refusing to load it")]
    return []


def field_line(tf: TaskFile, path: Path_, *, exact: bool = False) -> int | None:
    """The line of `path` in the file `tf` was parsed from; with `exact`, None unless that
    very field is written there (else the nearest enclosing one's line)."""
    lines = tf._lines.lines
    if exact:
        return lines.get(path)
    return _line_for(path, lines)


def _dotted(path: Path_) -> str:
    s = ""
    for part in path:
        if isinstance(part, int):
            s += f"[{part}]"
        else:
            name = _esc(part) if part else "''"
            s += f".{name}" if s else name
    return s or "(top level)"


def _line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def _yaml_problem(exc: yaml.YAMLError, file: str, at: _Lines,
                  by_index: dict[int, Path_] | None = None) -> Problem:
    """One readable line for a PyYAML error: problem, then its context with a line."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        return Problem(file, at(exc.position), "(syntax)",
                       f"not valid YAML: character U+{code:04X} is not allowed; inside a "
                       f"double-quoted string write it as {escape}")
    if not isinstance(exc, yaml.MarkedYAMLError):
        reason = _esc(" ".join(str(exc).split()))
        return Problem(file, None, "(syntax)", f"not valid YAML: {reason}")
    mark = exc.problem_mark or exc.context_mark
    line = at(mark.index) if mark is not None else None
    field = "(syntax)"
    if by_index is not None and isinstance(exc, yaml.constructor.ConstructorError) and mark:
        field = _dotted(by_index.get(mark.index, ())) if mark.index in by_index else field
    problem, context = exc.problem, exc.context
    reason = problem or context or "unreadable"
    if problem and context:  # PyYAML's order: "while parsing X" (where it began), the problem
        where = f" at line {at(exc.context_mark.index)}" if exc.context_mark else ""
        reason = f"{context}{where}, {problem}"
    reason = _esc(" ".join(reason.split()))
    if isinstance(exc, _BadValue):
        return Problem(file, line, field, reason)
    return Problem(file, line, field, f"not valid YAML: {reason}")


def _unwrap(tp: Any) -> Any:
    while True:
        origin = get_origin(tp)
        if origin is Annotated:
            tp = get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) != 1:
                return tp
            tp = args[0]
        else:
            return tp


def _type_at(root: Any, loc: Path_) -> Any:
    """The annotation at `loc` (pydantic's error location) below `root`, or None."""
    tp = root
    for part in loc:
        tp = _unwrap(tp)
        origin = get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            info = tp.model_fields.get(part) if isinstance(part, str) else None
            if info is None:
                return None
            tp = info.annotation
        elif origin is dict:
            tp = get_args(tp)[1]  # any key: step over it to the value type
        elif origin in (tuple, list) and isinstance(part, int):
            tp = get_args(tp)[0]
        else:
            return None
    return _unwrap(tp)


def _allowed_fields(model: type[BaseModel], path: Path_) -> list[str]:
    """Field names of the model at `path`, for 'unknown field' messages."""
    current = _type_at(model, path[:-1])
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _list_message(loc: Path_, got: str) -> str:
    item = _type_at(TaskFile, loc + (0,))
    if get_origin(item) is Literal:
        names = [str(a) for a in get_args(item)]
        return (f"must be a list{got}; allowed items: {', '.join(repr(n) for n in names)}, "
                f"e.g. [{names[0]}]")
    if item is str:
        return f"must be a list of strings{got}"
    return f"must be a list{got}"


def _message(err: Any, loc: Path_, lines: dict[Path_, int]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    got = f", got {_describe(value)}"
    if kind == "extra_forbidden":
        return f"unknown field; allowed here: {', '.join(_allowed_fields(TaskFile, loc))}"
    if kind == "missing":
        return "required field is missing"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "must be a mapping" + got
    if kind in ("tuple_type", "list_type", "iterable_type"):
        return _list_message(loc, got)
    if kind == "string_type":
        hint = " (quote it to make it text)" if not isinstance(value, (list, dict)) else ""
        return "must be a valid string" + got + hint
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be a valid integer" + got
    if kind in ("float_type", "float_parsing"):
        return "must be a number" + got
    if kind in ("bool_type", "bool_parsing"):
        return "must be true or false" + got
    if kind == "finite_number":
        return "must be a finite number"
    if kind == "invalid_key":
        return "keys must be strings"
    if kind == "duplicate_task_id":
        first = _line_for(("tasks", ctx.get("first", 0), "id"), lines)
        return f"task id {ctx.get('id')} is used twice; ids must be unique" + (
            f" (first at line {first})" if first else "")
    msg = re.sub(r"^Value error, ", "", str(err["msg"]))
    if kind == "string_pattern_mismatch":
        pattern = ctx.get("pattern", "")
        if pattern == ID_RE:
            return "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        if pattern == PROVIDER_NAME_RE:
            return "provider names may use only letters, digits, '_' and '-'"
        if "https?" in pattern:
            return "must be an http:// or https:// URL"
        if "/" in pattern:
            return "must look like provider/model, e.g. openai/gpt-5.5 or local/smollm2"
    if kind == "string_too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    return _esc(msg.replace("Input should be", "must be"))


def _validation_problems(exc: ValidationError, file: str,
                         lines: dict[Path_, int]) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        loc: Path_ = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
        if loc and loc[-1] == "[key]":  # a dict key failed: blame the key itself
            loc = loc[:-1]
        msg_loc = loc
        if err["type"] == "duplicate_task_id":
            loc = ("tasks", (err.get("ctx") or {}).get("index", 0), "id")
        problems.append(Problem(file, _line_for(loc, lines), _dotted(loc),
                                _message(err, msg_loc, lines)))
    return problems


def parse_task_file(text: str, file: str) -> TaskFile:
    """Parse and validate task file text. Pure: raises ConfigError with located problems."""
    at = _Lines(text)
    try:
        loader = _Loader(text)  # checks the characters of the whole text
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, file, at)]) from None
    try:
        data, node, lines = _load(loader, text, file, at)
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError([Problem(file, at(node.start_mark.index), "(top level)",
                                   f"expected a mapping with `version: 1` and `tasks:`, "
                                   f"got {_describe(data)}")])
    try:
        tf = TaskFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_problems(exc, file, lines)) from None
    except RecursionError:
        raise ConfigError([Problem(file, at(node.start_mark.index), "(top level)",
                                   "nested too deeply")]) from None
    _check_models(tf, file, lines)
    tf._lines = _LineMap(lines)
    return tf


def _load(loader: _Loader, text: str, file: str,
          at: _Lines) -> tuple[Any, yaml.Node, dict[Path_, int]]:
    """Compose once, check the tree, construct the data from the same tree."""
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, file, at)]) from None
    except RecursionError:  # PyYAML's composer recurses once per level
        raise ConfigError([Problem(file, at(loader.get_mark().index), "(syntax)",
                                   "YAML nested too deeply")]) from None
    if node is None:
        raise ConfigError([Problem(file, 1, "(top level)",
                                   "the file is empty; expected a mapping with `version: 1` "
                                   "and `tasks:`")])
    walker = _Walker(file, at, loader.alias_marks)
    try:
        walker.walk(node, ())
        problems = walker.problems or _alias_problems(node, walker, loader.anchor_names)
    except RecursionError:
        raise ConfigError([Problem(file, None, "(syntax)", "YAML nested too deeply")]) from None
    if problems:
        raise ConfigError(problems)
    try:
        data: Any = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, file, at, walker.by_index)]) from None
    except (RecursionError, ValueError, TypeError, LookupError, AttributeError,
            ArithmeticError) as exc:
        raise ConfigError([Problem(file, None, "(syntax)",
                                   f"cannot read a value: {_esc(str(exc)) or 'unknown error'}")]
                          ) from None
    return data, node, walker.lines


def _check_models(tf: TaskFile, file: str, lines: dict[Path_, int]) -> None:
    if tf.codex_config:  # its providers are read (and models checked) by `resolve`
        return
    known = set(BUILTIN_PROVIDERS) | set(tf.providers)
    problems: list[Problem] = []
    candidates: list[tuple[Path_, str | None]] = [(("defaults", "model"), tf.defaults.model)]
    candidates += [(("tasks", i, "model"), t.model) for i, t in enumerate(tf.tasks)]
    for path, model in candidates:
        if model is None:
            continue
        provider = model.split("/", 1)[0]
        if provider not in known:
            problems.append(Problem(file, _line_for(path, lines), _dotted(path),
                                    _unknown_provider(provider, known)))
    if problems:
        raise ConfigError(problems)


def _unknown_provider(name: str, known: set[str]) -> str:
    return (f"unknown provider {name!r}; allowed: {', '.join(sorted(known))} "
            f"(add it under `providers:`)")


MAX_TASK_FILE_BYTES = 4 * 1024 * 1024


def _read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file: a FIFO, a device (/dev/zero) or a
    directory is refused before anything is read, so nothing blocks or fills memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(errno.EINVAL, f"Is {kind}" if kind == "a directory" else
                          "not a regular file (a FIFO, device or socket)")
        chunks, left = [], limit
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load_task_file(path: Path) -> TaskFile:
    file = str(path)
    try:
        raw = _read_regular(path, MAX_TASK_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError([Problem(file, None, "(file)",
                                   f"cannot read: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_TASK_FILE_BYTES:
        raise ConfigError([Problem(file, None, "(file)",
                                   f"file is larger than {MAX_TASK_FILE_BYTES} bytes")])
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError([Problem(file, None, "(file)",
                                   f"not UTF-8 text (byte {exc.start})")]) from None
    return parse_task_file(text, file)


# ---------------------------------------------------------------- resolving

_M = TypeVar("_M", Limits, ModelOptions, GitSettings)
_T = TypeVar("_T")


def _merged(cls: type[_M], *layers: _M | None) -> _M:
    """Later layers' explicitly set fields over earlier ones' over the built-in defaults."""
    values: dict[str, Any] = {}
    for layer in layers:
        if layer is not None:
            values.update({name: getattr(layer, name) for name in layer.model_fields_set})
    return cls.model_validate(values)


def _first(*values: _T | None) -> _T | None:
    for v in values:
        if v is not None:
            return v
    return None


def _os_reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    if isinstance(exc, RuntimeError) and "loop" in str(exc).lower():
        return "symlink loop"  # Path.resolve() on Python < 3.13
    return str(exc) or type(exc).__name__


def _check_path(base_dir: Path, raw: str, want_dir: bool) -> tuple[Path | None, str | None]:
    """(absolute path, problem): the path resolved against base_dir, and what is wrong."""
    try:
        path = (base_dir / raw).resolve()
        ok = path.is_dir() if want_dir else path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:
        return None, f"cannot use path {_esc(repr(_short(raw, 80)))}: {_esc(_os_reason(exc))}"
    if not ok:
        return path, f"{_esc(str(path))} is not a {'directory' if want_dir else 'file'}"
    return path, None


def resolve(tf: TaskFile, base_dir: Path, *, file: str = "",
            model_override: str | None = None) -> list[ResolvedTask]:
    """Apply defaults and resolve paths. Raises ConfigError for missing repos and files.

    Problems carry the line of the field they are about (the line map kept by
    parse_task_file); an unknown provider in `model_override` is blamed on `--model`.
    """
    lines = tf._lines.lines
    problems: list[Problem] = []

    def problem(path: Path_, message: str) -> None:
        found = Problem(file, _line_for(path, lines), _dotted(path), message)
        if found not in problems:  # a defaults' problem is met once per task
            problems.append(found)

    known = {**BUILTIN_PROVIDERS, **_providers(tf, base_dir, problem)}
    if model_override is not None:
        if not re.fullmatch(MODEL_RE, model_override):
            problems.append(Problem(COMMAND_LINE, None, "--model",
                                    "must look like provider/model, e.g. local/smollm2"))
        elif model_override.split("/", 1)[0] not in known:
            problems.append(Problem(COMMAND_LINE, None, "--model", _unknown_provider(
                model_override.split("/", 1)[0], set(known))))
    d = tf.defaults
    files: dict[Path_, Path | None] = {}  # each instructions_file is checked (and blamed) once

    def instructions(path: Path_, raw: str) -> Path | None:
        if path not in files:
            found, wrong = _check_path(base_dir, raw, want_dir=False)
            if wrong is not None:
                problem(path, wrong)
            files[path] = found
        return files[path]

    dirs: dict[Path_, Path | None] = {}  # writable roots, checked (and blamed) once too

    def directories(path: Path_, raws: tuple[str, ...]) -> tuple[Path, ...]:
        for j, raw in enumerate(raws):
            if (*path, j) not in dirs:
                found, wrong = _check_path(base_dir, raw, want_dir=True)
                if wrong is not None:
                    problem((*path, j), wrong)
                dirs[(*path, j)] = found
        return tuple(p for j in range(len(raws)) if (p := dirs[(*path, j)]) is not None)

    out: list[ResolvedTask] = []
    for i, t in enumerate(tf.tasks):
        repo, wrong = _check_path(base_dir, t.repo, want_dir=True)
        if wrong is not None:
            problem(("tasks", i, "repo"), wrong)
        instr_path: Path | None = None
        if t.instructions_file is not None:
            instr_path = instructions(("tasks", i, "instructions_file"), t.instructions_file)
        elif d.instructions_file is not None:
            instr_path = instructions(("defaults", "instructions_file"), d.instructions_file)
        compact_path: Path | None = None
        if t.compact_prompt_file is not None:
            compact_path = instructions(("tasks", i, "compact_prompt_file"),
                                        t.compact_prompt_file)
        elif d.compact_prompt_file is not None:
            compact_path = instructions(("defaults", "compact_prompt_file"),
                                        d.compact_prompt_file)

        model_path: Path_ = ("tasks", i, "model") if t.model is not None else (
            "defaults", "model")
        model = model_override or _first(t.model, d.model) or "local/smollm2"
        provider_name, _, model_name = model.partition("/")
        provider = known.get(provider_name)
        if provider is None:
            if model_override is None:  # only for a TaskFile that parse_task_file did not make
                problem(model_path, _unknown_provider(provider_name, set(known)))
            continue
        if PLACEHOLDER_HOST in provider.base_url:
            wrong = (f"{_esc(model)} uses provider {provider_name!r}, whose base_url is the "
                     f"placeholder {_esc(provider.base_url)}; set providers.{provider_name}"
                     ".base_url to your endpoint, e.g. https://<resource>.openai.azure.com"
                     "/openai/v1")
            matrix = tf.matrix.model if tf.matrix else ()
            if model_override is None:
                problem(model_path, wrong)
            elif model_override in matrix:
                problem(("matrix", "model", matrix.index(model_override)), wrong)
            elif (found := Problem(COMMAND_LINE, None, "--model", wrong)) not in problems:
                problems.append(found)
            continue
        roots: tuple[Path, ...] = ()
        if t.writable_roots is not None:
            roots = directories(("tasks", i, "writable_roots"), t.writable_roots)
        elif d.writable_roots is not None:
            roots = directories(("defaults", "writable_roots"), d.writable_roots)
        extras = _extras(t, d, i, provider_name, known, base_dir, problem)
        entry = tf.models.get(model) or ModelConfig()
        _no_seed_on_responses(provider, ((("tasks", i), t.model_options),
                                         (("models", model), entry.model_options),
                                         (("defaults",), d.model_options)), problem)
        if problems or repo is None:
            continue
        out.append(ResolvedTask(
            id=t.id, run=t.id, prompt=t.prompt, turns=t.turns, repo=repo,
            provider_name=provider_name, provider=provider, model=model_name,
            instructions_file=instr_path,
            developer_instructions=_first(t.developer_instructions, d.developer_instructions),
            tools=_first(t.tools, d.tools, DEFAULT_TOOLS) or (),
            sandbox=_first(t.sandbox, d.sandbox) or "workspace-write",
            network_access=bool(_first(t.network_access, d.network_access)),
            writable_roots=roots,
            limits=_merged(Limits, d.limits, t.limits),
            model_options=_merged(ModelOptions, ModelOptions.model_validate(
                codex_defaults(entry.model or model_name)),
                d.model_options, entry.model_options, t.model_options),
            shell_timeout_ms=_first(t.shell_timeout_ms, d.shell_timeout_ms) or 10_000,
            apply_patch_tool=_first(t.apply_patch_tool, d.apply_patch_tool) or "function",
            git=_merged(GitSettings, d.git, t.git),
            check=_first(t.check, d.check),
            check_timeout_s=_first(t.check_timeout_s, d.check_timeout_s) or 600.0,
            tags=t.tags, api_model=entry.model or model_name,
            secrets=tf.secrets,
            compact_prompt_file=compact_path,
            current_date=_first(t.current_date, d.current_date),
            timezone=_first(t.timezone, d.timezone),
            **_model_fields(provider_name, entry.model or model_name, tf.models,
                            _first(t.auto_compact_limit, d.auto_compact_limit), alias=model,
                            provider_cfg=provider),
            **extras,
        ))
    if problems:
        raise ConfigError(problems)
    return out


_AZURE_HOSTS = ("openai.azure.", "cognitiveservices.azure.", "aoai.azure.", "azure-api.",
                "azurefd.", "windows.net/openai")


def _providers(tf: TaskFile, base_dir: Path,
               problem: Callable[[Path_, str], None]) -> dict[str, ProviderConfig]:
    """Codex's `[model_providers.*]` (when `codex_config` says so), then the task file's.

    Azure endpoints get `store: true` unless the file sets `store`, as Codex does: Azure
    drops reasoning items between requests otherwise.
    """
    found: dict[str, ProviderConfig] = {}
    if tf.codex_config:
        from runner.providers.codex_config import default_path, load_codex_providers

        path = (default_path(os.environ) if tf.codex_config is True
                else base_dir / str(tf.codex_config))
        if path.is_file():
            found.update(load_codex_providers(path))
        else:
            problem(("codex_config",), f"{_esc(str(path))} is not a file")
    for name, p in tf.providers.items():
        base = found.get(name) or BUILTIN_PROVIDERS.get(name)
        if base is not None:  # field by field, like `defaults`
            p = base.model_copy(update={f: getattr(p, f) for f in p.model_fields_set})
        elif not p.base_url:
            problem(("providers", name), "base_url is required for a provider that is not "
                                         f"built in ({', '.join(BUILTIN_PROVIDERS)})")
        found[name] = p
    return {name: p.model_copy(update={"store": True})
            if "store" not in p.model_fields_set and any(h in p.base_url for h in _AZURE_HOSTS)
            else p for name, p in found.items()}


def _extras(t: TaskSpec, d: Settings, i: int, provider_name: str,
            known: dict[str, ProviderConfig], base_dir: Path,
            problem: Callable[[Path_, str], None]) -> dict[str, Any]:
    """MCP servers, skills, the hosted web search and the output schema of one task."""
    provider = known[provider_name]

    def where(name: str) -> Path_:
        return ("tasks", i, name) if getattr(t, name) is not None else ("defaults", name)

    servers: dict[str, McpServerConfig] = {}
    for layer, owner in ((d.mcp_servers, ("defaults",)), (t.mcp_servers, ("tasks", i))):
        for name, server in (layer or {}).items():
            if server.cwd is not None:
                cwd, wrong = _check_path(base_dir, server.cwd, want_dir=True)
                if wrong is not None:
                    problem((*owner, "mcp_servers", name, "cwd"), wrong)
                server = server.model_copy(update={"cwd": str(cwd)})
            servers[name] = server
    skills: list[Skill] = []
    for j, raw in enumerate(_first(t.skills, d.skills) or ()):
        folder, wrong = _check_path(base_dir, raw, want_dir=True)
        if folder is None or wrong is not None:
            problem((*where("skills"), j), wrong or "not a directory")
            continue
        try:
            skills.extend(load_skills(folder))
        except SkillError as exc:
            problem((*where("skills"), j), _esc(str(exc)))
    names = [s.name for s in skills]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problem(where("skills"), f"two skills are named {name!r}; names must be unique")
    web_search = bool(_first(t.web_search, d.web_search))
    if web_search:
        from runner.tools.hosted import web_search_problem

        own = BUILTIN_PROVIDERS.get(provider_name)
        builtin = own is not None and provider.base_url == own.base_url  # not moved
        if (wrong := web_search_problem(provider_name, provider.wire_api, builtin=builtin)):
            problem(where("web_search"), wrong)
    given: dict[str, Any] | str | None = (t.output_schema if t.output_schema is not None
                                          else d.output_schema)
    schema = (_json_file(base_dir, given, where("output_schema"), problem)
              if isinstance(given, str) else given)
    if schema is not None:
        from runner.output_schema import schema_problem

        wrong = schema_problem(schema)
        if wrong is not None:
            problem(where("output_schema"), wrong)
    return {"mcp_servers": servers, "skills": tuple(skills), "web_search": web_search,
            "output_schema": schema}


def _json_file(base_dir: Path, raw: str, path: Path_,
               problem: Callable[[Path_, str], None]) -> dict[str, Any] | None:
    found, wrong = _check_path(base_dir, raw, want_dir=False)
    if found is None or wrong is not None:
        problem(path, wrong or "not a file")
        return None
    try:
        value = json.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        problem(path, f"cannot read JSON from {_esc(str(found))}: {_esc(str(exc))}")
        return None
    if not isinstance(value, dict):
        problem(path, f"{_esc(str(found))} must hold a JSON object (a schema)")
        return None
    return value


def _model_fields(provider: str, model: str, overrides: dict[str, ModelConfig],
                  compact_limit: int | None = None, *, alias: str = "",
                  provider_cfg: ProviderConfig | None = None) -> dict[str, Any]:
    """Context window, compaction limit and price, each from the first that gives it: the
    task's `auto_compact_limit`, the `models:` entry (an alias's own, then the real
    model's), the provider's settings, the built-in table."""
    from runner.models import ModelInfo, Price, model_info

    over = {k: ModelInfo(v.context_window, v.auto_compact_limit,
                         Price(v.price.input, v.price.cached_input, v.price.output)
                         if v.price else None) for k, v in overrides.items()}
    key = f"{provider}/{model}"
    if alias in over:  # an alias entry's own fields, over the real model's
        over[key] = over[alias]
    info = model_info(provider, model, over)
    if provider_cfg is not None:
        entry = over.get(key) or ModelInfo()
        if entry.context_window is None and provider_cfg.context_window is not None:
            info = ModelInfo(provider_cfg.context_window, info.auto_compact_limit, info.price)
        if entry.auto_compact_limit is None and provider_cfg.auto_compact_limit is not None:
            info = ModelInfo(info.context_window, provider_cfg.auto_compact_limit, info.price)
    p = info.price
    return {"context_window": info.context_window,
            "auto_compact_limit": compact_limit or info.compact_limit,
            "price": PriceConfig(input=p.input, cached_input=p.cached_input, output=p.output)
            if p is not None else None}


def _no_seed_on_responses(provider: ProviderConfig,
                          layers: Sequence[tuple[Path_, ModelOptions | None]],
                          problem: Callable[[Path_, str], None]) -> None:
    """The Responses API has no `seed` (OpenAI refuses the request): said here, once,
    rather than by every request of the run."""
    if provider.wire_api != "responses":
        return
    for where, opts in layers:
        if opts is not None and opts.seed is not None:
            problem((*where, "model_options", "seed"),
                    "the Responses API has no seed (OpenAI refuses the request); it is "
                    "sent only to providers with wire_api: chat")
            return


def _with_variant(t: ResolvedTask, v: Variant, instructions: Path | None) -> ResolvedTask:
    opts = _merged(ModelOptions, t.model_options, v.model_options)
    if v.reasoning_effort is not None:
        opts = opts.model_copy(update={"reasoning_effort": v.reasoning_effort})
    return t.model_copy(update={
        "variant": v.name,
        "prompt": v.prompt_template.replace("{prompt}", t.prompt) if v.prompt_template
        else t.prompt,
        "instructions_file": instructions or t.instructions_file,
        "developer_instructions": _first(v.developer_instructions, t.developer_instructions),
        "tools": _first(v.tools, t.tools) or (),
        "model_options": opts,
    })


def fingerprint(t: ResolvedTask) -> str:
    """What makes a run this run, without machine-specific paths; instructions count by
    content, so editing them makes `--resume` redo the runs that used them."""
    data = t.model_dump(mode="json", exclude={"repo", "instructions_file", "fingerprint",
                                              "run", "compact_prompt_file", "writable_roots",
                                              "skills"})
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


def expand(tf: TaskFile, base_dir: Path, *, file: str = "",
           models: Sequence[str] = (), sandbox: SandboxMode | None = None,
           current_date: str | None = None, timezone: str | None = None,
           reasoning_effort: ReasoningEffort | None = None) -> list[ResolvedTask]:
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
    problems: list[Problem] = []
    variant_files: dict[int, Path | None] = {}
    for j, v in enumerate(variants):
        if v is not None and v.instructions_file is not None:
            found, wrong = _check_path(base_dir, v.instructions_file, want_dir=False)
            path: Path_ = ("matrix", "variant", j, "instructions_file")
            if wrong is not None:
                problems.append(Problem(file, _line_for(path, tf._lines.lines), _dotted(path),
                                        wrong))
            variant_files[j] = found
    if problems:
        raise ConfigError(problems)
    several_models = len(per_model) > 1
    runs: list[ResolvedTask] = []
    for i in range(len(tf.tasks)):
        for tasks in per_model:
            for j, v in enumerate(variants):
                t = tasks[i] if v is None else _with_variant(tasks[i], v, variant_files.get(j))
                for r in range(1, repeat + 1):
                    name = t.id
                    if several_models:
                        name += "." + re.sub(r"[^A-Za-z0-9._-]+", "-",
                                             f"{t.provider_name}-{t.model}")
                    if v is not None:
                        name += f".{v.name}"
                    if repeat > 1:
                        name += f".r{r}"
                    run = t.model_copy(update={
                        "run": name, "repeat": r, "sandbox": sandbox or t.sandbox,
                        "current_date": current_date or t.current_date,
                        "timezone": timezone or t.timezone})
                    if reasoning_effort is not None:
                        run = run.model_copy(update={"model_options": run.model_options
                                                     .model_copy(update={
                                                         "reasoning_effort": reasoning_effort})})
                    runs.append(run.model_copy(update={"fingerprint": fingerprint(run)}))
    return runs
