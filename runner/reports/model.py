"""The `report.json` schema (versioned). `docs/report.schema.json` is generated from these
models and checked by a test, so the documentation cannot drift from the code."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runner.vocabulary import RunStatus, SkipReason

SCHEMA_VERSION = "runner.report/3.7"
READS = frozenset(
    {
        "runner.report/1",
        "runner.report/2",
        "runner.report/3",
        "runner.report/3.1",
        "runner.report/3.2",
        "runner.report/3.3",
        "runner.report/3.4",
        "runner.report/3.5",
        "runner.report/3.6",
        SCHEMA_VERSION,
    }
)
"""/1 called `totals.runs` `totals.tasks`; /2 called `batch_id` `run_id`, `runs` `tasks`
and the status `max_requests` `max_turns`; /3 lacked `runner` and `runs[].inputs`; /3.1
lacked the retry counts and waits (`retries`, `retry_wait_s`) and the spend of redone
attempts (`redone`); /3.2 lacked `runs[].environment`; /3.3 lacked a suite task's grade
(`reward`, `rewards`, `resolution`, `verifier`); /3.4 lacked `runs[].api_model`,
`runs[].inputs.agents_md` and the retries of redone attempts; /3.5 lacked the mean reward
per model and variant (`totals.reward_by_model`, `totals.reward_by_variant`); /3.6
lacked `runs[].stopped_by` and the mean reward's `tasks` (its mean and interval were over
runs, now over task means). All of these are optional, read as 0, null or empty. Older
reports are read and written back as /3.7."""

OLD_KEYS = {"run_id": "batch_id", "tasks": "runs"}
"""Report keys before /3, and their names now."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


INPUT_FILE = r"^inputs/[0-9a-f]{64}\.json$"


class RunInputs(Strict):
    """Files under `inputs/`, each named by the SHA-256 of its bytes and stored once per
    report directory however many runs share it (secrets redacted)."""

    prompt: str = Field(pattern=INPUT_FILE)
    """`{"prompts": [...]}`: the task prompt as sent (after the variant's
    `prompt_template`), then each follow-up turn."""
    instructions: str = Field(pattern=INPUT_FILE)
    """`{"instructions": ..., "developer_instructions": ...}`: the base instructions sent
    with every request and the task's developer instructions."""
    tools: str = Field(pattern=INPUT_FILE)
    """`{"tools": [...]}`: the tool schemas sent with every request."""
    agents_md: str | None = Field(default=None, pattern=INPUT_FILE)
    """`{"agents_md": ...}`: the AGENTS.md text the model was given (null inside when
    there was none), without the wrapper naming the workspace's path. Null in reports
    before /3.5."""


class RunnerIdentity(Strict):
    version: str | None = None
    """The runner's version (`runner.__version__`)."""
    commit: str | None = None
    """The git commit of the runner's checkout; null when installed from a distribution."""


class UsageReport(Strict):
    input_tokens: int = 0
    """Prompt tokens the server counted, cached ones included."""
    cached_tokens: int = 0
    """Prompt tokens the server served from its prompt cache."""
    uncached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    total_tokens: int = 0
    cache_write_tokens: int = 0
    """Prompt tokens the server wrote to its cache, where it reports them (else 0)."""
    unreported_responses: int = 0
    """Answers that came with no usage at all: their tokens are missing from the counts
    above, so the cost is reported as unknown (null) rather than too low."""
    cache_hit_ratio: float | None = None
    """cached_tokens / input_tokens; null when nothing was sent."""
    ideal_cached_tokens: int | None = None
    """What a perfect prefix cache would have served: for each request, its tokens that
    repeat the previous request exactly (0 for a thread's first request); summed for runs
    and totals. Null where no request was audited."""
    ideal_cache_ratio: float | None = None
    """ideal_cached_tokens / input_tokens (token-weighted for runs and totals). Beside
    `cache_hit_ratio`: a gap is caching the server lost; a low ideal is caching the prompt
    itself made impossible (new content, compaction, prefix breaks)."""


class PrefixReport(Strict):
    extends_previous: bool
    """This request repeats the previous one (and its answer) byte for byte, then adds."""
    reused_items: int
    ideal_cache_ratio: float | None
    """Share of this request's bytes that repeat the previous request: what a perfect
    prefix cache could serve. Compare with `usage.cache_hit_ratio`."""
    break_index: int | None = None
    """First input item that differs, when the request does not extend the previous."""
    break_reason: str | None = None


