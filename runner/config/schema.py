"""What a task file may say: frozen pydantic models with `extra="forbid"`.

Field docstrings are the reference (docs are generated from them); validators here only
check one value at a time. Cross-field and file-system checks belong to resolve.py.

Why one module: one model per section of the task file; the field
docstrings are the reference documentation.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    Field,
    field_validator,
    model_validator,
)

from runner import sizes
from runner.config.base import Frozen, PathText, StrictBool, StrictFloat, StrictInt
from runner.config.environment import EnvironmentSettings
from runner.config.pins import IsoDate, TimeZone, iso_date, timezone_problem
from runner.config.text import Path_, describe
from runner.errors import Problem
from runner.models import Price
from runner.vocabulary import Auth, ReasoningEffort, SandboxMode

ToolName = Literal["shell", "apply_patch", "update_plan"]
ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MODEL_RE = r"^[^/\s]+/\S+$"
PROVIDER_NAME_RE = r"^[A-Za-z0-9_-]+$"
COMMAND_LINE = "(command line)"
MIN_CAP_BYTES = 1024
"""The least a byte cap of `limits:` may be: below it no request would fit at all."""


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be empty or only whitespace")
    return v


def check_version(v: object) -> object:
    # Literal[1] alone would take `true` and `1.0`, which compare equal to 1.
    if isinstance(v, (bool, float)):
        raise ValueError(f"must be 1, got {describe(v)}")
    return v


def _env_name(v: str) -> str:
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v):
        raise ValueError(
            "must be an environment variable name: letters, digits and '_', "
            "not starting with a digit"
        )
    return v


def pin_problems(current_date: str | None, timezone: str | None) -> list[Problem]:
    """What is wrong with `--date` / `--timezone`, in the task file's words."""
    problems = []
    if current_date is not None:
        try:
            iso_date(current_date)
        except ValueError as exc:
            problems.append(Problem(COMMAND_LINE, None, "--date", str(exc)))
    wrong = timezone_problem(timezone) if timezone is not None else None
    if wrong is not None:
        problems.append(Problem(COMMAND_LINE, None, "--timezone", wrong))
    return problems


NonBlank = Annotated[str, AfterValidator(_not_blank)]
EnvName = Annotated[str, AfterValidator(_env_name)]


class ProviderConfig(Frozen):
    """An endpoint that speaks the Responses API (or Chat Completions)."""

    base_url: str = Field(default="", pattern=r"^(https?://[^/\s?#]+\S*)?$")
    """Required for a provider of your own; a built-in one keeps its own when left out
    (an entry named like a built-in provider overrides only the fields it sets)."""
    env_key: EnvName | None = None
    """Environment variable holding the API key, sent the way `auth` says."""
    name: str | None = None
    """A display name (Codex's `name`); tasks use the key under `providers:`."""
    auth: Auth = "bearer"
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
    "openai": ProviderConfig(
        base_url="https://api.openai.com/v1",
        env_key="OPENAI_API_KEY",
        env_http_headers={
            "OpenAI-Organization": "OPENAI_ORGANIZATION",
            "OpenAI-Project": "OPENAI_PROJECT",
        },
        remote_compaction=True,
    ),
    "azure": ProviderConfig(
        base_url=f"https://{PLACEHOLDER_HOST}.openai.azure.com/openai/v1",
        env_key="AZURE_OPENAI_API_KEY",
        auth="api-key",
        store=True,
        remote_compaction=True,
    ),
    "ollama": ProviderConfig(base_url="http://localhost:11434/v1"),
    "lmstudio": ProviderConfig(base_url="http://localhost:1234/v1"),
    "vllm": ProviderConfig(base_url="http://localhost:8000/v1"),
    # The embedded engine: base_url is filled in when it starts on a random port.
    "local": ProviderConfig(
        base_url="http://127.0.0.1:0/v1",
        wire_api="chat",
        constrained_tools=True,
        constrained_grammar=True,
    ),
}


