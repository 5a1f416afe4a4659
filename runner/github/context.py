"""The event the action runs for and what it may do about it: who triggered it, whether
they may write, which sandbox and task file to use, the runner's command line. Pure: the
step's environment and files come in as arguments."""

from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.config.schema import McpServerConfig, Settings
from runner.errors import RunnerError
from runner.frozen import frozen
from runner.reports.fmt import PR_COMMENT_MAX_CHARS
from runner.vocabulary import REASONING_EFFORTS, SANDBOX_MODES

MARKER = "<!-- runner:summary -->"
"""Starts our PR comment, so the next run finds it and edits it instead of adding one."""
TAG_RE = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
"""What a `comment-tag` may be: it goes into an HTML comment, so no `-->`, no spaces."""
REPLY_MARKER = "<!-- runner:reply -->"
"""Starts an answer to a comment command: a new comment that no later run edits."""
MOVED_MARKER = "<!-- runner:moved:{run} -->"
"""Starts the notice on a nightly PR whose branch a person moved (one per PR, edited)."""
TASK_MARKER = "<!-- runner:task:{run} -->"
"""Starts a nightly PR's body: which run it belongs to."""
PR_EVENTS = frozenset(
    {
        "pull_request",
        "pull_request_target",
        "pull_request_review",
        "pull_request_review_comment",
        "pull_request_review_thread",
        "issue_comment",
        "merge_group",
    }
)
"""Events whose code or text comes from a pull request: `sandbox: auto` means read-only."""
EXEMPT_EVENTS = frozenset({"schedule", "workflow_dispatch", "push"})
"""Events only someone with write access can cause: the gate asks nobody. Every other
event, one GitHub adds tomorrow included, is gated."""
UNSANDBOXED_EVENTS = frozenset({"schedule", "workflow_dispatch"})
"""The only events on which a run may go without a sandbox (`danger-full-access`): no
text or code from a pull request, an issue or a comment reaches them."""
DEPENDABOT = "dependabot[bot]"
"""Its runs get Dependabot's secrets only, like a fork's get none."""
SANDBOXES = SANDBOX_MODES
MESSAGE_LIMIT = 20_000
"""Characters of a final message shown in a comment; the report has all of it."""
OPEN_MESSAGES = 3
"""Up to this many final messages are shown unfolded (a review); more are folded."""
EFFORTS = REASONING_EFFORTS
DEFAULT_MODEL = "openai/gpt-5.5"
"""The model of a one-task file made from `prompt` when no `model` is given."""
TABLE_ROWS = 50
"""Runs listed in a comment (a benchmark can have hundreds; the summary has them all)."""
COMMENT_LIMIT = PR_COMMENT_MAX_CHARS - 5_536
"""What a comment's body may use of GitHub's limit: the rest is room for the closing note."""
API_VERSION = "2022-11-28"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
"""Values of the collaborator-permission endpoint's `permission` that allow a push."""
ACTIONS_BOT = "github-actions[bot]"
"""Who writes with the workflow's own GITHUB_TOKEN (for which `GET /user` is refused)."""
PYTHON = (sys.executable, "-I")
"""Isolated mode: neither the working directory nor PYTHON* variables decide what is
imported (see the module docstring)."""


