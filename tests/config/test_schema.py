"""Each setting is declared once (`RunSettings`, with its default) and the config pass
carries it from the task file to the run without naming it: a setting added to `Settings`
alone, or redeclared on `Run` or on a matrix `Variant`, fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from runner.config import Run, RunSettings, Settings, Sources, Variant, load_runs

SAMPLES: dict[str, tuple[Any, Any]] = {
    "developer_instructions": ("from defaults", "from the task"),
    "tools": (["shell"], ["shell", "update_plan"]),
    "sandbox": ("read-only", "workspace-write"),
    "network_access": (True, False),
    "limits": ({"max_requests": 7}, {"max_requests": 500}),
    "model_options": ({"temperature": 0.5}, {"temperature": 0.0}),
    "shell_timeout_ms": (1234, 10_000),
    "apply_patch_tool": ("freeform", "function"),
    "git": ({"keep": "patch"}, {"keep": "branch"}),
    "check": ("make test", "true"),
    "check_timeout_s": (12.0, 600.0),
    "auto_compact_limit": (5000, 300),
    "mcp_servers": (
        {"calc": {"url": "http://127.0.0.1:1/mcp"}},
        {"calc": {"url": "http://127.0.0.1:2/mcp"}},
    ),
    "web_search": (True, False),
    "current_date": ("2026-01-31", "2026-02-01"),
    "timezone": ("Europe/Paris", "UTC"),
    "environment": ({"artifacts": ["logs/out.txt"]}, {"backend": "local", "artifacts": []}),
}
"""Per setting: a value for `defaults:` and another for a task. Where one value is the
built-in default, a task writing it must still win over `defaults:`."""

COMPLETED = {"model_options", "auto_compact_limit"}
"""Completed from the model table when no file writes them, so a run does not hold the
declared default."""


def _fields(model: type[BaseModel], name: str) -> tuple[Any, ...]:
    info = model.model_fields[name]
    return info.annotation, info.default, info.metadata


def test_settings_and_runs_take_each_setting_from_its_one_declaration() -> None:
    for name in RunSettings.model_fields:
        declared = _fields(RunSettings, name)
        assert _fields(Settings, name) == declared, f"Settings redeclares {name}"
        assert _fields(Run, name) == declared, f"Run redeclares {name}"


VARIANT_OWN = {"name", "prompt_template", "reasoning_effort"}
"""What only a variant says: its name, a template for the prompt, and a shorthand for
`model_options.reasoning_effort`; every other field of a variant is a setting."""


def test_a_variant_takes_its_settings_from_their_one_declaration() -> None:
    settings = {**Sources.model_fields, **RunSettings.model_fields}
    overrides = set(Variant.model_fields) - VARIANT_OWN
    assert overrides == {
        "instructions_file",
        "developer_instructions",
        "tools",
        "model_options",
        "environment",
    }
    for name in overrides:
        assert _fields(Variant, name) == _fields(Settings, name), f"Variant redeclares {name}"
        assert name in settings
    assert not VARIANT_OWN & set(Settings.model_fields)


def test_a_variant_overrides_only_what_it_writes(tmp_path: Path) -> None:
    """A setting a variant leaves out, or writes null, is the task's; one it writes wins,
    even when it writes the built-in default."""
    data = {
        "version": 1,
        "defaults": {"tools": ["shell"], "developer_instructions": "from defaults"},
        "matrix": {
            "variant": [
                {"name": "plain"},
                {"name": "nulls", "tools": None, "developer_instructions": None},
                {"name": "own", "tools": ["shell", "apply_patch", "update_plan"]},
            ]
        },
        "tasks": [{"id": "t", "prompt": "p", "model": "openai/gpt-5.5"}],
    }
    found = load_runs(_write(tmp_path / "v.yaml", data), offline=True, env={})
    got = {r.variant: (r.tools, r.developer_instructions) for r in found}
    assert got == {
        "plain": (("shell",), "from defaults"),
        "nulls": (("shell",), "from defaults"),
        "own": (("shell", "apply_patch", "update_plan"), "from defaults"),
    }
    with pytest.raises(ValueError, match="each tool may be listed once"):
        Variant.model_validate({"name": "v", "tools": ["shell", "shell"]})


def test_every_other_setting_is_one_the_config_pass_resolves() -> None:
    # A field declared on Settings itself would be read from the file and never reach a
    # run; a `Sources` field reaches it as what the pass made of it, under its own name.
    assert set(Settings.model_fields) == set(RunSettings.model_fields) | set(Sources.model_fields)
    assert set(Sources.model_fields) < set(Run.model_fields)
    assert not set(Sources.model_fields) & set(RunSettings.model_fields)


def test_every_setting_has_a_sample_below() -> None:
    assert set(SAMPLES) == set(RunSettings.model_fields)


def _write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))  # JSON is YAML, and keeps dates text
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """One run per way a setting can be chosen: built in, from `defaults:`, the task's
    own, and a task writing null (not written)."""
    tmp = tmp_path_factory.mktemp("settings")
    task = {"prompt": "p", "model": "openai/gpt-5.5"}  # a provider with web_search
    plain = _write(tmp / "plain.yaml", {"version": 1, "tasks": [{"id": "builtin", **task}]})
    layered = {
        "version": 1,
        "defaults": {name: pair[0] for name, pair in SAMPLES.items()},
        "tasks": [
            {"id": "inherits", **task},
            {"id": "own", **task, **{name: pair[1] for name, pair in SAMPLES.items()}},
            {"id": "null", **task, **dict.fromkeys(SAMPLES)},
        ],
    }
    found = [*load_runs(plain, offline=True, env={})]
    found += load_runs(_write(tmp / "layered.yaml", layered), offline=True, env={})
    return {r.id: r for r in found}


def _holds(run: Run, name: str, written: Any) -> bool:
    """Whether the run's `name` is `written` as the task file would validate it; of a
    section only the written fields count (the others keep their defaults)."""
    want = getattr(Settings.model_validate({name: written}), name)
    got = getattr(run, name)
    if isinstance(want, BaseModel):
        return all(getattr(got, k) == getattr(want, k) for k in written)
    return bool(got == want)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_a_setting_reaches_the_run_task_over_defaults_over_built_in(
    name: str, runs: dict[str, Run]
) -> None:
    in_defaults, in_task = SAMPLES[name]
    if name not in COMPLETED:
        assert getattr(runs["builtin"], name) == RunSettings.model_fields[name].default
    assert _holds(runs["inherits"], name, in_defaults)
    assert _holds(runs["own"], name, in_task)
    assert _holds(runs["null"], name, in_defaults)