class Limits(Frozen):
    """Per run; a run that reaches one stops with its own status and keeps its work."""

    max_requests: Annotated[
        StrictInt,
        Field(ge=1, le=100_000, validation_alias=AliasChoices("max_requests", "max_turns")),
    ] = 500
    """Model requests per thread, follow-up turns included. Codex has no such cap and real
    threads take 50-300 requests; 500 (OpenHands' default iteration cap) only stops a model
    stuck in a loop, while `timeout_s` and the token and cost limits bound ordinary runs.
    Older task files call it `max_turns`, which is still read with the same meaning."""
    timeout_s: Annotated[StrictFloat, Field(gt=0, le=7 * 24 * 3600)] = 1800
    max_tool_calls: Annotated[StrictInt, Field(ge=1)] | None = None
    max_input_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    """Input tokens summed over the run's requests (cached ones included)."""
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    """Output tokens summed over the run's requests."""
    max_cost_usd: Annotated[StrictFloat, Field(gt=0)] | None = None
    """Needs a known price for the model (`models:` or the built-in table)."""
    max_response_bytes: Annotated[StrictInt, Field(ge=MIN_CAP_BYTES)] = sizes.RESPONSE_BYTES
    """One streamed response, every event counted. These four caps are bytes, not
    tokens, because a server's token counts cannot be trusted to bound memory."""
    max_item_bytes: Annotated[StrictInt, Field(ge=MIN_CAP_BYTES)] = sizes.ITEM_BYTES
    """One output item as it is sent back (reasoning, message, tool call)."""
    max_history_bytes: Annotated[StrictInt, Field(ge=MIN_CAP_BYTES)] = sizes.HISTORY_BYTES
    """All the thread's items as they are sent back."""
    max_request_bytes: Annotated[StrictInt, Field(ge=MIN_CAP_BYTES)] = sizes.REQUEST_BYTES
    """One request body: the history plus instructions and tools."""

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, data: Any) -> Any:
        """`max_turns` counted model requests, not turns (`turns:` are follow-up prompts):
        read as `max_requests` (the alias), and a problem in its value names the key the
        file used. Both at once would leave one silently unused: refused."""
        if isinstance(data, dict) and "max_turns" in data and "max_requests" in data:
            raise ValueError("give max_requests or max_turns (its older name), not both")
        return data


class BatchLimits(Frozen):
    """For the whole batch: when one is reached, running runs stop (status `budget`) and
    runs not yet started are skipped (`--resume` runs them later)."""

    max_input_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_output_tokens: Annotated[StrictInt, Field(ge=1)] | None = None
    max_cost_usd: Annotated[StrictFloat, Field(gt=0)] | None = None
    max_connect_failures: Annotated[StrictInt, Field(ge=1)] = 3
    """Requests in a row to one provider that get no answer at all (connection refused,
    DNS, TLS) before it counts as down: its runs still to start are skipped, naming it
    and its base URL; the other providers go on. Any answer, even an HTTP error, resets
    the count."""


class ModelConfig(Frozen):
    """Overrides for one provider/model over the built-in table."""

    context_window: Annotated[StrictInt, Field(ge=256)] | None = None
    auto_compact_limit: Annotated[StrictInt, Field(ge=128)] | None = None
    """Compact the thread when its token count passes this (default 90% of the window)."""
    price: Price | None = None
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
    reasoning_effort: ReasoningEffort | None = None
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
    branch: str = Field(default="runner/{batch}/{name}", min_length=1)
    """Branch name template: {batch} (the batch id), {name} (the run name), {task},
    {model}, {variant}, {repeat}. {run} is the older spelling of {batch} and still means
    the batch id (never the run's name), so a template written for it names the same
    branches."""
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
            raise ValueError(
                "give either `command` (a stdio server) or `url` (streamable "
                "HTTP), not both and not neither"
            )
        if self.command is not None and not self.command:
            raise ValueError("`command` must name a program")
        return self


DEFAULT_TOOLS: tuple[ToolName, ...] = ("shell", "apply_patch", "update_plan")