class RequestReport(Strict):
    index: int
    """1-based position of the request in its thread."""
    turn: int
    """0 for the task prompt, then 1.. for each follow-up turn."""
    input_items: int
    request_bytes: int
    duration_ms: float
    response_id: str | None
    output_types: list[str]
    """Types of the output items, in order (message, function_call, reasoning...)."""
    usage: UsageReport | None
    """As the server reported it for this request; null if it sent none."""
    prefix: PrefixReport
    kind: Literal["turn", "compaction"] = "turn"
    """`compaction`: a hand-off summary request or a call of `/responses/compact`."""
    error: str | None = None
    """Set when the server refused the request: the context window was full (the run went
    on with a compaction, or stopped, as its `error` says), or a failure it billed or that
    was resent before the run gave up."""
    retries: int = 0
    """Attempts resent before the answer or the final failure: connect failures, 5xx, 429,
    cut streams (see README, Reliability)."""
    retry_wait_s: float = 0.0
    """Seconds waited before its attempts: backoff, the server's Retry-After, and the
    provider's rate gate held after another run's 429."""


class RedoneReport(Strict):
    """What earlier attempts of runs cost, attempts that `--resume` (or `--resume
    --retry-errored`) ran again: paid for, though their results were replaced."""

    attempts: int
    """Earlier attempts replaced by a later one."""
    usage: UsageReport
    cost_usd: float | None = None
    """Null when any such attempt's cost is unknown."""
    retries: int = 0
    """Their resent attempts (0 in reports before /3.5)."""
    retry_wait_s: float = 0.0
    """Their seconds of waiting to send or resend."""


class CompactionReport(Strict):
    kind: Literal["remote", "local"]
    """`remote`: the provider's `/responses/compact`; `local`: a summary request."""
    reason: Literal["pre-turn", "mid-turn", "context_length_exceeded"]
    tokens_before: int
    """The thread's token count that triggered it (server count plus estimate)."""
    tokens_after: int
    """Estimated size of the rebuilt history, instructions and tools included."""
    items_before: int
    items_after: int
    dropped_items: int
    """Oldest items left out of the compaction request because it did not fit."""
    requests: list[int]
    """Indexes of the requests it made (see `requests[].kind`)."""
    fallback: str | None = None
    """Why remote compaction gave way to local compaction, if it did."""


class WorkspaceReport(Strict):
    base: str
    """The commit the run started from."""
    base_dirty: bool
    """The repository had uncommitted changes; they were not part of the run."""
    setup_s: float


class ResultReport(Strict):
    commit: str
    """The commit holding every change of the run, on top of `base`."""
    branch: str | None
    """The new branch in the task's repository; null when a scope check failed."""
    patch: str
    """The patch file (git format-patch), relative to the report directory."""
    files_changed: int
    insertions: int
    deletions: int
    files: list[str]
    violations: list[str]
    """Scope violations (forbidden paths, too many lines); non-empty means no branch."""
    pushed: str | None = None
    """The remote ref the branch was pushed to, when `git.push` is set."""


class EnvironmentReport(Strict):
    """Where a run's commands and check ran, when not on the host: a container or Pod.
    For a run on the host (backend `local`), only where its artifacts went."""

    backend: str
    """`podman`, `docker` or `kubernetes`; `local` for a host run's artifacts."""
    image: str | None = None
    """The image as named, or the tag `build:` was built under."""
    image_id: str | None = None
    """The engine's id of that image (podman and docker), cut to 19 characters."""
    workdir: str | None = None
    """Where the work was inside it."""
    build_s: float | None = None
    """Seconds the run waited for its `build:` image (built, or found built by another
    run); null without `build:`. Not part of `duration_s`."""
    built: bool = False
    """This run built the image; the batch's other runs of the same folder reused it."""
    start_s: float | None = None
    """Seconds from asking for the environment to its work ready (started, copied in,
    start state recorded), beside the run's first model request."""
    patch: str | None = None
    """The patch of the workdir against its start, relative to the report directory,
    when the task names no `repo:` (with one, `result.patch` holds the changes)."""
    left_out: list[str] = []
    """Changes the patch does not hold, with why."""
    artifacts: str | None = None
    """The folder the task's `artifacts:` were copied to, relative to the report
    directory."""


