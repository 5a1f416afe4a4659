"""The one exception tree of the runner.

    RunnerError
    ├── ConfigError            bad input: task file, flags (exit 2)
    ├── RemoteError            a request to a server failed; says if resending may help
    │   ├── NoAnswer             no answer: connect/send failures, timeouts before the status
    │   ├── ModelError           anything between us and the model
    │   │   ├── ModelNoAnswer      a model request's NoAnswer (it is both)
    │   │   ├── ProviderDown       N requests in a row never reached the provider: not resent
    │   │   ├── StatusRefusal      a non-2xx answer (status, body, the body's error code kept)
    │   │   ├── StreamFailure      response.failed / incomplete, a cut or malformed stream
    │   │   ├── ContextWindowExceeded
    │   │   ├── SizeLimitReached   a byte cap of `limits:` would be passed
    │   │   ├── AnswerTruncated    `max_output_tokens` cut the answer: resent, it is cut again
    │   │   ├── RateLimited        still rate limited after retries, or asked to wait too long
    │   │   ├── QuotaExhausted     `insufficient_quota`: no retry can help
    │   │   └── AuthFailed         401 / 403: the API key is wrong or lacks access
    │   ├── GitHubError          a GitHub REST call failed (the Action's steps)
    │   └── BodyTooLarge         an answer past its client's byte cap, as decoded (runner/http.py)
    ├── RunEnds                the loop ends the run: a status and why (a limit, an overflow)
    ├── ToolError              a tool could not run (reported to the model, never raised past it)
    │   ├── ToolArgumentsError   a call's arguments are malformed (shell, update_plan)
    │   └── PatchError           a patch that cannot be parsed, planned or applied
    ├── SkillError             a skill folder that cannot be used
    ├── McpError               an MCP server could not start or list its tools
    ├── EngineError            the embedded model could not be started
    ├── SandboxError           a sandboxed mode was asked for and bubblewrap cannot run here
    ├── EnvironmentFault       a container engine call failed: an image, a start, a copy
    │   └── EnvironmentLost      the environment died mid-run (the run is `error`)
    ├── VerifierFailed         a suite's verifier gave no result (no reward file, no summary)
    ├── WorkspaceError         a workspace could not be prepared, kept, pushed or removed
    │   └── GitError             a git command failed (its stderr, secrets removed)
    ├── UnsafeFileError        a file of the workspace the runner refused to touch
    │   └── PathRefused          a path an environment never reaches (outside, or protected)
    ├── ReportError            counts no batch can produce, given to a report's statistics
    └── UnsupportedSchema      an answer schema the budgeted grammar cannot express

Only the tree lives here: no class decides anything from a status or a code. The HTTP
seam (runner/http.py) turns httpx's errors into `NoAnswer` (`ModelNoAnswer` for a model
request), so nothing else ever sees an httpx exception; the names differ from httpx's on
purpose, since the hierarchy does too. Which class a server's refusal becomes (status
codes, error codes, "try again in") is decided by the providers, in one place:
`runner.providers.refusals`. One retry decision (`runner.providers.retry.decide`) reads
any `RemoteError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from runner.frozen import frozen
from runner.items import Usage
from runner.vocabulary import RunStatus


class RunnerError(Exception):
    """Base of everything the runner raises on purpose."""


@frozen
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


class RemoteError(RunnerError):
    """A request to a server failed (a model provider, the GitHub API). These fields are
    all the retry decision reads, so every HTTP caller resends by the same rules."""

    retryable: bool = False
    """Resending the same request may help."""
    retry_after_s: float | None = None
    """How long the server asked us to wait before resending, if it said."""
    rate_limit: bool = False
    """The server says we send too much: every run of the provider should wait."""


class NoAnswer(RemoteError):
    """No answer at all: connecting or sending failed, or no status came in time."""

    retryable = True


class ModelError(RemoteError):
    """A model request failed. `retryable` says whether resending may help."""

    code: str | None = None
    usage: Usage | None = None
    """What the server billed for the failed answer (an incomplete or length-capped one),
    so the run's token counts still add up."""
    retries: int = 0
    retry_wait_s: float = 0.0
    """The resends and seconds of waiting the request cost before it failed for good
    (set by the retry policy), so a failed request's retries reach the report too."""
    partial_output: str | None = None
    """What the model wrote before `max_output_tokens` cut it off: kept for the report,
    since a cut-off answer is otherwise invisible."""

    @property
    def request_fault(self) -> bool:
        """The request itself was refused (resending it cannot help): a run that ends on
        it `failed`; otherwise the infrastructure gave out and the run is an `error`."""
        return not self.retryable


