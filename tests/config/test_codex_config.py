"""runner/config/codex_config.py: Codex's `[model_providers.*]` tables read as our
providers, each problem located at its table or key, and the file found by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import parse_task_file, resolve
from runner.config.codex_config import default_path, load_codex_providers
from runner.errors import ConfigError
from tests.support.cli import run_cli


def task_text(model: str) -> str:
    return f"version: 1\ndefaults:\n  model: {model}\ntasks:\n  - id: a\n    prompt: do it\n"


CODEX_TOML = """\
model = "gpt-5"

[model_providers.azure-prod]
name = "Azure production"
base_url = "https://prod.openai.azure.com/openai"
env_key = "AZURE_OPENAI_API_KEY"
query_params = { api-version = "2025-04-01-preview" }
wire_api = "responses"
request_max_retries = 2
stream_max_retries = 7
stream_idle_timeout_ms = 45000
requires_openai_auth = false

[model_providers.local-vllm]
base_url = "http://localhost:8000/v1"
env_http_headers = { "X-Team" = "TEAM_ID" }
http_headers = { "X-Source" = "runner" }
"""


def test_codex_tables_map_to_providers(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(CODEX_TOML)
    found = load_codex_providers(path)
    az = found["azure-prod"]
    assert (az.name, az.env_key, az.query_params) == (
        "Azure production",
        "AZURE_OPENAI_API_KEY",
        {"api-version": "2025-04-01-preview"},
    )
    assert (az.request_max_retries, az.stream_max_retries, az.stream_idle_timeout_s) == (2, 7, 45.0)
    vllm = found["local-vllm"]
    assert vllm.env_http_headers == {"X-Team": "TEAM_ID"}
    assert vllm.http_headers == {"X-Source": "runner"}


@pytest.mark.parametrize(
    ("table", "line", "field", "message"),
    [
        (
            '[model_providers.p]\nbase_url = "https://x/v1"\nexperimental_bearer_token = "sk"\n',
            3,
            "model_providers.p.experimental_bearer_token",
            "set `env_key`",
        ),
        (
            '[model_providers.p]\nbase_url = "https://x/v1"\n\nretries = 3\n',
            4,
            "model_providers.p.retries",
            "unknown key; allowed: name, base_url",
        ),
        ('[model_providers.p]\nenv_key = "K"\n', 1, "model_providers.p.base_url", "required"),
        (
            '[model_providers.p]\nbase_url = "https://x/v1"\nwire_api = "grpc"\n',
            3,
            "model_providers.p.wire_api",
            "'responses' or 'chat'",
        ),
        (
            '[model_providers.p]\nbase_url = "https://x/v1"\nstream_idle_timeout_ms = -1\n',
            3,
            "model_providers.p.stream_idle_timeout_ms",
            "milliseconds",
        ),
        ("[model_providers.p\n", 1, "(syntax)", ""),
    ],
)
def test_codex_config_problems_are_located(
    tmp_path: Path, table: str, line: int, field: str, message: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text("# Codex\n" + table)
    with pytest.raises(ConfigError) as err:
        load_codex_providers(path)
    (p,) = err.value.problems
    assert (p.file, p.line, p.field) == (str(path), line + 1, field)
    assert message in p.message


def test_task_file_reads_codex_config_by_path_and_by_default(tmp_path: Path) -> None:
    (tmp_path / "codex.toml").write_text(CODEX_TOML)
    tf = parse_task_file(task_text("local-vllm/m") + "codex_config: codex.toml\n", "t.yaml")
    (t,) = resolve(tf, tmp_path)
    assert (t.provider_name, t.provider.base_url) == ("local-vllm", "http://localhost:8000/v1")
    assert default_path({"CODEX_HOME": "/x"}) == Path("/x/config.toml")
    assert default_path({"HOME": "/h"}) == Path("/h/.codex/config.toml")
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(CODEX_TOML)
    tasks = tmp_path / "t.yaml"
    tasks.write_text(task_text("azure-prod/gpt-5") + "codex_config: true\n")
    ok = run_cli("validate", tasks, "--offline", env={"CODEX_HOME": str(home)})
    assert ok.returncode == 0, ok.stderr
    missing = run_cli("validate", tasks, env={"CODEX_HOME": str(tmp_path / "none")})
    assert missing.returncode == 2 and "codex_config" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_an_empty_codex_home_falls_back_to_home() -> None:
    assert default_path({"CODEX_HOME": "", "HOME": "/h"}) == Path("/h/.codex/config.toml")


def test_a_file_that_is_not_utf8_or_not_there_is_one_problem(tmp_path: Path) -> None:
    bad = tmp_path / "config.toml"
    bad.write_bytes(b'[model_providers.p]\nname = "\xff"\n')
    with pytest.raises(ConfigError) as err:
        load_codex_providers(bad)
    assert [(p.line, p.field, p.message) for p in err.value.problems] == [
        (None, "(file)", "not UTF-8 text (byte 28)")
    ]
    with pytest.raises(ConfigError) as err:
        load_codex_providers(tmp_path / "none.toml")
    (p,) = err.value.problems
    assert (p.field, p.message) == ("(file)", "cannot read: No such file or directory")


def test_ids_and_tables_are_checked_where_they_are_written(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[model_providers."a.b"]\nbase_url = "https://x/v1"\n\n'
        "[model_providers.'ok']\n"
        'base_url = "https://x/v1"\nauth = { command = "cat key" }\n'
    )
    with pytest.raises(ConfigError) as err:
        load_codex_providers(path)
    assert [(p.line, p.field) for p in err.value.problems] == [
        (1, "model_providers.a.b"),
        (6, "model_providers.ok.auth"),
    ]
    assert "letters, digits" in err.value.problems[0].message
    assert "export it and set `env_key`" in err.value.problems[1].message


def test_model_providers_that_is_no_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('model = "m"\nmodel_providers = "openai"\n')
    with pytest.raises(ConfigError) as err:
        load_codex_providers(path)
    assert [(p.line, p.field, p.message) for p in err.value.problems] == [
        (2, "model_providers", "must be a table of providers")
    ]


def test_ignored_keys_are_dropped_and_a_file_without_providers_gives_none(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[model_providers.p]\nbase_url = "https://x/v1"\nsupports_websockets = true\n'
        'env_key_instructions = "see wiki"\n'
    )
    (p,) = load_codex_providers(path).values()
    assert p.base_url == "https://x/v1"
    path.write_text('model = "gpt-5"\n')
    assert load_codex_providers(path) == {}


@pytest.mark.parametrize("depth", [600, 100_000])
def test_a_table_nested_too_deeply_is_one_problem(tmp_path: Path, depth: int) -> None:
    """tomllib recurses once per level: 600 levels ended in a RecursionError."""
    deep = tmp_path / "config.toml"
    deep.write_text("x = " + "[" * depth + "]" * depth + "\n")
    with pytest.raises(ConfigError) as err:
        load_codex_providers(deep)
    (p,) = err.value.problems
    assert (p.file, p.field) == (str(deep), "(syntax)") and "nested too deeply" in p.message