class VerifierReport(Strict):
    """A suite task's verifier run (after the agent's phase, out of its sight)."""

    exit_code: int | None = None
    """The test command's exit code (Harbor ignores it; the reward file decides)."""
    duration_s: float = 0.0
    """Copying the tests in, running them and grading (with a fresh environment, its start
    and the patch applied too): not part of `duration_s`."""
    fresh_environment: bool = False
    """Graded in an environment started for it from the run's image, with only the run's
    patch applied (SWE-bench, as its harness grades a prediction), not in the agent's."""
    start_s: float | None = None
    """Seconds of `duration_s` that starting the fresh environment took."""
    patch_applied: bool | None = None
    """Whether the run's patch applied in the fresh environment (false: not resolved, as
    the harness says, and no test ran)."""
    note: str | None = None
    """Why the grade is what it is when the tests alone do not say (the patch did not
    apply; a file was left out of it)."""
    output_tail: str = ""
    """The last 4,000 characters of its output."""
    error: str | None = None
    """Why it gave no grade (no reward file, no test summary, a timeout, a lost
    container): the run is then an error, never a score."""


class CheckReport(Strict):
    command: str
    exit_code: int
    passed: bool
    duration_s: float
    output_tail: str
    """The last 4,000 characters of its output."""


class RunReport(Strict):
    id: str
    """The task id from the task file."""
    run: str = ""
    """This run's name: the id, plus model and repeat when a matrix makes several runs."""
    repeat: int = 1
    model: str
    """provider/model as written in the task file; `agent/oracle` or `agent/nop` for a
    suite run no model worked on (see `agent`), whatever model the file names."""
    api_model: str | None = None
    """The model name sent to the provider: differs from `model` under a `models:` alias
    (`fake/warm: {model: mA}` sends `mA`). Null for oracle and nop runs, which send
    nothing, and for reports before /3.5."""
    variant: str | None = None
    """The matrix variant (a named set of prompt/settings overrides), if any."""
    tags: list[str] = []
    model_options: dict[str, Any] = {}
    """The settings sent with each request: the task file's `model_options` over Codex's
    defaults for known models (reasoning effort, verbosity, parallel tool calls)."""
    fingerprint: str = ""
    """Stable hash of what defines the run (task, model, variant, repeat, settings): the
    key for `--resume` and `--shard`, equal on every machine."""
    cost_usd: float | None = None
    """From the price table; null when the model's price is unknown (never a guess); 0
    for oracle and nop runs, which make no request."""
    status: RunStatus
    """completed | check_failed | max_requests | max_tool_calls | timeout | budget (token or
    cost limit) | skipped (never started: see `skip_reason`) | failed | error | interrupted
    | scope_violation | rate_limited (still 429 after every retry, or asked to wait longer
    than `max_retry_wait_s`) | quota_exhausted (`insufficient_quota`) | max_output_tokens
    (an answer was cut off at the request's `max_output_tokens`; its text is in
    `truncated_output`). `failed`: the request itself was refused (400 invalid request,
    context full); `error`: no working model (network or 5xx after every retry, 401/403:
    the message names the key's variable)."""
    skip_reason: SkipReason | None = None
    """Why a `skipped` run never started: `budget` (the batch budget was spent) or
    `interrupted` (Ctrl-C or SIGTERM came first). `runner run --resume` runs it."""
    stopped_by: RunStatus | None = None
    """A graded suite run whose agent a limit (`max_requests`, `timeout`, ...) or the model's
    failure stopped before it said it was done: that stop. Its `status` comes from the
    grade all the same (`completed` when resolved or reward >= 1, else `check_failed`), as
    the suites' own harnesses grade the work left, not how the agent stopped. Null
    otherwise."""
    index: int | None = None
    """Position of the run in its batch (task-file order: task, model, variant, repeat),
    counted before `--shard` splits the batch; merged shards are put back in this order."""
    error: str | None
    final_message: str | None
    turns_completed: int
    """User turns (the task prompt, each follow-up) the agent finished: a run a limit or an
    error stopped mid-turn has not finished that one (`user_turns` counts it)."""
    tool_calls: int
    duration_s: float
    usage: UsageReport
    prefix_breaks: int = 0
    """Requests that did not extend the previous one (each one loses the prompt cache);
    those right after a compaction are expected and say `compaction` as their reason."""
    compactions: list[CompactionReport] = []
    """Each time the thread's history was compacted to fit the context window."""
    requests: list[RequestReport]
    events_file: str
    """Path of this thread's JSONL event log, relative to the report directory."""
    workspace: WorkspaceReport | None = None
    result: ResultReport | None = None
    """The run's changes; null when it changed nothing."""
    check: CheckReport | None = None
    """The task's `check` command, run after the agent; null when there is none."""
    output: Any = None
    """The final answer parsed as JSON when the task has an `output_schema` and the answer
    matches it; null otherwise (a mismatch fails the run and says why in `error`)."""
    truncated_output: str | None = None
    """The text of the answer `max_output_tokens` cut off, when that ended the run (the
    first 16,000 characters)."""
    current_date: str | None = None
    """The day `<environment_context>` told the model: the task's pinned `current_date`
    (or `--date`), else the day the batch started. Null for a run that never started."""
    timezone: str | None = None
    """The zone `<environment_context>` told the model, pinned or this machine's."""
    inputs: RunInputs | None = None
    """Where the run's exact input is kept; null for a run that never started (and in
    reports before /3.1)."""
    retries: int = 0
    """Attempts resent over all of the run's requests (see `requests[].retries`)."""
    retry_wait_s: float = 0.0
    """Seconds the run's requests spent waiting to be sent or resent."""
    redone: RedoneReport | None = None
    """What this run's earlier attempts spent, when `--resume` ran it again; not in its
    own `usage` and `cost_usd`, which are this attempt's alone. Null when it ran once."""
    environment: EnvironmentReport | None = None
    """Its container or Pod; for a run on the host, null unless it copied artifacts
    (then backend `local` and `artifacts` alone)."""
    suite: str | None = None
    """`<format>:<id>` of the benchmark task the run came from (`suites:`); null for a
    task of the file's own."""
    agent: Literal["model", "oracle", "nop"] = "model"
    """Who did the work: the model, or (suite runs) the task's own solution (`oracle`) or
    nothing (`nop`), which call no model."""
    reward: float | None = None
    """The suite task's reward from its verifier: Harbor's `reward` (or only) value,
    1 or 0 for Terminal-Bench and SWE-bench (resolved or not). Null for other runs, and
    for a suite run without a grade (see `verifier.error`)."""
    rewards: dict[str, float] = {}
    """Every named reward the verifier gave (Harbor's reward.json; SWE-bench's
    `fail_to_pass` and `pass_to_pass` shares of passing tests)."""
    resolution: Literal["resolved", "partial", "not"] | None = None
    """SWE-bench's verdict (resolved: every FAIL_TO_PASS and PASS_TO_PASS test passes;
    partial: some FAIL_TO_PASS do); Terminal-Bench's resolved or not; null for Harbor."""
    verifier: VerifierReport | None = None
    """The verifier's run; null for runs of no suite, and for a suite run stopped first."""

    @property
    def user_turns(self) -> int:
        """User turns the model was given (the task prompt, then each follow-up that
        reached it), finished or not: what the reports' "User turns" show. From the
        requests, so older reports count the same way."""
        return max(self.turns_completed, max((r.turn for r in self.requests), default=-1) + 1)