class ModelNoAnswer(ModelError, NoAnswer):
    """A model request that got no answer: a `NoAnswer` the run reports as a model one."""

    retryable = True

    def __init__(self, message: str, *, code: str | None = None) -> None:
        self.code = code
        super().__init__(message)


CONNECT_FAILED = "connect_failed"
"""`ModelNoAnswer.code` when no connection could be made at all (refused, DNS, TLS
handshake, connect timeout): the provider, not this request, is the trouble."""


class ProviderDown(ModelError):
    """The provider did not answer at all, several requests in a row
    (`budget.max_connect_failures`): nothing is sent to it any more, the runs of the
    batch still to start for it are skipped. An infrastructure failure (status `error`),
    never the request's fault."""

    code = "provider_down"

    @property
    def request_fault(self) -> bool:
        return False


class StatusRefusal(ModelError):
    """A non-2xx answer: its status, its body and the body's error code kept. Whether it
    may be resent is decided by the providers (`runner.providers.refusals`)."""

    @property
    def request_fault(self) -> bool:
        return self.status in (400, 413, 422)

    def __init__(
        self,
        message: str,
        *,
        status: int,
        body: str,
        code: str | None,
        retryable: bool,
        rate_limit: bool,
        retry_after_s: float | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.code = code
        self.retryable = retryable
        self.rate_limit = rate_limit
        self.retry_after_s = retry_after_s
        """How long the server asked us to wait (`retry-after-ms` / `Retry-After`)."""
        super().__init__(message)


class StreamFailure(ModelError):
    """The stream failed after a 200: `response.failed` or `incomplete`, an error event,
    a cut or malformed stream."""

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        retryable: bool = False,
        rate_limit: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        self.code = code
        self.retryable = retryable
        self.rate_limit = rate_limit
        self.retry_after_s = retry_after_s
        super().__init__(message)


class EncodingRefused(StreamFailure):
    """The server answered in a `Content-Encoding` the runner will not undo (anything but
    one layer of gzip or deflate). Final, since the server answers the same way again, and
    the run is an `error`, not `failed`: the request was fine, the server was not."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="content_encoding")

    @property
    def request_fault(self) -> bool:
        return False


class ContextWindowExceeded(ModelError):
    code = "context_length_exceeded"


class AnswerTruncated(ModelError):
    """The answer reached `max_output_tokens` before it was complete (or the cap cannot
    hold any answer). Final: the same request would be cut at the same cap, and billed
    again."""

    code = "max_output_tokens"


class SizeLimitReached(ModelError):
    """A byte cap of the run's `limits:` (one response, one item, the history, one request
    body) would be passed: the run stops with status `size_limit`, its work kept. Final:
    the same request would bring the same answer."""

    code = "size_limit"


class RateLimited(ModelError):
    """Still rate limited after every retry, or asked to wait longer than the cap."""

    code = "rate_limited"


class QuotaExhausted(ModelError):
    """The account is out of quota or credit: resending cannot help."""

    code = "insufficient_quota"


class AuthFailed(ModelError):
    """401 or 403: the API key is missing, wrong, or not allowed this model."""

    code = "auth_failed"


class GitHubError(RemoteError):
    """A GitHub REST call failed; the message names the call and what came back."""

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after_s: float | None = None
    ) -> None:
        self.retryable = retryable
        self.retry_after_s = retry_after_s
        super().__init__(message)


class BodyTooLarge(RemoteError):
    """An answer passed the byte cap of the client that read it (MCP servers, the GitHub
    API), counted as decoded: what a compressed body unfolds to is what memory holds.
    Final: the server answers the same way again."""


class RunEnds(RunnerError):
    """The agent loop ends the run here with `status`, and `reason` says why: a limit
    reached (turns, tool calls, budget) or a failure nothing more can help (the context
    window overflowing again after a compaction, or during one)."""

    def __init__(self, status: RunStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class McpError(RunnerError):
    """An MCP server could not start or list its tools: the run cannot have its tools."""


class UnsupportedSchema(RunnerError):
    """A schema shape the budgeted grammar cannot express exactly (the caller falls back
    to `response_format`)."""


class WorkspaceError(RunnerError):
    """A workspace could not be prepared, committed, branched, pushed or removed."""


class GitError(WorkspaceError):
    """A git command failed. Carries the argv (never a secret: those travel in the
    environment) and git's stderr with any secret removed."""

    def __init__(
        self,
        argv: Sequence[str],
        returncode: int,
        stderr: str,
        command: Sequence[str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stderr = stderr
        shown = " ".join(["git", *(command if command is not None else argv[1:])])
        super().__init__(f"`{shown}` failed (exit {returncode}): {stderr.strip()[:2000]}")


class ToolError(RunnerError):
    """A tool call could not be carried out; its message goes back to the model."""


class ToolArgumentsError(ToolError):
    """A tool call whose arguments are malformed or out of range; `str()` tells the model
    what to fix."""


class PatchError(ToolError):
    """A patch that cannot be parsed, planned or applied; `str()` is meant for the model."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(message)


class SkillError(RunnerError):
    """A skill folder that cannot be used; the message says what to fix."""


class EngineError(RunnerError):
    """The embedded model engine could not start or answer."""


class SandboxError(RunnerError):
    """The sandbox a run asked for cannot be set up; the run fails rather than run its
    commands unsandboxed. The message names the fix."""


class EnvironmentFault(RunnerError):
    """A container environment could not be built, started or used: the engine's CLI
    failed, or hung past its timeout on every retry. The message names the call and what
    the engine said. Never a score: the run is an `error`."""


class EnvironmentLost(EnvironmentFault):
    """The environment went away mid-run (its container killed or removed from outside,
    the engine gone): whatever the run did next would be judged against nothing, so the
    run ends as an `error`, never `failed` or `passed`."""


class VerifierFailed(RunnerError):
    """A benchmark suite's verifier ran but gave nothing to grade: no reward file, a
    reward that is no finite number, a test log without pytest's summary. The run is an
    `error`, never a score of 0: a broken verifier must not pass for a failed agent.
    `fresh` and `start_s`: it ran in an environment started for it, which took that long
    to start (SWE-bench), so the report's record of the attempt is true."""

    def __init__(self, message: str, *, fresh: bool = False, start_s: float | None = None):
        super().__init__(message)
        self.fresh = fresh
        self.start_s = start_s


class ReportError(RunnerError):
    """A report's statistics were given counts no batch can produce: a bug in whatever
    counted them, stopped before it prints a wrong number."""


class UnsafeFileError(RunnerError):
    """The runner refused to touch a file in a workspace or repository on the host: a
    symbolic link out of its root, a FIFO or device, or a file over the size limit. The
    message names the file and what is allowed."""


class PathRefused(UnsafeFileError):
    """A path an environment's file methods never reach, whatever is there: outside its
    workdir (by `..` or through a link), or into `.git` (in any spelling git folds) or
    another protected name. `reason` says why, without the path, for a caller that names
    the path its own way (apply_patch: "refused path 'x': <reason>")."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")