@frozen
class Context:
    """Where the action runs, from the variables GitHub sets for every step."""

    repository: str = ""
    server_url: str = "https://github.com"
    api_url: str = "https://api.github.com"
    run_id: str = ""
    event_name: str = ""
    event: Mapping[str, Any] | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Context:
        event: Mapping[str, Any] | None = None
        path = env.get("GITHUB_EVENT_PATH")
        if path and Path(path).is_file():
            try:
                loaded = json.loads(Path(path).read_text(encoding="utf-8"))
            except ValueError as exc:
                raise RunnerError(f"GITHUB_EVENT_PATH {path} is not JSON: {exc}") from None
            event = loaded if isinstance(loaded, dict) else None
        return cls(
            repository=env.get("GITHUB_REPOSITORY", ""),
            server_url=env.get("GITHUB_SERVER_URL", "https://github.com"),
            api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
            run_id=env.get("GITHUB_RUN_ID", ""),
            event_name=env.get("GITHUB_EVENT_NAME", ""),
            event=event,
        )

    @property
    def pr_number(self) -> int | None:
        """The pull request this event is about (an issue comment counts when on a PR)."""
        event = self.event or {}
        pr = event.get("pull_request")
        if isinstance(pr, dict) and isinstance(pr.get("number"), int):
            return int(pr["number"])
        issue = event.get("issue")
        if (
            isinstance(issue, dict)
            and "pull_request" in issue
            and isinstance(issue.get("number"), int)
        ):
            return int(issue["number"])
        return None

    @property
    def issue_number(self) -> int | None:
        """The pull request or issue this event is about: where a comment can go."""
        issue = (self.event or {}).get("issue")
        if isinstance(issue, dict) and isinstance(issue.get("number"), int):
            return int(issue["number"])
        return self.pr_number

    @property
    def prompt_id(self) -> str:
        """The task id of an inline prompt: one per issue or pull request (`issue-12`,
        `pr-7`), so the branch and PR that `push` keeps are that thread's own and two
        issues never update one PR; `prompt` when the event is about neither."""
        number = self.issue_number
        if number is None:
            return "prompt"
        return f"pr-{number}" if self.pr_number is not None else f"issue-{number}"

    @property
    def comment(self) -> Mapping[str, Any]:
        """The comment that triggered this run (a comment command), or {}."""
        found = (self.event or {}).get("comment")
        return found if isinstance(found, dict) else {}

    @property
    def on_pr(self) -> bool:
        """The event is about a pull request: its code or text is the PR author's."""
        return self.event_name in PR_EVENTS or self.pr_number is not None

    @property
    def people(self) -> list[Mapping[str, Any]]:
        """Whom the gate checks: the event's sender and the author of everything the event
        carries text or code from: the pull request, issue, discussion, comment or review,
        and a `workflow_run`'s actors and pull requests. A writer's label on a stranger's
        issue still runs the stranger's words, so the author counts as much as the sender."""
        event = self.event or {}
        found = [event.get("sender"), self.pull_request.get("user")]
        for key in ("issue", "discussion", "comment", "review"):
            thing = event.get(key)
            if isinstance(thing, dict):
                found.append(thing.get("user"))
        thread = event.get("thread")
        if isinstance(thread, dict):  # pull_request_review_thread: every comment's author
            found += [c.get("user") for c in thread.get("comments") or () if isinstance(c, dict)]
        run = self.workflow_run
        found += [run.get("actor"), run.get("triggering_actor")]
        for pr in run.get("pull_requests") or ():
            if isinstance(pr, dict):
                found.append(pr.get("user"))
        if run and self.foreign_code:  # a fork's code: whoever owns the fork wrote it
            head = run.get("head_repository")
            found.append(head.get("owner") if isinstance(head, dict) else None)
        return [u for u in found if isinstance(u, dict) and u.get("login")]

    @property
    def linked_prs(self) -> list[int]:
        """Pull requests whose authors the gate must look up through REST, because the
        payload names the PR but not who wrote it: a `workflow_run`'s `pull_requests`
        and the PR a `merge_group` queues (its number is only in `head_ref`,
        `refs/heads/gh-readonly-queue/<base>/pr-<number>-<sha>`)."""
        numbers = [
            int(pr["number"])
            for pr in self.workflow_run.get("pull_requests") or ()
            if isinstance(pr, dict) and isinstance(pr.get("number"), int)
        ]
        group = (self.event or {}).get("merge_group")
        if self.event_name == "merge_group" and isinstance(group, dict):
            m = re.search(r"gh-readonly-queue/.+/pr-(\d+)-[0-9a-f]+$", str(group.get("head_ref")))
            if m:
                numbers.append(int(m[1]))
        return sorted(set(numbers))

    @property
    def fork_head(self) -> str | None:
        """`owner:branch` of a `workflow_run` of a fork's pull request whose payload lists
        no pull request (GitHub leaves `pull_requests` empty for forks): the gate finds
        the PR from it through REST."""
        run = self.workflow_run
        if not run or not self.foreign_code or run.get("pull_requests"):
            return None
        head = run.get("head_repository")
        owner = head.get("owner") if isinstance(head, dict) else None
        login = owner.get("login") if isinstance(owner, dict) else None
        branch = run.get("head_branch")
        if not (isinstance(login, str) and login and isinstance(branch, str) and branch):
            return None
        return f"{login}:{branch}"

    @property
    def pull_request(self) -> Mapping[str, Any]:
        found = (self.event or {}).get("pull_request")
        return found if isinstance(found, dict) else {}

    @property
    def workflow_run(self) -> Mapping[str, Any]:
        """The run a `workflow_run` event follows, or {} on other events."""
        found = (
            (self.event or {}).get("workflow_run") if self.event_name == "workflow_run" else None
        )
        return found if isinstance(found, dict) else {}

    @property
    def from_fork(self) -> bool:
        """A pull request whose head branch is in another repository: GitHub gives its
        workflow runs no secrets and a read-only token. A head repository of `null` is a
        fork that was deleted: still not this repository."""
        if not self.pull_request:
            return False
        head = self.pull_request.get("head")
        if not isinstance(head, dict) or "repo" not in head:
            return False  # a payload without the field: nothing says it is a fork
        repo = head.get("repo")
        name = repo.get("full_name") if isinstance(repo, dict) else None
        return name != self.repository

    @property
    def foreign_code(self) -> bool:
        """The checked-out code may be someone else's: a pull-request event, or a
        `workflow_run` whose head is in another repository (a fork's pull request) or
        names none. Such runs get `sandbox: auto` read-only and never push."""
        if self.on_pr:
            return True
        if self.event_name != "workflow_run":
            return False
        head = self.workflow_run.get("head_repository")
        name = head.get("full_name") if isinstance(head, dict) else None
        return name != self.repository

    @property
    def run_url(self) -> str | None:
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