class MeanReward(Strict):
    """The mean reward of a group's graded runs (finished suite runs with a reward), with
    its 95% interval: the numbers summary.md, report.html and junit.xml show."""

    rewarded: int
    """Finished runs with a reward."""
    tasks: int | None = None
    """Tasks among them: the n of the mean and its interval (the task is the unit; each
    task's runs, its repeats and variants, are averaged first). Null in reports before
    runner.report/3.7, whose mean and interval were over runs."""
    mean: float | None = None
    """The mean over tasks of each task's mean reward. Null when no run of the group was
    graded (every one errored or was skipped)."""
    ci_low: float | None = None
    ci_high: float | None = None
    """The 95% interval of the mean over the task means (Wilson's score interval with the
    mean for the rate, n = tasks; conservative, since rewards in [0, 1] vary at most
    m(1 - m)). Null without a graded run, or when a reward lies outside [0, 1], where the
    bound would not hold."""


class Totals(Strict):
    runs: int
    """Runs in the report (every task x model x variant x repeat), whatever their status.
    Called `tasks` in older reports, which are still read."""
    completed: int
    """Runs that passed (status `completed`)."""
    not_completed: int
    """runs - completed: failed, errored and skipped runs together."""
    finished: int = 0
    """Runs that ran to a verdict (passed or failed): the denominator of `pass_rate`."""
    skipped: int = 0
    """Runs that never started (batch budget, interruption); not in any rate or median."""
    errored: int = 0
    """Runs the infrastructure broke or stopped (error, rate_limited, quota_exhausted,
    interrupted while running): they say nothing about the agent, so no rate counts them."""
    pass_rate: float | None = None
    """completed / finished; null when no run finished."""
    requests: int
    tool_calls: int
    usage: UsageReport
    """Every token the batch paid for: the runs' and their redone attempts' (`redone`)."""
    cost_usd: float | None = None
    """Sum over runs and redone attempts; null when any of their costs is unknown."""
    retries: int = 0
    """Attempts resent, over every request of every run."""
    retry_wait_s: float = 0.0
    """Seconds runs spent waiting to send or resend requests (summed over runs, so
    concurrent waits add up)."""
    redone: RedoneReport | None = None
    """The part of `usage` and `cost_usd` spent on attempts `--resume` ran again: shown
    apart, since no run's result reflects it. Null when no run was redone."""
    reward_by_model: dict[str, MeanReward] = {}
    """Per model, over its suite runs (oracle and nop runs under `agent/oracle` and
    `agent/nop`, never under the model the task file names). Empty when no run came from a
    suite, and in reports before /3.6."""
    reward_by_variant: dict[str, MeanReward] = {}
    """The same per matrix variant (`(none)` for runs without one), over every model and
    agent, as summary.md's "By variant"; empty when no suite run has a variant."""

    @model_validator(mode="before")
    @classmethod
    def _old_name(cls, data: Any) -> Any:
        """Reports written before the rename call `runs` `tasks`: merged and compared all
        the same."""
        if isinstance(data, dict) and "tasks" in data and "runs" not in data:
            data = {("runs" if k == "tasks" else k): v for k, v in data.items()}
        return data


