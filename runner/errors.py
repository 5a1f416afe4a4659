"""The one exception tree of the runner.

    RunnerError
    ├── ConfigError            bad input: task file, flags (exit 2)
    ├── ModelError             anything between us and the model
    │   ├── TransportError       connect/read failures, stream cut before response.completed
    │   ├── HTTPStatusError      a non-2xx answer (status and body kept)
    │   ├── StreamError          response.failed / response.incomplete / malformed stream
    │   └── ContextWindowExceeded
    ├── ToolError              a tool could not run (reported to the model, never raised past it)
    └── EngineError            the embedded model could not be started

Providers translate httpx and protocol errors into this tree at the boundary, so
nothing above `providers/` ever sees an httpx exception.
"""

from __future__ import annotations

from dataclasses import dataclass


class RunnerError(Exception):
    """Base of everything the runner raises on purpose."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, located precisely enough to fix it."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}"


class ConfigError(RunnerError):
    """Bad user input. Always carries located problems; the CLI exits 2 on it."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ModelError(RunnerError):
    """A model request failed. `retryable` says whether resending may help."""

    retryable: bool = False
    code: str | None = None


class TransportError(ModelError):
    retryable = True


class HTTPStatusError(ModelError):
    def __init__(self, status: int, body: str, *, retry_after_s: float | None = None) -> None:
        self.status = status
        self.body = body
        self.retryable = status >= 500 or status == 429
        self.retry_after_s = retry_after_s
        """How long the server asked us to wait (`retry-after-ms` / `Retry-After`)."""
        super().__init__(f"HTTP {status}: {body[:500]}")


class StreamError(ModelError):
    def __init__(self, message: str, *, code: str | None = None, retryable: bool = False) -> None:
        self.code = code
        self.retryable = retryable
        super().__init__(message)


class ContextWindowExceeded(ModelError):
    code = "context_length_exceeded"


class ToolError(RunnerError):
    """A tool call could not be carried out; its message goes back to the model."""


class EngineError(RunnerError):
    """The embedded model engine could not start or answer."""
