"""From a `TaskFile` to `Run`s: defaults merged field by field, providers and
models looked up, every path the file names checked against the file system and the files
a run uses as text read here, each problem blamed on the line that caused it.

Why one module: every default, path and provider check of one task is resolved in one
pass that blames each problem on its line; split, the problems would be found twice.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from runner.config.base import Frozen
from runner.config.codex_config import default_path, load_codex_providers
from runner.config.load import unknown_provider
from runner.config.schema import (
    BUILTIN_PROVIDERS,
    COMMAND_LINE,
    MODEL_RE,
    PLACEHOLDER_HOST,
    McpServerConfig,
    ModelConfig,
    ModelOptions,
    ProviderConfig,
    RunSettings,
    Settings,
    TaskSpec,
    written,
)
from runner.config.taskfile import TaskFile
from runner.config.text import Path_, dotted, esc, line_for, short
from runner.errors import ConfigError, Problem, SkillError
from runner.frozen import frozen
from runner.models import codex_defaults
from runner.nesting import json_loads
from runner.skills import Skill, load_skills

_M = TypeVar("_M", bound=Frozen)
_T = TypeVar("_T")


def merged_layers(cls: type[_M], *layers: _M | None) -> _M:
    """Later layers' explicitly set fields over earlier ones' over the built-in defaults.
    Fields a model groups as one choice (`ONE_OF`, e.g. `image` or `build`) go together:
    a layer that writes one of them replaces the whole group."""
    values: dict[str, Any] = {}
    groups: tuple[frozenset[str], ...] = getattr(cls, "ONE_OF", ())
    for layer in layers:
        if layer is not None:
            for group in groups:
                if group & layer.model_fields_set:
                    for name in group:
                        values.pop(name, None)
            values.update({name: getattr(layer, name) for name in layer.model_fields_set})
    return cls.model_validate(values)


def first_set(*values: _T | None) -> _T | None:
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


def check_path(base_dir: Path, raw: str, want_dir: bool) -> tuple[Path | None, str | None]:
    """(absolute path, problem): the path resolved against base_dir, and what is wrong."""
    try:
        path = (base_dir / raw).resolve()
        ok = path.is_dir() if want_dir else path.is_file()
    except (OSError, ValueError, RuntimeError) as exc:
        return None, f"cannot use path {esc(repr(short(raw, 80)))}: {esc(_os_reason(exc))}"
    if not ok and want_dir and path.name == ".git" and path.is_file():
        return path, (
            f"{esc(str(path))} is a git worktree's .git file, not a folder; point it at "
            "the work tree that holds it"
        )
    if not ok:
        return path, f"{esc(str(path))} is not a {'directory' if want_dir else 'file'}"
    return path, None


MAX_TEXT_FILE_BYTES = 1024 * 1024
"""An instructions or prompt file larger than this is refused: it would fill the context."""


def read_text_file(path: Path) -> tuple[str | None, str | None]:
    """(text, None) for a file that can serve as instructions or a prompt, else (None, why
    not). Newlines come out as `Path.read_text` gives them."""
    try:
        raw = path.read_bytes()[: MAX_TEXT_FILE_BYTES + 1]
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    return text_of(path, raw)


def text_of(path: Path, raw: bytes) -> tuple[str | None, str | None]:
    """`read_text_file` for bytes already read."""
    if len(raw) > MAX_TEXT_FILE_BYTES:
        return None, f"{path} is larger than {MAX_TEXT_FILE_BYTES:,} bytes"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8"
    if not text.lstrip("\ufeff").strip():
        return None, f"{path} is empty; write the instructions or leave the field out"
    if re.search(r"[\x00-\x08\x0e-\x1f]", text):
        return None, f"{path} holds control characters; is it a binary file?"
    return text.replace("\r\n", "\n").replace("\r", "\n"), None


@frozen
class UserText:
    """A user file read once: its trimmed text (None when unusable, `wrong` says why) and
    the hash of its bytes (a run's fingerprint counts the file by content)."""

    text: str | None
    sha256: str
    wrong: str | None


def resolve_values(
    tf: TaskFile, base_dir: Path, *, file: str = "", model_override: str | None = None
) -> tuple[Resolver, list[dict[str, Any]]]:
    """Each task's values with defaults applied and paths resolved, for `expand` to turn
    into runs (with the resolver, whose reads it shares). Raises ConfigError for missing
    repos and files.

    Problems carry the line of the field they are about (the line map kept by
    parse_task_file); an unknown provider in `model_override` is blamed on `--model`.
    """
    r = Resolver(tf, base_dir, file)
    r.use_model(model_override)
    out = [task for i, t in enumerate(tf.tasks) if (task := r.task(i, t)) is not None]
    if r.problems:
        raise ConfigError(r.problems)
    return r, out


class Resolver:
    """One `resolve()`: the providers it knows, the problems found so far (each once: a
    defaults' problem is met once per task) and each path checked once."""

    def __init__(self, tf: TaskFile, base_dir: Path, file: str) -> None:
        self.tf, self.base_dir, self.file = tf, base_dir, file
        self.override: str | None = None
        self.problems: list[Problem] = []
        self._paths: dict[tuple[Path_, bool], Path | None] = {}
        self.texts: dict[Path, UserText | None] = {}
        self.json_files: dict[Path, dict[str, Any] | str] = {}
        self.skill_dirs: dict[Path, tuple[Skill, ...] | str] = {}
        self.known = {**BUILTIN_PROVIDERS, **_providers(tf, base_dir, self.problem)}

    def use_model(self, model_override: str | None) -> None:
        """Resolve the next tasks on `model_override` (`--model` or a `matrix.model`)."""
        self.override = model_override
        if model_override is None:
            return
        if not re.fullmatch(MODEL_RE, model_override):
            self.add(
                Problem(
                    COMMAND_LINE,
                    None,
                    "--model",
                    "must look like provider/model, e.g. local/smollm2",
                )
            )
        elif (name := model_override.split("/", 1)[0]) not in self.known:
            self.add(
                Problem(COMMAND_LINE, None, "--model", unknown_provider(name, set(self.known)))
            )

    def add(self, found: Problem) -> None:
        if found not in self.problems:
            self.problems.append(found)

    def problem(self, path: Path_, message: str) -> None:
        self.add(Problem(self.file, line_for(path, self.tf._lines.lines), dotted(path), message))

    def path(self, at: Path_, raw: str, *, want_dir: bool) -> Path | None:
        """The path `raw` names, checked (and blamed on `at`) once."""
        if (at, want_dir) not in self._paths:
            found, wrong = check_path(self.base_dir, raw, want_dir)
            if wrong is not None:
                self.problem(at, wrong)
            self._paths[at, want_dir] = found
        return self._paths[at, want_dir]

    def layered_file(self, i: int, t: TaskSpec, name: str) -> Path | None:
        """A file field: the task's own, else the defaults'."""
        raw = getattr(layer_of(t, self.tf.defaults, name), name)
        return None if raw is None else self.path(where(t, i, name), raw, want_dir=False)

    def layered_text(self, i: int, t: TaskSpec, name: str, path: Path | None) -> UserText | None:
        """The file field `name`, found at `path`: the run gets text, and a file it cannot
        use is blamed on the field's line here."""
        return self.text(where(t, i, name), path)

    def text(self, at: Path_, path: Path | None) -> UserText | None:
        """The file at `path` (blamed on `at`), read once per pass whoever names it."""
        if path is None or not path.is_file():  # `path` has said what is wrong
            return None
        if path not in self.texts:
            try:
                raw = path.read_bytes()[: MAX_TEXT_FILE_BYTES + 1]
            except OSError as exc:
                self.texts[path] = UserText(None, "", f"cannot read {path}: {exc.strerror or exc}")
            else:
                text, wrong = text_of(path, raw)
                digest = hashlib.sha256(raw).hexdigest()
                self.texts[path] = UserText(None if text is None else text.strip(), digest, wrong)
        found = self.texts[path]
        if found is not None and found.wrong is not None:
            self.problem(at, esc(found.wrong))
        return found

    def roots(self, i: int, t: TaskSpec) -> tuple[Path, ...]:
        raws = layer_of(t, self.tf.defaults, "writable_roots").writable_roots
        at = where(t, i, "writable_roots")
        found = [self.path((*at, j), raw, want_dir=True) for j, raw in enumerate(raws or ())]
        return tuple(p for p in found if p is not None)

    def provider(self, model: str, model_path: Path_) -> ProviderConfig | None:
        """The provider `model` names, or None (with the problem said where it belongs)."""
        name = model.partition("/")[0]
        provider = self.known.get(name)
        if provider is None:
            if self.override is None:  # only for a TaskFile that parse_task_file did not make
                self.problem(model_path, unknown_provider(name, set(self.known)))
            return None
        if PLACEHOLDER_HOST not in provider.base_url:
            return provider
        wrong = (
            f"{esc(model)} uses provider {name!r}, whose base_url is the placeholder "
            f"{esc(provider.base_url)}; set providers.{name}.base_url to your endpoint, "
            "e.g. https://<resource>.openai.azure.com/openai/v1"
        )
        matrix = self.tf.matrix.model if self.tf.matrix else ()
        if self.override is None:
            self.problem(model_path, wrong)
        elif self.override in matrix:
            self.problem(("matrix", "model", matrix.index(self.override)), wrong)
        else:
            self.add(Problem(COMMAND_LINE, None, "--model", wrong))
        return None

    def task(self, i: int, t: TaskSpec) -> dict[str, Any] | None:
        d = self.tf.defaults
        repo = self.path(("tasks", i, "repo"), t.repo, want_dir=True)
        instructions = self.layered_file(i, t, "instructions_file")
        instructions_text = self.layered_text(i, t, "instructions_file", instructions)
        compact_prompt = self.layered_file(i, t, "compact_prompt_file")
        compact_text = self.layered_text(i, t, "compact_prompt_file", compact_prompt)
        model_path = where(t, i, "model")
        model = self.override or layer_of(t, d, "model").model
        provider_name, _, model_name = model.partition("/")
        provider = self.provider(model, model_path)
        if provider is None:
            return None
        roots = self.roots(i, t)
        extras = _extras(t, d, i, provider_name, self)
        entry = self.tf.models.get(model) or ModelConfig()
        _no_seed_on_responses(
            provider,
            (
                (("tasks", i), t.model_options),
                (("models", model), entry.model_options),
                (("defaults",), d.model_options),
            ),
            self.problem,
        )
        if self.problems or repo is None:
            return None
        api_model = entry.model or model_name
        return {
            **as_written(t, d),
            "id": t.id,
            "prompt": t.prompt,
            "turns": t.turns,
            "repo": repo,
            "provider_name": provider_name,
            "provider": provider,
            "model": model_name,
            "instructions_file": instructions,
            "instructions": instructions_text.text if instructions_text else None,
            "instructions_sha256": instructions_text.sha256 if instructions_text else None,
            "writable_roots": roots,
            "model_options": merged_layers(
                ModelOptions,
                ModelOptions.model_validate(codex_defaults(api_model)),
                d.model_options,
                entry.model_options,
                t.model_options,
            ),
            "tags": t.tags,
            "repo_named": written(t, "repo"),
            "api_model": api_model,
            "secrets": self.tf.secrets,
            "compact_prompt_file": compact_prompt,
            "compact_prompt": compact_text.text if compact_text else None,
            "compact_prompt_sha256": compact_text.sha256 if compact_text else None,
            **_model_fields(
                provider_name,
                api_model,
                self.tf.models,
                layer_of(t, d, "auto_compact_limit").auto_compact_limit,
                alias=model,
                provider_cfg=provider,
            ),
            **extras,
        }


def layer_of(t: TaskSpec, d: Settings, name: str) -> Settings:
    """Where the setting `name` of task `t` comes from: the task when it writes it, else
    `defaults` (holding the built-in value when the file does not write it either)."""
    return t if written(t, name) else d


def where(t: TaskSpec, i: int, name: str) -> Path_:
    """The field path of setting `name` of task `i`: the task's own, or the defaults'."""
    return ("tasks", i, name) if written(t, name) else ("defaults", name)


def as_written(t: TaskSpec, d: Settings) -> dict[str, Any]:
    """Every `RunSettings` field of task `t` over `defaults` over the built-in value; a
    section (`limits`, `git`, ...) is merged field by field. Fields the config pass
    completes from elsewhere (the model table, the file system) are replaced by `task`."""
    values: dict[str, Any] = {}
    for name in RunSettings.model_fields:
        own, default = getattr(t, name), getattr(d, name)
        if isinstance(default, Frozen):
            values[name] = merged_layers(type(default), default, own)
        else:
            values[name] = own if written(t, name) else default
    return values


_AZURE_HOSTS = (
    "openai.azure.",
    "cognitiveservices.azure.",
    "aoai.azure.",
    "azure-api.",
    "azurefd.",
    "windows.net/openai",
)


def _providers(
    tf: TaskFile, base_dir: Path, problem: Callable[[Path_, str], None]
) -> dict[str, ProviderConfig]:
    """Codex's `[model_providers.*]` (when `codex_config` says so), then the task file's.

    Azure endpoints get `store: true` unless the file sets `store`, as Codex does: Azure
    drops reasoning items between requests otherwise.
    """
    found: dict[str, ProviderConfig] = {}
    if tf.codex_config:
        path = (
            default_path(os.environ) if tf.codex_config is True else base_dir / str(tf.codex_config)
        )
        if path.is_file():
            found.update(load_codex_providers(path))
        else:
            problem(("codex_config",), f"{esc(str(path))} is not a file")
    for name, p in tf.providers.items():
        base = found.get(name) or BUILTIN_PROVIDERS.get(name)
        if base is not None:  # field by field, like `defaults`
            p = base.model_copy(update={f: getattr(p, f) for f in p.model_fields_set})
        elif not p.base_url:
            problem(
                ("providers", name),
                "base_url is required for a provider that is not "
                f"built in ({', '.join(BUILTIN_PROVIDERS)})",
            )
        found[name] = p
    return {
        name: p.model_copy(update={"store": True})
        if "store" not in p.model_fields_set and any(h in p.base_url for h in _AZURE_HOSTS)
        else p
        for name, p in found.items()
    }


def _extras(
    t: TaskSpec,
    d: Settings,
    i: int,
    provider_name: str,
    r: Resolver,
) -> dict[str, Any]:
    """MCP servers, skills, the hosted web search and the output schema of one task."""
    provider, base_dir, problem = r.known[provider_name], r.base_dir, r.problem

    servers = _mcp_servers(t, d, i, base_dir, problem)
    skills = _skills(layer_of(t, d, "skills").skills or (), where(t, i, "skills"), r)
    web_search = layer_of(t, d, "web_search").web_search
    if web_search:
        from runner.tools.hosted import web_search_problem

        own = BUILTIN_PROVIDERS.get(provider_name)
        builtin = own is not None and provider.base_url == own.base_url  # not moved
        if wrong := web_search_problem(provider_name, provider.wire_api, builtin=builtin):
            problem(where(t, i, "web_search"), wrong)
    given = layer_of(t, d, "output_schema").output_schema
    schema = _json_file(given, where(t, i, "output_schema"), r) if isinstance(given, str) else given
    if schema is not None:
        from runner.output_schema import schema_problem

        wrong = schema_problem(schema)
        if wrong is not None:
            problem(where(t, i, "output_schema"), wrong)
    return {
        "mcp_servers": servers,
        "skills": skills,
        "output_schema": schema,
    }


def _mcp_servers(
    t: TaskSpec, d: Settings, i: int, base_dir: Path, problem: Callable[[Path_, str], None]
) -> dict[str, McpServerConfig]:
    """The defaults' servers, then the task's (same name: the task's wins), cwd resolved."""
    servers: dict[str, McpServerConfig] = {}
    for layer, owner in ((d.mcp_servers, ("defaults",)), (t.mcp_servers, ("tasks", i))):
        for name, server in layer.items():
            if server.cwd is not None:
                cwd, wrong = check_path(base_dir, server.cwd, want_dir=True)
                if wrong is not None:
                    problem((*owner, "mcp_servers", name, "cwd"), wrong)
                server = server.model_copy(update={"cwd": str(cwd)})
            servers[name] = server
    return servers


def _skills(folders: tuple[str, ...], at: Path_, r: Resolver) -> tuple[Skill, ...]:
    skills: list[Skill] = []
    problem = r.problem
    for j, raw in enumerate(folders):
        folder, wrong = check_path(r.base_dir, raw, want_dir=True)
        if folder is None or wrong is not None:
            problem((*at, j), wrong or "not a directory")
            continue
        if folder not in r.skill_dirs:  # read once, however many tasks name it
            try:
                r.skill_dirs[folder] = tuple(load_skills(folder))
            except SkillError as exc:
                r.skill_dirs[folder] = esc(str(exc))
        found = r.skill_dirs[folder]
        if isinstance(found, str):
            problem((*at, j), found)
        else:
            skills.extend(found)
    names = [s.name for s in skills]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problem(at, f"two skills are named {name!r}; names must be unique")
    return tuple(skills)


def _json_file(raw: str, path: Path_, r: Resolver) -> dict[str, Any] | None:
    found, wrong = check_path(r.base_dir, raw, want_dir=False)
    if found is None or wrong is not None:
        r.problem(path, wrong or "not a file")
        return None
    if found not in r.json_files:  # read once, however many tasks name it
        r.json_files[found] = _read_json(found)
    value = r.json_files[found]
    if isinstance(value, str):
        r.problem(path, value)
        return None
    return value


def _read_json(found: Path) -> dict[str, Any] | str:
    """The JSON object in `found`, or what is wrong with it."""
    try:
        value = json_loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"cannot read JSON from {esc(str(found))}: {esc(str(exc))}"
    if not isinstance(value, dict):
        return f"{esc(str(found))} must hold a JSON object (a schema)"
    return value


def _model_fields(
    provider: str,
    model: str,
    overrides: dict[str, ModelConfig],
    compact_limit: int | None = None,
    *,
    alias: str = "",
    provider_cfg: ProviderConfig | None = None,
) -> dict[str, Any]:
    """Context window, compaction limit and price, each from the first that gives it: the
    task's `auto_compact_limit`, the `models:` entry (an alias's own, then the real
    model's), the provider's settings, the built-in table."""
    from runner.models import ModelInfo, model_info

    over = {
        k: ModelInfo(
            v.context_window,
            v.auto_compact_limit,
            v.price,
        )
        for k, v in overrides.items()
    }
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
    return {
        "context_window": info.context_window,
        "auto_compact_limit": compact_limit or info.compact_limit,
        "price": info.price,
    }


def _no_seed_on_responses(
    provider: ProviderConfig,
    layers: Sequence[tuple[Path_, ModelOptions | None]],
    problem: Callable[[Path_, str], None],
) -> None:
    """The Responses API has no `seed` (OpenAI refuses the request): said here, once,
    rather than by every request of the run."""
    if provider.wire_api != "responses":
        return
    for where, opts in layers:
        if opts is not None and opts.seed is not None:
            problem(
                (*where, "model_options", "seed"),
                "the Responses API has no seed (OpenAI refuses the request); it is "
                "sent only to providers with wire_api: chat",
            )
            return