class BatchIdentity(Strict):
    """What makes shard reports parts of one batch, so `runner report merge` can tell a
    complete set from a missing, duplicated or foreign shard."""

    task_file_sha256: str
    """Hash of the task file's bytes."""
    run_set: str
    """Hash of the fingerprints of every run of the batch in order (after `--only`,
    `--tag` and `--model`, before `--shard`)."""
    runs: int
    """Runs in the whole batch, all shards together."""
    shard: int = 1
    """K of `--shard K/N` (1 without `--shard`)."""
    shards: int = 1
    """N of `--shard K/N`."""
    not_selected: int = 0
    """Runs of the task file left out by `--only` or `--tag` (never started, not counted)."""


class Report(Strict):
    schema_version: str = SCHEMA_VERSION
    batch_id: str
    """The batch's id (`run_id` before /3): the `{batch}` of branch names and the
    `Runner-Run` trailer of its commits."""
    task_file: str
    started_at: str
    finished_at: str
    duration_s: float
    """Wall time from `started_at` to `finished_at`: for a batch finished by `--resume`, the
    last session only (earlier sessions are not counted; each run's own `duration_s` is)."""
    totals: Totals
    runs: list[RunReport]
    """One entry per run (not per task: a task runs once per model, variant and repeat).
    Called `tasks` before /3, which is still read."""
    shards: list[str] = []
    """Batch ids of the shard reports `runner report merge` combined into this one; empty for
    a report written by `runner run`."""
    batch: BatchIdentity | None = None
    """Null in reports of runners before batch identities existed."""
    runner: RunnerIdentity | None = None
    """The runner that wrote the report; null in reports before /3.1."""
    partial: bool = False
    """A merge of an incomplete set of shards, or of shards cut short
    (`runner report merge --partial`)."""
    missing_shards: list[int] = []
    """The K of each shard a partial merge lacked."""
    pending: int = 0
    """Runs of the batch not finished yet: a report written while the batch runs (so a
    killed job still leaves one) lists only the finished runs. 0 in a final report. In a
    `--partial` merge: the runs the shards cut short lack (`partial` is true then)."""

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        """Reports before /3 say `run_id` and `tasks`: read under today's names, so merge,
        compare, branches and the Action take old files as they are."""
        if isinstance(data, dict):
            for old, new in OLD_KEYS.items():
                if old in data and new not in data:
                    data = {(new if k == old else k): v for k, v in data.items()}
        return data