class VariantSettings(Frozen):
    """The settings a matrix variant may write too, declared here once (`RunSettings`)."""

    developer_instructions: str | None = None
    tools: tuple[ToolName, ...] = DEFAULT_TOOLS
    model_options: ModelOptions = ModelOptions()
    """Merged field by field, like `limits`, over the model's own defaults."""
    environment: EnvironmentSettings = EnvironmentSettings()
    """Where the run's commands happen: `local` (default) or a container image. Merged
    field by field, like `limits`, and by a variant's own."""

    @field_validator("tools")
    @classmethod
    def _unique(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError("each tool may be listed once")
        return v


class RunSettings(VariantSettings):
    """The settings a run uses as the task file writes them, each declared here once with
    its built-in default. `Settings` (what `defaults:` and a task may write) and `Run` (what
    the config pass hands over) both inherit them, so a new one is one field here: the
    config pass carries it from the file to the run without naming it."""

    sandbox: SandboxMode = "workspace-write"
    network_access: StrictBool = False
    """Whether sandboxed commands reach the network. `danger-full-access` has no
    sandbox, so there it is always on."""
    limits: Limits = Limits()
    """Merged field by field: the task's fields over the defaults' over the built-in ones."""
    shell_timeout_ms: Annotated[StrictInt, Field(ge=1, le=24 * 3600 * 1000)] = 10_000
    apply_patch_tool: Literal["function", "freeform"] = "function"
    """`freeform` offers apply_patch as a custom grammar tool (models that support it)."""
    git: GitSettings = GitSettings()
    """Merged field by field, like `limits`."""
    check: NonBlank | None = None
    """A shell command run in the run's workspace after the agent; exit 0 means pass."""
    check_timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 600.0
    auto_compact_limit: Annotated[StrictInt, Field(ge=128)] | None = None
    """Compact the thread when its token count reaches this; wins over `models:` and the
    built-in 90% of the context window (what a run gets when no file sets it)."""
    mcp_servers: dict[Annotated[str, Field(pattern=PROVIDER_NAME_RE)], McpServerConfig] = {}
    """MCP servers whose tools the agent gets, by name; a task's entry replaces the
    defaults' entry of the same name."""
    web_search: StrictBool = False
    """Offer the provider's hosted `web_search` tool (Responses providers only)."""
    current_date: IsoDate | None = None
    """The day `<environment_context>` tells the model (None: today on this machine).
    Pin it, with `timezone`, for prompts that are byte-identical on any day."""
    timezone: TimeZone | None = None
    """The IANA zone `<environment_context>` tells the model (None: this machine's)."""


class ModelSource(Frozen):
    model: str = Field(default="local/smollm2", pattern=MODEL_RE)


class VariantSources(Frozen):
    """The source a matrix variant may write too, declared here once (`Sources`)."""

    instructions_file: PathText | None = None


class Sources(VariantSources, ModelSource):
    """The settings that name something the config pass looks up: a provider/model, files
    and folders. A run holds what they lead to (a provider, paths, texts, skills, a schema)
    under the same names, typed by `Run`. Unwritten, they are None (`model`: the default
    model). The last base's fields come first: `model`, then `instructions_file`."""

    writable_roots: tuple[PathText, ...] | None = None
    """Directories besides the workspace that commands may change in `workspace-write`,
    relative to the task file's directory."""
    compact_prompt_file: PathText | None = None
    """Replaces the bundled hand-off summary request of local compaction."""
    skills: tuple[PathText, ...] | None = None
    """Skill folders, relative to the task file: each holds a SKILL.md, or subfolders
    that do."""
    output_schema: dict[str, Any] | PathText | None = None
    """A JSON schema the final answer must match: a mapping, or a path to a JSON file."""


class Settings(RunSettings, Sources):
    """Fields a task may set and `defaults` may set for every task. A task's field counts
    when the task writes it (`written`); `defaults`' fields hold the built-in value when the
    file does not write them. `null` means not written, as it always has.

    `Sources` comes last so that its fields come first (pydantic lists inherited fields
    from the last base on): `model` leads the fields an unknown key is answered with."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        return _nulls_unwritten(data)


_SETTING_NAMES = frozenset(Settings.model_fields)
"""Not a task's own fields (`prompt: null` stays a wrong prompt)."""


def _nulls_unwritten(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if v is not None or k not in _SETTING_NAMES}
    return data


def written(layer: BaseModel, name: str) -> bool:
    """Whether the file wrote `name` in this task, `defaults` or variant (not null)."""
    return name in layer.model_fields_set


class TaskSpec(Settings):
    id: str = Field(pattern=ID_RE)
    prompt: NonBlank
    repo: PathText = "."
    turns: tuple[NonBlank, ...] = ()
    tags: tuple[Annotated[str, Field(pattern=ID_RE)], ...] = ()
    """Select tasks with `--tag` on the command line."""


class LineMap:
    """Field path -> line, kept with a parsed TaskFile so `resolve` can locate problems.

    Metadata, not part of the value: any two line maps compare equal, so two TaskFiles with
    the same content are equal however their files were laid out.
    """

    __slots__ = ("lines", "sha256")

    def __init__(self, lines: dict[Path_, int] | None = None, sha256: str = "") -> None:
        self.lines: dict[Path_, int] = lines if lines is not None else {}
        self.sha256 = sha256
        """Of the file's bytes as read (the batch's identity), so nothing reads it again."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LineMap)

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"LineMap({len(self.lines)} paths)"


class Variant(VariantSettings, VariantSources):
    """A named set of overrides, so a matrix compares prompts and settings, not only models.
    Its settings are declared once, with the task's; one counts when written (`written`)."""

    name: str = Field(pattern=ID_RE)
    prompt_template: str | None = None
    """The task prompt is put where `{prompt}` stands, e.g. "Think first.\n\n{prompt}"."""
    reasoning_effort: ReasoningEffort | None = None
    """Short for `model_options: {reasoning_effort: ...}`."""

    @model_validator(mode="before")
    @classmethod
    def _null_is_unset(cls, data: Any) -> Any:
        return _nulls_unwritten(data)

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
