"""The task file: frozen pydantic models and a YAML loader that remembers line numbers.

PyYAML's node tree carries a line for every key and value; we keep a map from field path
to line so every validation error can name file, line and field. Pydantic does the
validation itself; this module only translates its errors into located `Problem`s.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from runner.errors import ConfigError, Problem

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ToolName = Literal["shell", "apply_patch", "update_plan"]
ID_RE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ProviderConfig(Frozen):
    """An endpoint that speaks the Responses API (or Chat Completions)."""

    base_url: str = Field(pattern=r"^https?://")
    env_key: str | None = None
    """Environment variable holding the API key, sent as a Bearer token."""
    query_params: dict[str, str] = {}
    http_headers: dict[str, str] = {}
    wire_api: Literal["responses", "chat"] = "responses"
    store: bool = False
    """Azure's Responses endpoint needs `store: true` for reasoning items to round-trip."""
    constrained_tools: bool = False
    """For models that cannot call tools: force tool calls through a JSON schema (chat only)."""
    request_max_retries: Annotated[int, Field(ge=0, le=100)] = 4
    """How often a request that failed transiently (network, 5xx, cut stream) is resent."""


BUILTIN_PROVIDERS: dict[str, ProviderConfig] = {
    "openai": ProviderConfig(base_url="https://api.openai.com/v1", env_key="OPENAI_API_KEY"),
    "azure": ProviderConfig(base_url="https://YOUR-RESOURCE.openai.azure.com/openai/v1",
                            env_key="AZURE_OPENAI_API_KEY", store=True),
    "ollama": ProviderConfig(base_url="http://localhost:11434/v1"),
    "lmstudio": ProviderConfig(base_url="http://localhost:1234/v1"),
    # The embedded engine: base_url is filled in when it starts on a random port.
    "local": ProviderConfig(base_url="http://127.0.0.1:0/v1", wire_api="chat",
                            constrained_tools=True),
}


class Limits(Frozen):
    max_turns: Annotated[int, Field(ge=1, le=100_000)] = 40
    """Model requests per thread, follow-up turns included."""
    timeout_s: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] = 1800


