"""What the runner knows about a model: its context window, when to compact, its price.

A built-in table covers common models; the task file's `models:` section overrides any
field per `provider/model`. A price that is not known stays `None` so the report shows a
null cost rather than a wrong number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, Strict

from runner.frozen import frozen
from runner.items import Usage

_Usd = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]


class Price(BaseModel):
    """US dollars per million tokens. Cached input is billed instead of input, not on top.

    The one price type: the task file's `models: ...: price:` validates into it, the
    built-in table holds it, and runs and budgets count with it, so no layer converts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: _Usd
    cached_input: _Usd
    output: _Usd

    def cost(self, u: Usage) -> float:
        uncached = max(u.input_tokens - u.cached_tokens, 0)
        # Reasoning tokens are part of output_tokens on both wires.
        return (
            uncached * self.input
            + u.cached_tokens * self.cached_input
            + u.output_tokens * self.output
        ) / 1_000_000


@frozen
class ModelInfo:
    context_window: int | None = None
    auto_compact_limit: int | None = None
    """Compact when the thread's token count passes this; default 90% of the window."""
    price: Price | None = None

    @property
    def compact_limit(self) -> int | None:
        if self.auto_compact_limit is not None:
            return self.auto_compact_limit
        return self.context_window * 9 // 10 if self.context_window else None


def usd(input: float, cached_input: float, output: float) -> Price:
    """A price in the table's order: input, cached input, output."""
    return Price(input=input, cached_input=cached_input, output=output)


FREE = usd(0.0, 0.0, 0.0)

# Public list prices (standard tier, prompts under 270K tokens), USD per 1M tokens;
# override them in `models:` when your contract differs. Keys are model names;
# "provider/model" keys win over them. Context windows of the GPT-5.2+ entries are the
# 272,000 tokens Codex CLI 0.169.0 uses for them (its bundled models.json).
BUILTIN: dict[str, ModelInfo] = {
    # Source: OpenAI's API pricing page, as quoted on 2026-06-04 (tokenmix.ai) and read
    # again on 2026-11-05 (api-evangelist); checked for this table on 2026-11-23.
    "gpt-5.5": ModelInfo(272_000, None, usd(5.0, 0.5, 30.0)),
    "gpt-5.4": ModelInfo(272_000, None, usd(2.5, 0.25, 15.0)),
    "gpt-5.4-mini": ModelInfo(272_000, None, usd(0.75, 0.075, 4.5)),
    "gpt-5.4-nano": ModelInfo(272_000, None, usd(0.2, 0.02, 1.25)),
    # Source: GitHub's Copilot models-and-pricing table (OpenAI list prices), 2026-11-23.
    "gpt-5.3-codex": ModelInfo(272_000, None, usd(1.75, 0.175, 14.0)),
    "gpt-5.2": ModelInfo(272_000, None, usd(1.75, 0.175, 14.0)),
    # Source: OpenAI's API pricing page at the GPT-5 and GPT-4.1 launches (2025-08-07,
    # 2025-04-14), unchanged since; o3 after its 2025-06-10 price cut.
    "gpt-5": ModelInfo(400_000, None, usd(1.25, 0.125, 10.0)),
    "gpt-5-codex": ModelInfo(400_000, None, usd(1.25, 0.125, 10.0)),
    "gpt-5-mini": ModelInfo(400_000, None, usd(0.25, 0.025, 2.0)),
    "gpt-5-nano": ModelInfo(400_000, None, usd(0.05, 0.005, 0.4)),
    "gpt-4.1": ModelInfo(1_047_576, None, usd(2.0, 0.5, 8.0)),
    "gpt-4.1-mini": ModelInfo(1_047_576, None, usd(0.4, 0.1, 1.6)),
    "gpt-4.1-nano": ModelInfo(1_047_576, None, usd(0.1, 0.025, 0.4)),
    "gpt-4o": ModelInfo(128_000, None, usd(2.5, 1.25, 10.0)),
    "gpt-4o-mini": ModelInfo(128_000, None, usd(0.15, 0.075, 0.6)),
    "o3": ModelInfo(200_000, None, usd(2.0, 0.5, 8.0)),
    "o4-mini": ModelInfo(200_000, None, usd(1.1, 0.275, 4.4)),
    # The embedded engine runs SmolLM2 with its full 8k context on this machine: free.
    "local/smollm2": ModelInfo(8192, None, FREE),
}

LOCAL_PROVIDERS = frozenset({"local", "ollama", "lmstudio"})
"""Models served on the user's own machine cost nothing per token."""
PRICED_BY_NAME = frozenset({"openai", "azure"})
"""Providers whose bare model names mean OpenAI's models and list prices; any other
provider (a proxy, vLLM) gets a price only from the task file."""


def codex_defaults(model: str) -> dict[str, object]:
    """The request settings Codex 0.169 sends for `model` when its config is silent: the
    task file's `model_options` go over these field by field.

    GPT-5 models reason (effort medium; encrypted reasoning is then asked for and sent
    back), answer tersely (verbosity low; not the `-codex` variants, which reject it) and
    may call tools in parallel. o3/o4-mini reason but know no verbosity. Any other model
    (local servers, gpt-4.x) gets nothing: a server that does not reason may refuse a
    `reasoning` field, and Codex sends none for models it does not know either.
    """
    name = model.rsplit("/", 1)[-1].lower()
    if re.fullmatch(r"gpt-5(\.\d+)?(-mini|-nano)?", name):
        return {"reasoning_effort": "medium", "verbosity": "low", "parallel_tool_calls": True}
    if re.fullmatch(r"gpt-5(\.\d+)?(-codex)(-mini|-max)?", name):
        return {"reasoning_effort": "medium", "parallel_tool_calls": True}
    if re.fullmatch(r"o3|o4-mini", name):
        return {"reasoning_effort": "medium"}
    return {}


def model_info(
    provider: str, model: str, overrides: Mapping[str, ModelInfo] | None = None
) -> ModelInfo:
    """The table's entry for `provider/model` (else for `model`), with the task file's
    fields laid over it field by field."""
    key = f"{provider}/{model}"
    info = BUILTIN.get(key) or ModelInfo()
    if key not in BUILTIN and provider in PRICED_BY_NAME:
        info = BUILTIN.get(model, info)
    if provider in LOCAL_PROVIDERS:
        info = replace(info, price=FREE)
    over = (overrides or {}).get(key)
    if over is not None:
        info = ModelInfo(
            context_window=over.context_window or info.context_window,
            auto_compact_limit=over.auto_compact_limit or info.auto_compact_limit,
            price=over.price or info.price,
        )
    return info
