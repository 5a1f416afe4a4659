"""Words more than one part of the runner uses, defined once: the CLI's choices, the task
file's schema, the prompt, the sandbox and the Action all take them from here."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, get_args

SandboxMode = Literal["read-only", "workspace-write", "danger-full-access"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
Auth = Literal["bearer", "api-key", "none"]
"""How a provider takes its key: `Authorization: Bearer`, Azure's `api-key`, or not at all."""

EnvironmentBackend = Literal["local", "podman", "docker", "kubernetes"]
"""Where a run's commands and file edits happen: bubblewrap over the host (`local`), a
container driven through the podman or docker CLI, or a Kubernetes Pod."""

SkipReason = Literal["budget", "interrupted", "provider_down"]
"""Why a run never started: the batch budget was spent, Ctrl-C or SIGTERM came first, or
its provider stopped answering (`budget.max_connect_failures`)."""

SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
REASONING_EFFORTS: tuple[str, ...] = get_args(ReasoningEffort)

EXIT_OK = 0
EXIT_TASK_FAILED = 1
"""At least one run did not pass (failed, errored, interrupted)."""
EXIT_BAD_INPUT = 2
"""The task file, a flag or another input is wrong: nothing ran."""
EXIT_RUNNER = 3
"""A run could not be done or graded (`NOT_WORKING`), or the runner itself could not go on
(an internal error, no sandbox where one is needed): nothing to say about the agent."""
EXIT_INTERRUPTED = 130
"""Ctrl-C or SIGTERM stopped the batch (128 + SIGINT, as shells report it)."""


class Verdict(StrEnum):
    """The bucket every count, rate and JUnit element puts a run in."""

    PASSED = "passed"
    FAILED = "failed"
    """The agent ran and did not achieve the task within its limits."""
    ERRORED = "errored"
    """The run says nothing about the agent: the infrastructure broke or a signal stopped it."""
    SKIPPED = "skipped"


class RunStatus(StrEnum):
    """How a run ended. The agent loop ends with one of the first twelve (interrupted
    included); what happened after it (the output schema, a signal, the check, the scope)
    can change that, by one precedence rule (`record.verdict`)."""

    COMPLETED = "completed"
    MAX_REQUESTS = "max_requests"
    """`limits.max_requests` model requests were sent (`max_turns` in older reports)."""
    MAX_TOOL_CALLS = "max_tool_calls"
    BUDGET = "budget"
    TIMEOUT = "timeout"
    FAILED = "failed"
    """The model refused or could not go on (context full, invalid request, bad output)."""
    MAX_OUTPUT_TOKENS = "max_output_tokens"
    SIZE_LIMIT = "size_limit"
    """A byte cap on what the server sent or what a request would carry (`limits:`
    `max_response_bytes`, `max_item_bytes`, `max_history_bytes`, `max_request_bytes`)."""
    ERROR = "error"
    """Infrastructure: the provider, the sandbox, the workspace or the runner gave out."""
    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    INTERRUPTED = "interrupted"
    """Ctrl-C or SIGTERM stopped it; `--resume` redoes it."""
    CHECK_FAILED = "check_failed"
    SCOPE_VIOLATION = "scope_violation"
    SKIPPED = "skipped"
    """Never started: the batch budget was spent, or Ctrl-C or SIGTERM came first (runs
    left out by `--only` or `--tag` are not in the report at all)."""

    @classmethod
    def _missing_(cls, value: object) -> RunStatus | None:
        """Statuses under their older names, as older reports and journals hold them."""
        return cls.MAX_REQUESTS if value == "max_turns" else None

    @property
    def verdict(self) -> Verdict:
        if self is RunStatus.COMPLETED:
            return Verdict.PASSED
        if self is RunStatus.SKIPPED:
            return Verdict.SKIPPED
        return Verdict.ERRORED if self in ERRORED else Verdict.FAILED


NOT_WORKING = frozenset({RunStatus.ERROR, RunStatus.RATE_LIMITED, RunStatus.QUOTA_EXHAUSTED})
"""The run could not be done or graded (a provider down after retries, out of quota, rate
limited past the cap; a container that did not start; a suite verifier that gave no grade;
the runner's own fault): the batch exits 3, not 1, since no verdict on the agent was
reached, and `--resume --retry-errored` runs it again."""
ERRORED = NOT_WORKING | {RunStatus.INTERRUPTED}
"""Runs that say nothing about the model: errored, not failed, in every statistic."""


AgentKind = Literal["model", "oracle", "nop"]
"""Who does a suite task's work: the model (default); `oracle`, which applies the task's
own solution instead of calling a model; `nop`, which does nothing. The last two check a
suite (oracle must score 1, nop 0) before money is spent on it. Here, not with the
`suites:` entry, so `--agent` is parsed without importing the config models."""
AGENT_KINDS: tuple[str, ...] = get_args(AgentKind)
SANITY_PROVIDER = "agent"
"""The provider part of an oracle or nop run's label: `agent/oracle`, `agent/nop`."""


def model_label(model: str, agent: AgentKind) -> str:
    """Who a run is counted as in reports, run names, branches and predictions files:
    `model` (provider/model) for a model's run; `agent/oracle` or `agent/nop` for a run no
    model worked on, whatever model the task file names (it is never called), so a
    sanity run's score is never a model's."""
    return model if agent == "model" else f"{SANITY_PROVIDER}/{agent}"
