"""The model table: context windows, compaction limits and prices, and who overrides whom."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import expand, parse_task_file
from runner.items import Usage
from runner.models import FREE, ModelInfo, model_info, usd


def test_builtin_entries_and_the_ninety_percent_default() -> None:
    gpt5 = model_info("openai", "gpt-5")
    assert gpt5.context_window == 400_000 and gpt5.compact_limit == 360_000
    assert gpt5.price == usd(1.25, 0.125, 10.0)
    assert model_info("azure", "gpt-5").price == gpt5.price
    assert model_info("local", "smollm2").context_window == 8192


def test_unknown_models_and_proxies_get_no_price() -> None:
    assert model_info("openai", "gpt-99") == ModelInfo()
    # A proxy's "gpt-5" may be anything: no OpenAI price for it.
    assert model_info("my-proxy", "gpt-5").price is None
    # Local servers cost nothing per token, whatever the model is called.
    assert model_info("ollama", "gpt-5").price == FREE
    assert model_info("ollama", "qwen3").compact_limit is None


def test_overrides_go_field_by_field() -> None:
    over = {"openai/gpt-5": ModelInfo(context_window=200_000)}
    info = model_info("openai", "gpt-5", over)
    assert info.context_window == 200_000 and info.compact_limit == 180_000
    assert info.price == usd(1.25, 0.125, 10.0)


def test_price_cost_counts_cached_input_instead_of_input() -> None:
    u = Usage(input_tokens=1_000_000, cached_tokens=400_000, output_tokens=100_000)
    assert usd(2.0, 0.5, 8.0).cost(u) == pytest.approx(0.6 * 2 + 0.4 * 0.5 + 0.1 * 8)


def _runs(text: str) -> dict[str, tuple[int | None, int | None]]:
    tf = parse_task_file(text, "t.yaml")
    return {
        r.name: (r.context_window, r.auto_compact_limit)
        for r in expand(tf, Path("."), file="t.yaml")
    }


def test_precedence_task_over_models_over_provider_over_table() -> None:
    base = (
        "version: 1\n"
        "providers:\n  srv: {base_url: 'http://127.0.0.1:9/v1', context_window: 32000}\n"
        "models:\n  openai/gpt-5: {auto_compact_limit: 100000}\n"
        "  srv/big: {context_window: 64000}\n"
        "matrix:\n  model: [openai/gpt-5, srv/small, srv/big]\n"
        "tasks:\n  - {id: a, prompt: go}\n"
    )
    assert _runs(base) == {
        "a.openai-gpt-5": (400_000, 100_000),
        "a.srv-small": (32_000, 28_800),
        "a.srv-big": (64_000, 57_600),
    }
    task = base.replace("{id: a, prompt: go}", "{id: a, prompt: go, auto_compact_limit: 5000}")
    assert set(_runs(task).values()) == {(400_000, 5000), (32_000, 5000), (64_000, 5000)}
