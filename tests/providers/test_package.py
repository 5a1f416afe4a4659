"""Providers: auth and headers, Azure's quirks, the example configs,
hosted web search. Wire behaviour is checked on a real loopback server through the CLI."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.config import BUILTIN_PROVIDERS, parse_task_file, resolve
from runner.errors import ConfigError
from runner.http import provider_headers
from tests.support import cli
from tests.support.loopback import reply_message

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "configs" / "providers"


def run_cli(
    *args: str | Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli.run_cli(*args, env=env)


def headers_for(name: str, env: dict[str, str]) -> tuple[dict[str, str], str | None]:
    p = BUILTIN_PROVIDERS[name]
    return provider_headers(
        http_headers=p.http_headers,
        env_http_headers=p.env_http_headers,
        env_key=p.env_key,
        auth=p.auth,
        env=env,
    )


# ---------------------------------------------------------------- headers and keys


def test_openai_sends_organization_and_project_only_when_set() -> None:
    assert headers_for("openai", {"OPENAI_API_KEY": "sk-1"}) == ({}, "sk-1")
    env = {"OPENAI_API_KEY": "sk-1", "OPENAI_ORGANIZATION": "org-9", "OPENAI_PROJECT": ""}
    assert headers_for("openai", env) == ({"OpenAI-Organization": "org-9"}, "sk-1")


def test_azure_key_goes_in_api_key_not_bearer() -> None:
    headers, bearer = headers_for("azure", {"AZURE_OPENAI_API_KEY": "az-1"})
    assert headers == {"api-key": "az-1"} and bearer is None
    assert BUILTIN_PROVIDERS["azure"].store is True


def task_text(providers: str, model: str, extra: str = "") -> str:
    return (
        f"version: 1\n{providers}defaults:\n  model: {model}\n{extra}"
        "tasks:\n  - id: a\n    prompt: do it\n"
    )


def test_azure_endpoints_get_store_unless_set(tmp_path: Path) -> None:
    text = task_text(
        "providers:\n"
        "  az: {base_url: 'https://me.openai.azure.com/openai/v1'}\n"
        "  az2: {base_url: 'https://me.openai.azure.com/openai/v1', store: false}\n"
        "  other: {base_url: 'https://example.com/v1'}\n",
        "az/gpt-5",
    )
    tf = parse_task_file(text, "t.yaml")
    stores = {
        m: resolve(tf, tmp_path, model_override=m)[0].provider.store
        for m in ("az/x", "az2/x", "other/x")
    }
    assert stores == {"az/x": True, "az2/x": False, "other/x": False}


def test_wire_sends_api_key_query_and_env_headers(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread([reply_message("ok")])
    tasks = tmp_path / "t.yaml"
    tasks.write_text(f"""version: 1
providers:
  az:
    base_url: "{srv.base_url}"
    env_key: AZ_TEST_KEY
    auth: api-key
    query_params: {{api-version: 2025-04-01-preview}}
    env_http_headers: {{x-team: AZ_TEAM, x-absent: AZ_ABSENT}}
defaults: {{model: az/my-deployment}}
tasks:
  - {{id: a, repo: "{git_repo}", prompt: say ok}}