class ModelOptions(Frozen):
    """Sampling settings sent with each request; unset ones are not sent."""

    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    top_p: Annotated[float, Field(gt=0, le=1)] | None = None
    seed: int | None = None
    max_output_tokens: Annotated[int, Field(ge=1)] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    reasoning_summary: Literal["auto", "concise", "detailed", "none"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    parallel_tool_calls: bool | None = None


class Settings(Frozen):
    """Fields a task may set and `defaults` may set for every task."""

    model: str | None = Field(default=None, pattern=r"^[^/\s]+/\S+$")
    instructions_file: str | None = None
    developer_instructions: str | None = None
    tools: tuple[ToolName, ...] | None = None
    sandbox: SandboxMode | None = None
    limits: Limits | None = None
    model_options: ModelOptions | None = None
    shell_timeout_ms: Annotated[int, Field(ge=1, le=24 * 3600 * 1000)] | None = None

    @field_validator("tools")
    @classmethod
    def _unique(cls, v: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if v is not None and len(set(v)) != len(v):
            raise ValueError("each tool may be listed once")
        return v


class TaskSpec(Settings):
    id: str = Field(pattern=ID_RE)
    prompt: str = Field(min_length=1)
    repo: str = "."
    turns: tuple[Annotated[str, Field(min_length=1)], ...] = ()


class TaskFile(Frozen):
    version: Literal[1]
    providers: dict[Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")], ProviderConfig] = {}
    defaults: Settings = Settings()
    tasks: tuple[TaskSpec, ...]

    @field_validator("tasks")
    @classmethod
    def _unique_ids(cls, v: tuple[TaskSpec, ...]) -> tuple[TaskSpec, ...]:
        if not v:
            raise ValueError("at least one task is needed")
        seen: set[str] = set()
        for t in v:
            if t.id in seen:
                raise ValueError(f"task id {t.id!r} is used twice; ids must be unique")
            seen.add(t.id)
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


# ---------------------------------------------------------------- loading

Path_ = tuple[str | int, ...]


def _line_map(node: yaml.Node, path: Path_, out: dict[Path_, int],
              problems: list[Problem], file: str) -> None:
    out.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for knode, vnode in node.value:
            key = str(knode.value)
            if key in seen:
                problems.append(Problem(file, knode.start_mark.line + 1, _dotted(path + (key,)),
                                        "duplicate key; each key may appear once"))
            seen.add(key)
            out[path + (key,)] = knode.start_mark.line + 1
            _line_map(vnode, path + (key,), out, problems, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, child in enumerate(node.value):
            _line_map(child, path + (i,), out, problems, file)


def _dotted(path: Path_) -> str:
    s = ""
    for part in path:
        s += f"[{part}]" if isinstance(part, int) else (f".{part}" if s else str(part))
    return s or "(top level)"


def _line_for(path: Path_, lines: dict[Path_, int]) -> int | None:
    for n in range(len(path), -1, -1):
        if path[:n] in lines:
            return lines[path[:n]]
    return None


def _message(err: Any, fields: list[str]) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"unknown field; allowed here: {', '.join(fields)}"
    if kind == "missing":
        return "required field is missing"
    msg = str(err["msg"])
    msg = re.sub(r"^Value error, ", "", msg)
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        if pattern == ID_RE:
            return "must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        if "https?" in pattern:
            return "must be an http:// or https:// URL"
        if "/" in pattern:
            return "must look like provider/model, e.g. openai/gpt-5.5 or local/smollm2"
    if kind == "string_too_short" and err.get("ctx", {}).get("min_length") == 1:
        return "must not be empty"
    return msg.replace("Input should be", "must be")


def _allowed_fields(model: type[BaseModel], path: Path_) -> list[str]:
    """Field names of the model at `path`, for 'unknown field' messages."""
    current: Any = model
    for part in path[:-1]:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(part)
        if info is None:
            return []
        current = _inner_model(info.annotation)
        if current is None:
            return []
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def parse_task_file(text: str, file: str) -> TaskFile:
    """Parse and validate task file text. Pure: raises ConfigError with located problems."""
    problems: list[Problem] = []
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([Problem(file, line, "(syntax)", f"not valid YAML: {reason}")]) from None
    except RecursionError:
        raise ConfigError([Problem(file, None, "(syntax)", "YAML nested too deeply")]) from None
    if node is None or data is None:
        raise ConfigError([Problem(file, 1, "(top level)",
                                   "the file is empty; expected a mapping with `version: 1` "
                                   "and `tasks:`")])
    lines: dict[Path_, int] = {}
    _line_map(node, (), lines, problems, file)
    if problems:
        raise ConfigError(problems)
    if not isinstance(data, dict):
        raise ConfigError([Problem(file, 1, "(top level)",
                                   "expected a mapping with `version: 1` and `tasks:`")])
    try:
        tf = TaskFile.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(p for p in err["loc"] if isinstance(p, (str, int)))
            fields = _allowed_fields(TaskFile, loc) if err["type"] == "extra_forbidden" else []
            problems.append(Problem(file, _line_for(loc, lines), _dotted(loc),
                                    _message(err, fields)))
        raise ConfigError(problems) from None
    _check_models(tf, file, lines)
    return tf


def _check_models(tf: TaskFile, file: str, lines: dict[Path_, int]) -> None:
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
                                    f"unknown provider {provider!r}; allowed: "
                                    f"{', '.join(sorted(known))} (add it under `providers:`)"))
    if problems:
        raise ConfigError(problems)


MAX_TASK_FILE_BYTES = 4 * 1024 * 1024


def load_task_file(path: Path) -> TaskFile:
    file = str(path)
    try:
        raw = path.read_bytes()
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


def resolve(tf: TaskFile, base_dir: Path, *, file: str = "",
            model_override: str | None = None) -> list[ResolvedTask]:
    """Apply defaults and resolve paths. Raises ConfigError for missing repos and files."""
    out: list[ResolvedTask] = []
    problems: list[Problem] = []
    d = tf.defaults
    for i, t in enumerate(tf.tasks):
        model = model_override or t.model or d.model or "local/smollm2"
        provider_name, model_name = model.split("/", 1)
        provider = tf.providers.get(provider_name) or BUILTIN_PROVIDERS.get(provider_name)
        if provider is None:
            problems.append(Problem(file, None, f"tasks[{i}].model",
                                    f"unknown provider {provider_name!r}"))
            continue
        repo = (base_dir / t.repo).resolve()
        if not repo.is_dir():
            problems.append(Problem(file, None, f"tasks[{i}].repo",
                                    f"{repo} is not a directory"))
        instr = t.instructions_file or d.instructions_file
        instr_path = (base_dir / instr).resolve() if instr else None
        if instr_path is not None and not instr_path.is_file():
            problems.append(Problem(file, None, f"tasks[{i}].instructions_file",
                                    f"{instr_path} is not a file"))
        out.append(ResolvedTask(
            id=t.id, prompt=t.prompt, turns=t.turns, repo=repo,
            provider_name=provider_name, provider=provider, model=model_name,
            instructions_file=instr_path,
            developer_instructions=(t.developer_instructions if t.developer_instructions
                                    is not None else d.developer_instructions),
            tools=t.tools if t.tools is not None else (d.tools or DEFAULT_TOOLS),
            sandbox=t.sandbox or d.sandbox or "danger-full-access",
            limits=t.limits or d.limits or Limits(),
            model_options=t.model_options or d.model_options or ModelOptions(),
            shell_timeout_ms=t.shell_timeout_ms or d.shell_timeout_ms or 10_000,
        ))
    if problems:
        raise ConfigError(problems)
    return out
