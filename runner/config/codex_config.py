"""Codex's `config.toml` `[model_providers.*]` tables as our providers.

So that a Codex user's endpoints work unchanged: `codex_config: true` in the task file
reads `$CODEX_HOME/config.toml` (default `~/.codex/config.toml`). Keys with the same
meaning map one to one; `stream_idle_timeout_ms` becomes seconds; keys that only matter
to Codex's own transports are accepted and ignored; credentials that Codex would take
from a command, AWS or a literal token are refused with a message, since the runner
reads keys from the environment only. TOML has no line numbers in `tomllib`, so each
problem is located by finding its table and key in the text.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.config.schema import ProviderConfig
from runner.errors import ConfigError, Problem
from runner.nesting import toml_loads

SAME = (
    "name",
    "base_url",
    "env_key",
    "wire_api",
    "query_params",
    "http_headers",
    "env_http_headers",
    "request_max_retries",
    "stream_max_retries",
)
IGNORED = (
    "env_key_instructions",
    "requires_openai_auth",
    "supports_websockets",
    "websocket_connect_timeout_ms",
)
REFUSED = {
    "experimental_bearer_token": "a key written in the file; set `env_key` to the name of "
    "an environment variable holding it instead",
    "auth": "a key from a command; export it and set `env_key` instead",
    "aws": "AWS SigV4 signing (Bedrock) is not supported",
}


def default_path(env: Mapping[str, str]) -> Path:
    home = env.get("CODEX_HOME")
    if home:
        return Path(home) / "config.toml"
    return Path(env.get("HOME") or Path.home()) / ".codex" / "config.toml"


def load_codex_providers(path: Path) -> dict[str, ProviderConfig]:
    """Every `[model_providers.<id>]` of the file; ConfigError with located problems."""
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
        data = toml_loads(text)
    except OSError as exc:
        raise ConfigError(
            [Problem(file, None, "(file)", f"cannot read: {exc.strerror or exc}")]
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem(file, None, "(file)", f"not UTF-8 text (byte {exc.start})")]
        ) from None
    except tomllib.TOMLDecodeError as exc:
        at = re.search(r"\(at line (\d+)", str(exc))  # tomllib gives lineno from 3.14 only
        raise ConfigError(
            [Problem(file, int(at.group(1)) if at else None, "(syntax)", str(exc).split(" (at")[0])]
        ) from None
    except ValueError as exc:  # too deep, or an integer of more digits than Python converts
        raise ConfigError([Problem(file, None, "(syntax)", f"not valid TOML: {exc}")]) from None
    return providers_from_toml(data, text, file)


def providers_from_toml(data: dict[str, Any], text: str, file: str) -> dict[str, ProviderConfig]:
    """The mapping itself (pure): `data` as parsed, `text` only to find lines."""
    tables = data.get("model_providers", {})
    if not isinstance(tables, dict):
        raise ConfigError(
            [
                Problem(
                    file,
                    _line(text, None, "model_providers"),
                    "model_providers",
                    "must be a table of providers",
                )
            ]
        )
    out: dict[str, ProviderConfig] = {}
    problems: list[Problem] = []
    for pid, table in tables.items():
        field = f"model_providers.{pid}"
        if not re.fullmatch(r"[A-Za-z0-9_-]+", pid):
            problems.append(
                Problem(
                    file,
                    _line(text, pid, None),
                    field,
                    "provider ids may use only letters, digits, '_' and '-'",
                )
            )
            continue
        if not isinstance(table, dict):
            problems.append(Problem(file, _line(text, pid, None), field, "must be a table"))
            continue
        values, wrong = _mapped(table)
        for key, message in wrong:
            problems.append(Problem(file, _line(text, pid, key), f"{field}.{key}", message))
        if "base_url" not in table:
            wrong = [("base_url", "required: the endpoint, e.g. https://example.com/v1")]
            problems.append(Problem(file, _line(text, pid, None), f"{field}.base_url", wrong[0][1]))
        if wrong:
            continue
        try:
            out[pid] = ProviderConfig.model_validate(values)
        except ValidationError as exc:
            for err in exc.errors():
                key = str(err["loc"][0]) if err["loc"] else ""
                codex_key = "stream_idle_timeout_ms" if key == "stream_idle_timeout_s" else key
                msg = str(err["msg"]).replace("Input should be", "must be")
                if key == "base_url" and err["type"] == "missing":
                    msg = "required: the endpoint, e.g. https://example.com/v1"
                problems.append(
                    Problem(
                        file,
                        _line(text, pid, codex_key or None),
                        f"{field}.{codex_key}" if codex_key else field,
                        msg,
                    )
                )
    if problems:
        raise ConfigError(problems)
    return out


def _mapped(table: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    values: dict[str, Any] = {}
    wrong: list[tuple[str, str]] = []
    for key, value in table.items():
        if key in SAME:
            values[key] = value
        elif key == "stream_idle_timeout_ms":
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                values["stream_idle_timeout_s"] = value / 1000
            else:
                wrong.append((key, "must be a positive whole number of milliseconds"))
        elif key in IGNORED:
            continue
        elif key in REFUSED:
            wrong.append((key, f"not supported: {REFUSED[key]}"))
        else:
            allowed = ", ".join((*SAME, "stream_idle_timeout_ms", *IGNORED))
            wrong.append((key, f"unknown key; allowed: {allowed}"))
    return values, wrong


def _line(text: str, pid: str | None, key: str | None) -> int | None:
    """The line of `[model_providers.<pid>]` (or of `key` inside it); None if not found
    (an inline table, a dotted key elsewhere)."""
    lines = text.split("\n")
    if pid is None:
        for n, line in enumerate(lines, 1):
            if re.match(rf"\s*\[?\s*{re.escape(key or '')}\b", line):
                return n
        return None
    quoted = rf"(?:{re.escape(pid)}|\"{re.escape(pid)}\"|'{re.escape(pid)}')"
    header = re.compile(rf"\s*\[\s*model_providers\s*\.\s*{quoted}\s*\]")
    start = next((n for n, line in enumerate(lines, 1) if header.match(line)), None)
    if start is None or key is None:
        return start
    key_re = re.compile(rf"\s*(?:{re.escape(key)}|\"{re.escape(key)}\")\s*[=.]")
    for n in range(start, len(lines)):
        line = lines[n]
        if line.lstrip().startswith("["):
            break
        if key_re.match(line):
            return n + 1
    return start