""")
    res = run_cli(
        "run",
        tasks,
        "--out",
        tmp_path / "out",
        env={"AZ_TEST_KEY": "az-secret-0123456789", "AZ_TEAM": "blue"},
    )
    assert res.returncode == 0, res.stderr
    (req,) = srv.requests
    assert req.headers["api-key"] == "az-secret-0123456789"
    assert "authorization" not in req.headers and "x-absent" not in req.headers
    assert req.headers["x-team"] == "blue"
    assert req.query == {"api-version": ["2025-04-01-preview"]}
    assert req.json["model"] == "my-deployment" and req.json["store"] is False


def test_validate_refuses_the_azure_placeholder_endpoint(tmp_path: Path) -> None:
    """The built-in azure provider has no endpoint of its own: `validate` says so where the
    model is named, as `run` does, unless the file sets providers.azure.base_url."""
    tasks = tmp_path / "t.yaml"
    tasks.write_text(task_text("", "azure/my-deployment"))
    res = run_cli("validate", tasks)
    assert res.returncode == 2, res.stdout
    assert f"{tasks}:3: defaults.model" in res.stderr and "YOUR-RESOURCE" in res.stderr
    assert "providers.azure.base_url" in res.stderr and "Traceback" not in res.stderr
    flag = run_cli("validate", tasks, "--model", "openai/gpt-5", "--model", "azure/dep")
    assert flag.returncode == 2 and "(command line): --model" in flag.stderr
    matrix = tmp_path / "m.yaml"
    matrix.write_text(task_text("", "openai/gpt-5", "matrix: {model: [openai/x, azure/y]}\n"))
    res = run_cli("validate", matrix)
    assert res.returncode == 2 and f"{matrix}:4: matrix.model[1]" in res.stderr, res.stderr
    run = run_cli("run", tasks, "--out", tmp_path / "out", env={"AZURE_OPENAI_API_KEY": "k"})
    assert run.returncode == 2 and "YOUR-RESOURCE" in run.stderr
    tasks.write_text(
        task_text(
            "providers:\n  azure: {base_url: 'https://me.openai.azure.com/openai/v1'}\n",
            "azure/dep",
        )
    )
    ok = run_cli("validate", tasks, "--offline")
    assert ok.returncode == 0, ok.stderr


# ---------------------------------------------------------------- hosted web search


def test_web_search_needs_a_responses_provider(tmp_path: Path) -> None:
    text = task_text("", "local/smollm2", "  web_search: true\n")
    with pytest.raises(ConfigError) as err:
        resolve(parse_task_file(text, "t.yaml"), tmp_path)
    (p,) = err.value.problems
    assert (p.line, p.field) == (4, "defaults.web_search")
    assert "Chat Completions" in p.message


@pytest.mark.parametrize("provider", ["ollama", "lmstudio", "vllm"])
def test_web_search_is_refused_for_builtin_local_servers(tmp_path: Path, provider: str) -> None:
    text = task_text("", f"{provider}/m", "  web_search: true\n")
    with pytest.raises(ConfigError) as err:
        resolve(parse_task_file(text, "t.yaml"), tmp_path)
    (p,) = err.value.problems
    assert (p.line, p.field) == (4, "defaults.web_search")
    assert f"built-in {provider!r} provider" in p.message


def test_web_search_is_allowed_for_openai_azure_and_own_providers(tmp_path: Path) -> None:
    text = task_text(
        "providers:\n"
        "  azure: {base_url: 'https://me.openai.azure.com/openai/v1'}\n"
        "  proxy: {base_url: 'https://proxy.example/v1'}\n"
        "  ollama: {base_url: 'https://gateway.example/v1'}\n",
        "openai/gpt-5",
        "  web_search: true\n",
    )
    tf = parse_task_file(text, "t.yaml")
    for model in ("openai/gpt-5", "azure/dep", "proxy/m", "ollama/m"):
        (t,) = resolve(tf, tmp_path, model_override=model)
        assert t.web_search is True


def test_validate_refuses_web_search_on_ollama(tmp_path: Path) -> None:
    tasks = tmp_path / "t.yaml"
    tasks.write_text(
        "version: 1\ndefaults:\n  model: ollama/qwen3\n  web_search: true\n"
        "tasks:\n  - id: a\n    prompt: do it\n"
    )
    res = run_cli("validate", tasks)
    assert res.returncode == 2, res.stdout
    assert f"{tasks}:4: defaults.web_search" in res.stderr and "Traceback" not in res.stderr


def test_web_search_is_sent_after_the_builtin_tools(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    srv = loopback_thread([reply_message("ok")])
    tasks = tmp_path / "t.yaml"
    tasks.write_text(f"""version: 1
providers: {{fake: {{base_url: "{srv.base_url}"}}}}
defaults: {{model: fake/m, web_search: true}}
tasks:
  - {{id: a, repo: "{git_repo}", prompt: say ok}}
""")
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    tools = srv.requests[0].json["tools"]
    assert [t.get("name", t["type"]) for t in tools] == [
        "shell",
        "update_plan",
        "apply_patch",
        "web_search",
    ]
    assert tools[-1] == {"type": "web_search"}


# ---------------------------------------------------------------- example configs


def test_every_example_config_validates() -> None:
    files = sorted(CONFIGS.glob("*.yaml"))
    assert {f.stem for f in files} >= {
        "openai",
        "azure",
        "ollama",
        "lmstudio",
        "vllm",
        "codex-config",
        "mcp",
    }
    env = {"CODEX_HOME": str(CONFIGS)}
    for f in files:  # as a lint job would: no keys, repositories of the user's own
        res = run_cli("validate", f, "--offline", env=env)
        assert res.returncode == 0, f"{f.name}: {res.stderr}"
        assert json.dumps(res.stderr).count("error") == 0


def test_store_true_sends_item_ids_back(loopback_thread: Any, tmp_path: Path) -> None:
    """Items go back with their ids either way, as Codex 0.169 sends them (Azure's
    `store: true` resolves them server-side; `store: false` resolves each from its
    content, reasoning from its encrypted content)."""
    from tests.support.cli import run_cli, write_tasks
    from tests.support.loopback import per_conversation, reply_function_call, reply_message

    def script(req: Any, i: int) -> Any:
        if i == 0:
            return reply_function_call("shell", {"command": ["true"]}, call_id="c0")
        return reply_message("done")

    for store in (True, False):
        srv = loopback_thread(per_conversation(script))
        d = tmp_path / str(store)
        d.mkdir()
        tasks = write_tasks(d, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
        tasks.write_text(
            tasks.read_text().replace(
                "env_key: FAKE_API_KEY}", f"env_key: FAKE_API_KEY, store: {str(store).lower()}}}"
            )
        )
        assert run_cli("run", tasks, "--out", d / "o").returncode == 0
        second = srv.requests[1].json
        assert second["store"] is store
        call = next(x for x in second["input"] if x.get("type") == "function_call")
        assert call["id"] == srv.requests[0].output[0]["id"]
