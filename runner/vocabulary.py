"""Words more than one part of the runner uses, defined once: the CLI's choices, the task
file's schema, the prompt, the sandbox and the Action all take them from here."""

from __future__ import annotations

from enum import StrEnum
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
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM stopped the batch (128 + SIGINT, as shells report it)."""


class RunStatus(StrEnum):
    """How a run ended. The loop gives the first ten; the run adds what happened after
    the loop (see `run.TaskRun.verdict`, the one precedence rule)."""

    COMPLETED = "completed"
    MAX_TURNS = "max_turns"
    MAX_TOOL_CALLS = "max_tool_calls"
    BUDGET = "budget"
    TIMEOUT = "timeout"
    FAILED = "failed"
    """The model refused or could not go on (context full, invalid request, bad output)."""
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    ERROR = "error"
    """Infrastructure: the provider, the sandbox, the workspace or the runner gave out."""
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    INTERRUPTED = "interrupted"
    """Ctrl-C or SIGTERM stopped it; `--resume` redoes it."""
    CHECK_FAILED = "check_failed"
    SCOPE_VIOLATION = "scope_violation"
    SKIPPED = "skipped"
    """Never started: the batch budget, an interruption or `--only`."""


NOT_WORKING = frozenset({RunStatus.ERROR, RunStatus.RATE_LIMITED, RunStatus.QUOTA_EXHAUSTED})
"""The runner could not work (a provider down after retries, out of quota, rate limited
past the cap): the batch exits 3."""
ERRORED = NOT_WORKING | {RunStatus.INTERRUPTED}
"""Runs that say nothing about the model: errored, not failed, in every statistic."""