def summary_marker(tag: str) -> str:
    """The sticky comment's marker for one use of the Action: `MARKER` itself for the
    default (empty) tag, so comments written before tags existed are still found."""
    tag = tag.strip()
    if not tag:
        return MARKER
    if not re.fullmatch(TAG_RE, tag):
        raise RunnerError(
            "comment-tag must be 1-64 letters, digits, '.', '_' or '-', starting with a "
            f"letter or digit; got {tag!r}"
        )
    return f"<!-- runner:summary:{tag} -->"


def parse_models(text: str) -> list[str]:
    """The `models` input: provider/model entries separated by newlines, spaces or commas."""
    return [m for m in re.split(r"[\s,]+", text) if m]


def parse_names(text: str) -> set[str]:
    """A list input (`allow-users`, `allow-bots`): logins separated by newlines, spaces or
    commas, compared case-insensitively as GitHub does."""
    return {n.lower() for n in re.split(r"[\s,]+", text) if n}


def is_bot(user: Mapping[str, Any]) -> bool:
    login = str(user.get("login") or "")
    return user.get("type") == "Bot" or login.endswith("[bot]")


def bot_allowed(login: str, allowed: set[str]) -> bool:
    """`allow-bots` names bots with or without the `[bot]` suffix."""
    name = login.lower()
    return name in allowed or name.removesuffix("[bot]") in allowed


def prompt_task(
    prompt: str, *, repo: str, model: str, base_url: str, key_env: str, task_id: str = "prompt"
) -> dict[str, Any]:
    """The one-task file of an inline `prompt`: the same defaults as any task file (the
    runner's sandbox and tools, the Action's `sandbox` input on top), one task `task_id`
    in the checked-out repository. With `base_url` the model's provider is redefined to
    that endpoint, reading its key from `key_env`."""
    if not prompt.strip():
        raise RunnerError("prompt is empty (or prompt-file names an empty file)")
    data: dict[str, Any] = {
        "version": 1,
        "defaults": {"model": model or DEFAULT_MODEL},
        "tasks": [{"id": task_id, "prompt": prompt, "repo": repo}],
    }
    if base_url:
        provider = (model or DEFAULT_MODEL).split("/", 1)[0]
        if not re.fullmatch(r"https?://\S+", base_url):
            raise RunnerError(f"base-url must be an http(s) URL, got {base_url!r}")
        data["providers"] = {provider: {"base_url": base_url, "env_key": key_env}}
    return data


