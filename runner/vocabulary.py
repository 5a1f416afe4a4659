"""Words more than one part of the runner uses, defined once: the CLI's choices, the task
file's schema, the prompt, the sandbox and the Action all take them from here."""

from __future__ import annotations

from typing import Literal, get_args

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
Auth = Literal["bearer", "api-key", "none"]
"""How a provider takes its key: `Authorization: Bearer`, Azure's `api-key`, or not at all."""

SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
REASONING_EFFORTS: tuple[str, ...] = get_args(ReasoningEffort)

EXIT_OK = 0
EXIT_TASK_FAILED = 1
"""At least one run did not pass (failed, errored, interrupted)."""
EXIT_BAD_INPUT = 2
"""The task file, a flag or another input is wrong: nothing ran."""
EXIT_RUNNER = 3
"""The runner itself could not go on (an internal error, no sandbox where one is needed)."""
