"""runner: a headless runner for coding agents over the OpenAI Responses API.

The public API is `__all__`: load a task file (`load_runs`), run a batch (`run_batch`),
and the report's model and statuses. Importing `runner` loads none of them and changes
nothing outside this package; each name is imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from runner import version

__version__ = version.VERSION

_EXPORTS = {
    "load_runs": "runner.api",
    "run_batch": "runner.api",
    "BatchResult": "runner.batch",
    "Run": "runner.config",
    "Report": "runner.reports.model",
    "RunReport": "runner.reports.model",
    "RunStatus": "runner.vocabulary",
    "Verdict": "runner.vocabulary",
    "RunnerError": "runner.errors",
    "ConfigError": "runner.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:  # for type checkers; at run time, __getattr__ below
    from runner.api import load_runs as load_runs
    from runner.api import run_batch as run_batch
    from runner.batch import BatchResult as BatchResult
    from runner.config import Run as Run
    from runner.errors import ConfigError as ConfigError
    from runner.errors import RunnerError as RunnerError
    from runner.reports.model import Report as Report
    from runner.reports.model import RunReport as RunReport
    from runner.vocabulary import RunStatus as RunStatus
    from runner.vocabulary import Verdict as Verdict


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'runner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