def provider_keys(task_file: Path, models: Sequence[str]) -> set[str]:
    """The key variables the providers of `task_file`'s runs read; empty when the file
    cannot be read (the runner then reports the located problem itself)."""
    from runner.config import expand, load_task_file

    try:
        tf = load_task_file(task_file)
        tasks = expand(tf, task_file.resolve().parent, file=str(task_file), models=models)
    except (RunnerError, OSError):
        return set()
    return {t.provider.env_key for t in tasks if t.provider.env_key}


def missing_keys(task_file: Path, models: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Provider key variables the runs of `task_file` need and `env` lacks."""
    return sorted(k for k in provider_keys(task_file, models) if not env.get(k))


def sandbox_for(requested: str, foreign: bool) -> str | None:
    """The `--sandbox` to pass: `auto` is read-only where the code may be someone else's
    (`foreign`: see Context.foreign_code) and the task file's own elsewhere; `task-file`
    (or empty) never overrides."""
    if requested == "auto":
        return "read-only" if foreign else None
    if requested in ("", "task-file"):
        return None
    if requested not in SANDBOXES:
        raise RunnerError(
            f"sandbox must be auto, task-file or one of {', '.join(SANDBOXES)}; got {requested!r}"
        )
    return requested


def trust_problems(task_file: Path, trusted: Path) -> list[str]:
    """Why the runner could read or start something that is not in `trusted`; [] if nothing.

    On pull requests the workflow replaces `trusted` (e.g. `.github/runner/`) with the base
    branch's copy, so whatever lies inside it is the maintainers'. Everything else in the
    checkout is the PR's. The task file may point outside its directory (`../../x.md`), or
    through a symlink, and a stdio MCP server starts, unsandboxed and with the runner's
    user, in the run's workspace (the PR's code) unless given a `cwd`: each of those would
    let the PR decide instructions, skills, schemas or code run outside the sandbox.
    A task file the runner will refuse anyway is left to the runner's located problems."""
    from runner.config import load_task_file
    from runner.errors import ConfigError

    root = trusted.resolve()
    if not task_file.resolve().is_relative_to(root):
        return [f"the task file {task_file} is not inside {trusted}"]
    try:
        tf = load_task_file(task_file)
    except ConfigError:
        return []
    check = _Trust(root, trusted, task_file.resolve().parent)
    layers: list[tuple[str, Settings]] = [("defaults", tf.defaults)]
    layers += [(f"tasks.{t.id}", t) for t in tf.tasks]
    for where, layer in layers:
        check.layer(where, layer)
    for variant in tf.matrix.variant if tf.matrix else ():
        if variant.instructions_file is not None:
            check.inside(
                variant.instructions_file, f"matrix.variant.{variant.name}.instructions_file"
            )
    if isinstance(tf.codex_config, str):
        check.inside(tf.codex_config, "codex_config")
    return check.problems


