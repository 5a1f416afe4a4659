"""The model seam. `ModelClient` is the only thing the agent loop knows about models.

Concrete clients (`responses.py` for the Responses wire, `chat.py` for Chat Completions,
`local.py` to start the embedded engine) live here; they speak HTTP through the one seam,
runner/http.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any, Protocol, runtime_checkable

from runner.frozen import frozen
from runner.items import Item, Usage
from runner.sizes import SizeCaps


@frozen
class Prompt:
    """Everything one model request carries. Identical prefixes give identical bytes."""

    model: str
    instructions: str
    input: Sequence[Item]
    tools: Sequence[dict[str, Any]]
    prompt_cache_key: str
    tool_choice: str = "auto"
    parallel_tool_calls: bool = False
    reasoning: dict[str, Any] | None = None
    reasoning_seen: bool = False
    """A reasoning item came back although `reasoning` was not asked for (a model that
    reasons by default): later requests ask for its encrypted content too."""
    text: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Provider-specific body fields (temperature, seed) appended after the standard ones."""
    caps: SizeCaps = field(default_factory=SizeCaps)
    """The run's byte caps: the client refuses a body, a stream or items beyond them."""

    def history_bytes(self) -> int:
        """What `input` weighs as sent back: the base of the history cap."""
        return sum(i.held_bytes for i in self.input)


@frozen
class ModelResponse:
    items: list[Item]
    """Output items in order, exactly as the server sent them in `output_item.done`."""
    usage: Usage | None
    response_id: str | None = None
    request_bytes: int = 0
    """Size of the request body, for the prefix audit and reports."""
    retries: int = 0
    """Attempts resent before this answer came (set by the retry policy)."""
    retry_wait_s: float = 0.0
    """Seconds waited before its attempts: backoff, Retry-After, a held rate gate."""


class ModelClient(Protocol):
    async def generate(self, prompt: Prompt) -> ModelResponse:
        """Send one request and return the finished response, or raise a `ModelError`."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Compactor(Protocol):
    """A server that compacts a history itself (`POST {base_url}/responses/compact`)."""

    async def compact(self, prompt: Prompt) -> ModelResponse:
        """The server's replacement for `prompt.input` (its `output` items), or a
        `ModelError`; `ContextWindowExceeded` when even the compaction does not fit."""
        ...


def find_compactor(client: object) -> Compactor | None:
    """The outermost client that can compact. The wrappers (retries, connection caps) keep
    the wrapped client in `inner` and forward `compact` under their own rate gate and
    connection cap. Called once per thread; a failed compaction
    there is not resent, because local compaction is the fallback."""
    node: object | None = client
    while node is not None:
        if isinstance(node, Compactor):
            return node
        node = getattr(node, "inner", None)
    return None
