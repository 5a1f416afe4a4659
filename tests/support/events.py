"""An event sink that keeps what the agent loop emits, for tests to read back."""

from __future__ import annotations

from typing import Any


class ListSink:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e["type"] for e in self.events]