class _Trust:
    """The checks of `trust_problems`, collecting what leads outside `root`."""

    def __init__(self, root: Path, shown: Path, base: Path) -> None:
        self.root, self.shown, self.base = root, shown, base
        self.problems: list[str] = []

    def inside(self, raw: str, what: str, against: Path | None = None) -> Path:
        path = ((against or self.base) / raw).resolve()
        if not path.is_relative_to(self.root):
            self.problems.append(f"{what}: {raw} is outside {self.shown}")
        elif path.is_dir():
            for sub in sorted(path.rglob("*")):
                if not sub.resolve().is_relative_to(self.root):
                    self.problems.append(
                        f"{what}: {sub.relative_to(path)} in {raw} leads outside {self.shown}"
                    )
        return path

    def layer(self, where: str, layer: Settings) -> None:
        for name in ("instructions_file", "compact_prompt_file"):
            raw = getattr(layer, name)
            if raw is not None:
                self.inside(raw, f"{where}.{name}")
        if isinstance(layer.output_schema, str):
            self.inside(layer.output_schema, f"{where}.output_schema")
        for raw in layer.skills or ():
            self.inside(raw, f"{where}.skills")
        for name, server in (layer.mcp_servers or {}).items():
            self.mcp_server(f"{where}.mcp_servers.{name}", server)
        if layer.git is not None and layer.git.push is not None:
            self.problems.append(f"{where}.git.push: pull-request runs do not push")

    def mcp_server(self, what: str, server: McpServerConfig) -> None:
        if server.command is None:
            return  # a `url` server: nothing runs here
        if server.cwd is None:
            self.problems.append(
                f"{what}: a stdio MCP server runs outside the sandbox with the runner's "
                f"user, by default in the pull request's code; give it a `cwd` inside "
                f"{self.shown}, or use a `url` server"
            )
            return
        cwd = self.inside(server.cwd, f"{what}.cwd")
        program = server.command[0]
        if "/" in program and not program.startswith("/"):
            self.inside(program, f"{what}.command", cwd)


def runner_argv(
    task_file: str,
    *,
    out: str,
    models: Sequence[str],
    shard: str,
    sandbox: str | None,
    concurrency: str,
    effort: str = "",
    extra: Sequence[str] = (),
) -> list[str]:
    # Each job is a new batch, and a self-hosted runner keeps the workspace's out dir from
    # the job before: that batch was uploaded as the job's artifact, so it may go.
    argv = [*PYTHON, "-m", "runner", "run", task_file, "--out", out, "--force"]
    for model in models:
        argv += ["--model", model]
    if shard:
        argv += ["--shard", shard]
    if sandbox:
        argv += ["--sandbox", sandbox]
    if concurrency:
        argv += ["--concurrency", concurrency]
    if effort:
        if effort not in EFFORTS:
            raise RunnerError(
                f"reasoning-effort must be one of {', '.join(EFFORTS)}; got {effort!r}"
            )
        argv += ["--reasoning-effort", effort]
    return [*argv, *extra]


def parse_extra_args(text: str) -> list[str]:
    """`extra-args`: more `runner run` flags, split like a shell would (no shell runs)."""
    try:
        args = shlex.split(text)
    except ValueError as exc:
        raise RunnerError(f"extra-args: {exc} in {text!r}") from None
    for arg in args:
        flag = arg.split("=", 1)[0]
        for option, why in RESERVED_FLAGS.items():
            # argparse takes any unambiguous prefix ("--sand", "--ou") as the option.
            if len(flag) > 2 and flag.startswith("--") and option.startswith(flag):
                raise RunnerError(f"extra-args: {flag} is not taken there, {why}")
    return args


RESERVED_FLAGS = {
    "--sandbox": "so that the action knows the sandbox of every run; use the sandbox input",
    "--out": "so that the action finds the report it uploads; use the out-dir input",
    "--model": "so that the action checks the key of every model; use model or models",
    "--secret-fd": "the action hands the key over itself; use the api-key input",
}
"""`runner run` flags the action sets itself and checks before the run."""


def unsandboxed_runs(task_file: Path, sandbox: str | None, models: Sequence[str]) -> list[str]:
    """The runs of `task_file` that would start without a sandbox (`danger-full-access`):
    all of them when `sandbox` (the `--sandbox` passed) says so, else those whose task,
    defaults or variant do, expanded as the runner expands them. [] when the file is
    bad: the runner then refuses it itself, before any run starts."""
    from runner.config import expand, load_task_file

    try:
        tf = load_task_file(task_file)
        tasks = expand(tf, task_file.resolve().parent, file=str(task_file), models=models)
    except (RunnerError, OSError):
        return []
    if sandbox is not None:
        return [t.name for t in tasks] if sandbox == "danger-full-access" else []
    return [t.name for t in tasks if t.sandbox == "danger-full-access"]
