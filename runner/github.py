"""GitHub Actions glue for `actions/run`: what the composite action does besides installing.

It lives here rather than in the action's YAML so that it is typed, linted and tested like
the rest: the YAML only passes inputs through `env:` and calls `python -m runner.github`.

    can-write      the write-access gate of pull-request runs: a branch of this repository,
                   or the PR's author and the event's sender have write permission (or are
                   in allow-users); a bot author or sender only when in allow-bots
    run            the `runner run` command line from the action's inputs (a one-task file
                   made from `prompt`/`prompt-file`, or `runner report merge` of shard
                   reports); the API key is put into the runner's environment only (the
                   runner keeps it from the agent); with `--trusted-config` it first refuses
                   a task file that makes the runner read or start anything from outside that
                   (base-branch) directory. Expected situations (a fork's PR without the
                   key, the PR that adds the runner config) skip the run with a notice
    outputs        report.json -> $GITHUB_OUTPUT (conclusion, final-message, runs, cost, ...)
    comment        one sticky PR comment: found by its marker and edited, else created once
    pull-requests  push result branches; one PR per task, opened once and then updated
    finish         the runner's exit code -> the step's (exit 1 is optional; a skip is 0)

Everything a task produced (ids, messages, branches) is untrusted: it goes into Markdown only
through `inline`/`cell`, or, for final messages, through `safe_markdown.render`, so a model
cannot add links, images, HTML or mentions.

Every Python this module starts runs with `-I`: the step's working directory is the checked
out repository (on pull requests, the PR's code), and plain `python -m runner` would import a
`runner/` package from there before the installed one.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from runner import safe_markdown
from runner.errors import RunnerError
from runner.redact import Redactor
from runner.reports.markdown import cell, inline, mark, percent, tokens, truncate
from runner.reports.model import Report, TaskReport
from runner.sandbox.env import SECRET_NAME

MARKER = "<!-- runner:summary -->"
"""Starts our PR comment, so the next run finds it and edits it instead of adding one."""
TASK_MARKER = "<!-- runner:task:{run} -->"
"""Starts a nightly PR's body: which run it belongs to."""
PR_EVENTS = frozenset({"pull_request", "pull_request_target", "pull_request_review",
                       "pull_request_review_comment", "issue_comment", "merge_group"})
"""Events whose code or text comes from a pull request: `sandbox: auto` means read-only."""
SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
MESSAGE_LIMIT = 20_000
"""Characters of a final message shown in a comment; the report has all of it."""
OPEN_MESSAGES = 3
"""Up to this many final messages are shown unfolded (a review); more are folded."""
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
DEFAULT_MODEL = "openai/gpt-5.5"
"""The model of a one-task file made from `prompt` when no `model` is given."""
TABLE_ROWS = 50
"""Runs listed in a comment (a benchmark can have hundreds; the summary has them all)."""
COMMENT_LIMIT = 60_000
"""GitHub refuses bodies over 65,536 characters; keep room for the footer."""
API_VERSION = "2022-11-28"
WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})
"""Values of the collaborator-permission endpoint's `permission` that allow a push."""
ACTIONS_BOT = "github-actions[bot]"
"""Who writes with the workflow's own GITHUB_TOKEN (for which `GET /user` is refused)."""
PYTHON = (sys.executable, "-I")
"""Isolated mode: neither the working directory nor PYTHON* variables decide what is
imported (see the module docstring)."""
EXIT_BAD_INPUT, EXIT_RUNNER = 2, 3


# ----------------------------------------------------------------------- pure parts


@dataclass(frozen=True)
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
        return cls(repository=env.get("GITHUB_REPOSITORY", ""),
                   server_url=env.get("GITHUB_SERVER_URL", "https://github.com"),
                   api_url=env.get("GITHUB_API_URL", "https://api.github.com"),
                   run_id=env.get("GITHUB_RUN_ID", ""),
                   event_name=env.get("GITHUB_EVENT_NAME", ""), event=event)

    @property
    def pr_number(self) -> int | None:
        """The pull request this event is about (an issue comment counts when on a PR)."""
        event = self.event or {}
        pr = event.get("pull_request")
        if isinstance(pr, dict) and isinstance(pr.get("number"), int):
            return int(pr["number"])
        issue = event.get("issue")
        if isinstance(issue, dict) and "pull_request" in issue and isinstance(
                issue.get("number"), int):
            return int(issue["number"])
        return None

    @property
    def pull_request(self) -> Mapping[str, Any]:
        found = (self.event or {}).get("pull_request")
        return found if isinstance(found, dict) else {}

    @property
    def from_fork(self) -> bool:
        """A pull request whose head branch is in another repository: GitHub gives its
        workflow runs no secrets and a read-only token."""
        head = ((self.pull_request.get("head") or {}).get("repo") or {}).get("full_name")
        return bool(head) and head != self.repository

    @property
    def run_url(self) -> str | None:
        if not (self.repository and self.run_id):
            return None
        return f"{self.server_url}/{self.repository}/actions/runs/{self.run_id}"


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


def prompt_task(prompt: str, *, repo: str, model: str, base_url: str, key_env: str
                ) -> dict[str, Any]:
    """The one-task file of an inline `prompt`: the same defaults as any task file (the
    runner's sandbox and tools, the Action's `sandbox` input on top), one task `prompt`
    in the checked-out repository. With `base_url` the model's provider is redefined to
    that endpoint, reading its key from `key_env`."""
    if not prompt.strip():
        raise RunnerError("prompt is empty (or prompt-file names an empty file)")
    data: dict[str, Any] = {"version": 1, "defaults": {"model": model or DEFAULT_MODEL},
                            "tasks": [{"id": "prompt", "prompt": prompt, "repo": repo}]}
    if base_url:
        provider = (model or DEFAULT_MODEL).split("/", 1)[0]
        if not re.fullmatch(r"https?://\S+", base_url):
            raise RunnerError(f"base-url must be an http(s) URL, got {base_url!r}")
        data["providers"] = {provider: {"base_url": base_url, "env_key": key_env}}
    return data


def missing_keys(task_file: Path, models: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Provider key variables the runs of `task_file` need and `env` lacks; [] when the
    file cannot be read (the runner then reports the located problem itself)."""
    from runner.config import expand, load_task_file

    try:
        tf = load_task_file(task_file)
        tasks = expand(tf, task_file.resolve().parent, file=str(task_file), models=models)
    except (RunnerError, OSError):
        return []
    return sorted({t.provider.env_key for t in tasks
                   if t.provider.env_key and not env.get(t.provider.env_key)})


def sandbox_for(requested: str, event_name: str) -> str | None:
    """The `--sandbox` to pass: `auto` is read-only on pull-request events and the task
    file's own elsewhere; `task-file` (or empty) never overrides."""
    if requested == "auto":
        return "read-only" if event_name in PR_EVENTS else None
    if requested in ("", "task-file"):
        return None
    if requested not in SANDBOXES:
        raise RunnerError(f"sandbox must be auto, task-file or one of {', '.join(SANDBOXES)}; "
                          f"got {requested!r}")
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
    from runner.config import Settings, load_task_file
    from runner.errors import ConfigError

    root = trusted.resolve()
    if not task_file.resolve().is_relative_to(root):
        return [f"the task file {task_file} is not inside {trusted}"]
    try:
        tf = load_task_file(task_file)
    except ConfigError:
        return []
    base = task_file.resolve().parent
    problems: list[str] = []

    def inside(raw: str, what: str, against: Path = base) -> Path:
        path = (against / raw).resolve()
        if not path.is_relative_to(root):
            problems.append(f"{what}: {raw} is outside {trusted}")
        elif path.is_dir():
            for sub in sorted(path.rglob("*")):
                if not sub.resolve().is_relative_to(root):
                    problems.append(f"{what}: {sub.relative_to(path)} in {raw} leads outside "
                                    f"{trusted}")
        return path

    layers: list[tuple[str, Settings]] = [("defaults", tf.defaults)]
    layers += [(f"tasks.{t.id}", t) for t in tf.tasks]
    for where, layer in layers:
        for name in ("instructions_file", "compact_prompt_file"):
            raw = getattr(layer, name)
            if raw is not None:
                inside(raw, f"{where}.{name}")
        if isinstance(layer.output_schema, str):
            inside(layer.output_schema, f"{where}.output_schema")
        for raw in layer.skills or ():
            inside(raw, f"{where}.skills")
        for name, server in (layer.mcp_servers or {}).items():
            what = f"{where}.mcp_servers.{name}"
            if server.command is None:
                continue  # a `url` server: nothing runs here
            if server.cwd is None:
                problems.append(
                    f"{what}: a stdio MCP server runs outside the sandbox with the runner's "
                    f"user, by default in the pull request's code; give it a `cwd` inside "
                    f"{trusted}, or use a `url` server")
                continue
            cwd = inside(server.cwd, f"{what}.cwd")
            program = server.command[0]
            if "/" in program and not program.startswith("/"):
                inside(program, f"{what}.command", cwd)
        if layer.git is not None and layer.git.push is not None:
            problems.append(f"{where}.git.push: pull-request runs do not push")
    for variant in tf.matrix.variant if tf.matrix else ():
        if variant.instructions_file is not None:
            inside(variant.instructions_file, f"matrix.variant.{variant.name}.instructions_file")
    if isinstance(tf.codex_config, str):
        inside(tf.codex_config, "codex_config")
    return problems


def runner_argv(task_file: str, *, out: str, models: Sequence[str], shard: str,
                sandbox: str | None, concurrency: str, effort: str = "",
                extra: Sequence[str] = ()) -> list[str]:
    argv = [*PYTHON, "-m", "runner", "run", task_file, "--out", out]
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
            raise RunnerError(f"reasoning-effort must be one of {', '.join(EFFORTS)}; "
                              f"got {effort!r}")
        argv += ["--reasoning-effort", effort]
    return [*argv, *extra]


def parse_extra_args(text: str) -> list[str]:
    """`extra-args`: more `runner run` flags, split like a shell would (no shell runs)."""
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise RunnerError(f"extra-args: {exc} in {text!r}") from None


def _cost(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def outputs_for(report: Report, report_path: str) -> dict[str, str]:
    """The action's outputs. Numbers are plain (no thousands separators) so that workflow
    expressions can compare them; unknown values (no price, nothing sent) are empty."""
    t = report.totals
    ratio = t.usage.cache_hit_ratio
    # Only branches that outlive the job: the ones the runner pushed (`git.push`). The
    # pull-requests step reports the branches it keeps; local ones go with the machine.
    branches = {r.run or r.id: r.result.pushed.removeprefix("refs/heads/")
                for r in report.tasks if r.result is not None and r.result.pushed}
    return {
        "runs": str(t.runs), "passed": str(t.completed),
        "failed": str(t.not_completed - t.skipped),
        "tokens": str(t.usage.total_tokens), "cached-tokens": str(t.usage.cached_tokens),
        "cache-hit-ratio": "" if ratio is None else f"{ratio:.4f}",
        "cost": _cost(t.cost_usd),
        "branches": json.dumps(branches, sort_keys=True),
        "branch": next(iter(branches.values())) if len(branches) == 1 else "",
        "final-message": final_message(report),
        "report": report_path,
    }


def final_message(report: Report) -> str:
    """The `final-message` output: the only run's message, or each run's under its name."""
    said = [(t.run or t.id, t.final_message) for t in report.tasks
            if t.final_message and t.final_message.strip()]
    if len(report.tasks) == 1:
        return said[0][1] if said else ""
    return "\n\n".join(f"## {name}\n\n{text}" for name, text in said)


def format_outputs(values: Mapping[str, str]) -> str:
    """`$GITHUB_OUTPUT` text in the heredoc form, which takes any value, newlines included.
    The delimiter is random and checked against the value, so a value cannot end it early
    and set another output."""
    lines = []
    for name, value in values.items():
        delimiter = f"runner_{secrets.token_hex(16)}"
        while delimiter in value:  # pragma: no cover - 128 random bits
            delimiter = f"runner_{secrets.token_hex(16)}"
        lines += [f"{name}<<{delimiter}", value, delimiter]
    return "\n".join(lines) + "\n"


def _changes(t: TaskReport) -> str:
    r = t.result
    if r is None:
        return "-"
    where = f"`{cell(r.branch)}`" if r.branch else "no branch (scope)"
    return f"{where} +{r.insertions} -{r.deletions} in {r.files_changed} file(s)"


def _why(t: TaskReport) -> str:
    why = t.error or ""
    if not why and t.check is not None and not t.check.passed:
        why = f"check {t.check.command} exited {t.check.exit_code}: {t.check.output_tail}"
    # A zero-width joiner after "@" keeps a model-made "@user" from notifying anyone.
    return re.sub(r"@(?=\w)", "@\u2060", inline(truncate(why))) if why.strip() else ""


def _cost_cell(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def _totals_line(report: Report) -> str:
    t = report.totals
    ratio = percent(t.usage.cache_hit_ratio)
    cost = "cost unknown" if t.cost_usd is None else f"cost ${t.cost_usd:.4f}"
    return (f"**Totals:** {t.runs} run(s), {t.requests} request(s), {t.tool_calls} tool "
            f"call(s), {tokens(t.usage.total_tokens)} tokens, {tokens(t.usage.cached_tokens)} "
            f"cached ({ratio}), {cost}.")


def _footer(report: Report, ctx: Context, artifact: str) -> str:
    parts = [f"run id `{inline(report.run_id)}`"]
    if ctx.run_url:
        parts.insert(0, f"[workflow run]({ctx.run_url})")
    if artifact:
        parts.append(f"artifact `{inline(artifact)}`")
    return "<sub>" + " · ".join(parts) + "</sub>"


def rendered(message: str, ctx: Context, artifact: str) -> str:
    """A final message as safe HTML (see runner/safe_markdown.py), cut at MESSAGE_LIMIT
    with a pointer to the report artifact of this workflow run."""
    where = (f"the report artifact <code>{html.escape(artifact)}</code>" if artifact
             else "the report")
    if ctx.run_url:
        where += f' of <a href="{html.escape(ctx.run_url)}">this workflow run</a>'
    return safe_markdown.render(message, server_url=ctx.server_url, repository=ctx.repository,
                                limit=MESSAGE_LIMIT, more=f"The full text is in {where}.")


def render_notice(notice: str, ctx: Context) -> str:
    """The sticky comment of a run that was skipped on purpose (the same marker, so a
    later real run edits it)."""
    link = f" ([workflow run]({ctx.run_url}))" if ctx.run_url else ""
    return f"{MARKER}\n### runner: skipped\n\n{inline(notice)}{link}\n"


def render_comment(report: Report, ctx: Context, *, artifact: str = "") -> str:
    """The sticky PR comment: headline, one row per run, why runs failed, and each run's
    final message (a review, an explanation) rendered from its Markdown, made safe."""
    t = report.totals
    head = [MARKER, f"### runner: {t.completed} of {t.runs} run(s) passed", ""]
    if report.tasks:
        head += ["| Run | Model | Status | Tokens | Cached | Cost | Changes |",
                 "|---|---|---|--:|--:|--:|---|"]
        head += [f"| {cell(r.run or r.id)} | {cell(r.model)} | {mark(r.status)} | "
                 f"{tokens(r.usage.total_tokens)} | {percent(r.usage.cache_hit_ratio)} | "
                 f"{_cost_cell(r.cost_usd)} | {_changes(r)} |"
                 for r in report.tasks[:TABLE_ROWS]]
        if len(report.tasks) > TABLE_ROWS:
            head.append(f"\n{len(report.tasks) - TABLE_ROWS} more run(s) in the report.")
        head.append("")
    head.append(_totals_line(report))
    failed = [f"- **{inline(r.run or r.id)}** {mark(r.status)}" + (f": {w}" if (w := _why(r))
                                                                    else "")
              for r in report.tasks if r.status != "completed"][:TABLE_ROWS]
    if failed:
        head += ["", "#### Not completed", "", *failed]
    footer = _footer(report, ctx, artifact)
    body = "\n".join(head)
    said = [r for r in report.tasks if r.final_message and r.final_message.strip()]
    for r in said:
        shown = rendered(r.final_message or "", ctx, artifact)
        fold = " open" if len(said) <= OPEN_MESSAGES else ""
        block = (f"\n\n<details{fold}><summary>{inline(r.run or r.id)}: final message"
                 f"</summary>\n\n{shown}\n\n</details>")
        if len(body) + len(block) + len(footer) > COMMENT_LIMIT:
            body += "\n\nMore final messages are in the report artifact."
            break
        body += block
    return f"{body}\n\n{footer}\n"


def render_pr_body(task: TaskReport, report: Report, ctx: Context) -> str:
    """A nightly PR's description: what ran, how it went, what the agent said."""
    lines = [TASK_MARKER.format(run=task.run or task.id),
             f"Automated change by **runner**: task **{inline(task.id)}** on "
             f"{inline(task.model)}.", "",
             f"- Status: {mark(task.status)}",
             f"- Tokens: {tokens(task.usage.total_tokens)}, cached "
             f"{percent(task.usage.cache_hit_ratio)}, cost {_cost_cell(task.cost_usd)}",
             f"- Changes: {_changes(task)}"]
    if task.check is not None:
        verdict = "passed" if task.check.passed else f"failed (exit {task.check.exit_code})"
        lines.append(f"- Check `{cell(task.check.command)}`: {verdict}")
    if task.final_message and task.final_message.strip():
        lines += ["", "Final message:", "", rendered(task.final_message, ctx, "")]
    lines += ["", _footer(report, ctx, "")]
    return "\n".join(lines) + "\n"


def secret_values(env: Mapping[str, str]) -> list[str]:
    """Values of secret-looking variables, masked from anything we send to GitHub."""
    return [v for k, v in env.items() if SECRET_NAME.search(k) and v]


# ----------------------------------------------------------------------- GitHub REST


class GitHub:
    """A small REST client: bearer token, JSON, pagination, and a few resends for the
    transient failures (connection errors, 5xx, 429) that hosted runners do see."""

    def __init__(self, api_url: str, token: str, *, attempts: int = 3) -> None:
        import httpx

        self._httpx = httpx
        self._attempts = attempts
        self._client = httpx.Client(
            base_url=api_url.rstrip("/"), timeout=30.0,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                     "X-GitHub-Api-Version": API_VERSION, "User-Agent": "runner-action"})

    def close(self) -> None:
        self._client.close()

    def request(self, method: str, path: str, *, json_body: Any = None,
                params: Mapping[str, str] | None = None, ok: Sequence[int] = ()) -> Any:
        """JSON of a 2xx answer (None for 204); a status in `ok` returns None too."""
        for attempt in range(1, self._attempts + 1):
            try:
                resp = self._client.request(method, path, json=json_body, params=params)
            except self._httpx.TransportError as exc:
                if attempt == self._attempts:
                    raise RunnerError(f"GitHub {method} {path}: {type(exc).__name__}") from None
                time.sleep(attempt)
                continue
            if resp.status_code in ok:
                return None
            if (resp.status_code >= 500 or resp.status_code == 429) and attempt < self._attempts:
                wait = resp.headers.get("retry-after", "")
                time.sleep(min(float(wait), 30.0) if wait.isdigit() else attempt)
                continue
            if resp.status_code >= 300:
                try:
                    message = str(resp.json().get("message", ""))
                except ValueError:
                    message = ""
                raise RunnerError(f"GitHub {method} {path}: HTTP {resp.status_code} "
                                  f"{truncate(message, 200)}".rstrip())
            return resp.json() if resp.content else None
        raise AssertionError("unreachable")  # pragma: no cover

    def paginate(self, path: str, params: Mapping[str, str] | None = None,
                 max_pages: int = 50) -> list[Any]:
        items: list[Any] = []
        for page in range(1, max_pages + 1):
            got = self.request("GET", path, params={**(params or {}), "per_page": "100",
                                                    "page": str(page)})
            if not isinstance(got, list):
                raise RunnerError(f"GitHub GET {path}: expected a list")
            items += got
            if len(got) < 100:
                break
        return items


def token_login(gh: GitHub) -> str:
    """The account the token writes as: `GET /user` for a personal access token; the
    workflow's GITHUB_TOKEN (an installation token) is refused there and writes as
    github-actions[bot]. Another App's token is refused too: pass `comment-author`."""
    try:
        me = gh.request("GET", "/user", ok=(401, 403, 404))
    except RunnerError:
        me = None
    login = me.get("login") if isinstance(me, dict) else None
    return login if isinstance(login, str) and login else ACTIONS_BOT


def has_write_access(gh: GitHub, repo: str, user: str) -> bool:
    """The collaborator-permission endpoint, which counts teams, organisation roles and
    base permissions (an `author_association` of MEMBER or COLLABORATOR does not imply
    write access). A user who is not a collaborator is a 404: no access."""
    got = gh.request("GET", f"/repos/{repo}/collaborators/{quote(user, safe='')}/permission",
                     ok=(404,))
    return isinstance(got, dict) and got.get("permission") in WRITE_PERMISSIONS


def upsert_comment(gh: GitHub, repo: str, number: int, body: str, *, author: str
                   ) -> tuple[str, int]:
    """Edit our comment on the PR if it is there, else create it: ("patched"|"created", id).

    Ours means: the body starts with the marker and `author` (the token's account) wrote
    it, so a comment that merely quotes the marker is never taken over."""
    for c in gh.paginate(f"/repos/{repo}/issues/{number}/comments"):
        login = (c.get("user") or {}).get("login", "")
        if str(c.get("body", "")).startswith(MARKER) and login == author:
            gh.request("PATCH", f"/repos/{repo}/issues/comments/{c['id']}",
                       json_body={"body": body})
            return "patched", int(c["id"])
    made = gh.request("POST", f"/repos/{repo}/issues/{number}/comments", json_body={"body": body})
    return "created", int(made["id"])


def set_branch(gh: GitHub, repo: str, branch: str, sha: str) -> None:
    """Point `branch` at `sha` on GitHub, creating it or moving it (forced: a bot branch)."""
    if gh.request("GET", f"/repos/{repo}/git/ref/heads/{branch}", ok=(404,)) is None:
        gh.request("POST", f"/repos/{repo}/git/refs",
                   json_body={"ref": f"refs/heads/{branch}", "sha": sha})
    else:
        gh.request("PATCH", f"/repos/{repo}/git/refs/heads/{branch}",
                   json_body={"sha": sha, "force": True})


def upsert_pull_request(gh: GitHub, repo: str, *, head: str, base: str, title: str,
                        body: str) -> tuple[str, str]:
    """("updated"|"created", url): the open PR from `head`, or a new one."""
    owner = repo.split("/", 1)[0]
    found = gh.request("GET", f"/repos/{repo}/pulls",
                       params={"state": "open", "head": f"{owner}:{head}", "base": base})
    if isinstance(found, list) and found:
        number = found[0]["number"]
        pr = gh.request("PATCH", f"/repos/{repo}/pulls/{number}",
                        json_body={"title": title, "body": body})
        return "updated", str(pr["html_url"])
    pr = gh.request("POST", f"/repos/{repo}/pulls",
                    json_body={"title": title, "head": head, "base": base, "body": body})
    return "created", str(pr["html_url"])


# ----------------------------------------------------------------------- commands


def annotate(kind: str, title: str, message: str) -> None:
    """A workflow command (`::warning` / `::error`); newlines and `%` escaped so a message
    cannot start a command of its own on the next line."""
    esc = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::{kind} title={title}::{esc}", flush=True)


def _write_outputs(values: Mapping[str, str], env: Mapping[str, str]) -> None:
    path = env.get("GITHUB_OUTPUT")
    text = format_outputs(values)
    if not path:
        sys.stdout.write(text)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def _append_summary(text: str, env: Mapping[str, str]) -> None:
    path = env.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)


def _load_report(path: Path) -> Report | None:
    """The report, or None (with a warning) when the runner stopped before writing one:
    the runner's own exit code already fails the job, later steps need not fail too."""
    if not path.is_file():
        annotate("warning", "runner", f"no report at {path}")
        return None
    try:
        return Report.model_validate_json(path.read_bytes())
    except ValueError as exc:
        raise RunnerError(f"{path} is not a runner report: {truncate(str(exc))}") from None


def _token(env: Mapping[str, str], name: str) -> str:
    token = env.get(name, "")
    if not token:
        raise RunnerError(f"{name} is empty: pass github-token (needs pull-requests: write)")
    return token


def merge_argv(patterns: str, out: str) -> list[str]:
    """`runner report merge` over the directories the globs match (shard artifacts)."""
    dirs = sorted({str(p) for pat in patterns.split() for p in Path().glob(pat) if p.is_dir()})
    if not dirs:
        raise RunnerError(f"merge: no directory matches {patterns!r}")
    return [*PYTHON, "-m", "runner", "report", "merge", *dirs, "--out", out]


def _skip(reason: str, env: Mapping[str, str]) -> int:
    """End the run step green without running: an expected situation, not a failure.
    The outputs step turns `skipped` into conclusion `skipped`, the comment step into the
    sticky comment (where the token may write)."""
    annotate("notice", "runner", f"not run: {reason}")
    _append_summary(f"**runner** did not run: {inline(reason)}.\n", env)
    _write_outputs({"skipped": reason}, env)
    return 0


def _task_source(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
    """(task file to run, file the pull request must not control): the `task-file`, or a
    one-task file made from `prompt` / `prompt-file` outside the workspace."""
    given = [n for n, v in (("task-file", args.task_file), ("prompt", args.prompt),
                            ("prompt-file", args.prompt_file)) if v.strip()]
    if len(given) > 1:
        raise RunnerError(f"give one of task-file, prompt and prompt-file; got "
                          f"{' and '.join(given)}")
    if not given:
        raise RunnerError("one of task-file, prompt or prompt-file is required (or merge, "
                          "to combine shard reports)")
    if args.task_file.strip():
        return args.task_file, args.task_file
    if args.prompt_file.strip() and not Path(args.prompt_file).is_file():
        return "", args.prompt_file  # the caller skips or fails on the missing file
    text = args.prompt
    if args.prompt_file.strip():
        try:
            text = Path(args.prompt_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RunnerError(f"prompt-file {args.prompt_file}: {exc}") from None
    import yaml

    data = prompt_task(text, repo=env.get("GITHUB_WORKSPACE") or os.getcwd(),
                       model=args.model.strip(), base_url=args.base_url.strip(),
                       key_env=args.api_key_env)
    folder = Path(env.get("RUNNER_TEMP") or os.getcwd()) / f"runner-prompt-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(path), args.prompt_file


def cmd_run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    ctx = Context.from_env(env)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.api_key_env):
        raise RunnerError(f"api-key-env must be a variable name, got {args.api_key_env!r}")
    child = dict(env)
    key = child.pop("RUNNER_API_KEY", "")
    if key:
        child[args.api_key_env] = key
    models = parse_models(f"{args.model} {args.models}")
    merging = bool(args.merge.strip())
    on_pr = ctx.event_name in PR_EVENTS
    if merging:
        argv = merge_argv(args.merge, args.out)
    else:
        task_file, guarded = _task_source(args, env)
        trusted = args.trusted_config.strip()
        if not Path(guarded or task_file).is_file() and trusted and on_pr:
            # The base branch has no runner config yet: the PR that adds it.
            return _skip(f"the base branch has no {guarded}; this pull request probably adds "
                         "it, and runner runs on pull requests once it is merged", env)
        if not task_file:
            raise RunnerError(f"prompt-file {guarded}: no such file")
        if trusted and guarded:
            problems = trust_problems(Path(guarded), Path(trusted)) if guarded == task_file \
                else ([] if Path(guarded).resolve().is_relative_to(Path(trusted).resolve())
                      else [f"the prompt file {guarded} is not inside {trusted}"])
            if problems:
                for problem in problems:
                    annotate("error", "runner trusted-config", problem)
                _write_outputs({"exit-code": str(EXIT_BAD_INPUT)}, env)
                _append_summary("**runner** did not run: the task file reaches outside "
                                f"`{inline(trusted)}` (see the log).\n", env)
                return 0
        elif on_pr and guarded:
            annotate("warning", "runner", "a pull-request run without trusted-config: the task "
                     "file may read or start files of the pull request (see examples/workflows"
                     "/pr.yml)")
        argv = runner_argv(task_file, out=args.out, models=models,
                           shard=args.shard.strip(),
                           sandbox=sandbox_for(args.sandbox.strip(), ctx.event_name),
                           concurrency=args.concurrency.strip(),
                           effort=args.reasoning_effort.strip().lower(),
                           extra=parse_extra_args(args.extra_args))
        lacking = missing_keys(Path(task_file), models, child) if on_pr and ctx.from_fork \
            else []
        if lacking:
            return _skip(f"{', '.join(lacking)} is not set: GitHub passes no secrets to "
                         "workflows of pull requests from forks", env)
    print("runner " + " ".join(argv[len(PYTHON) + 2:]), flush=True)  # no secret in argv
    code = subprocess.run(argv, env=child, check=False).returncode
    _write_outputs({"exit-code": str(code)}, env)
    if code >= EXIT_BAD_INPUT and not (Path(args.out) / "report.json").is_file():
        _append_summary(f"**runner** exited {code} before writing a report; see the log.\n",
                        env)
    return 0


def cmd_outputs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Every output the Action documents, also when nothing ran: `conclusion` is
    `skipped` (with the reason as `notice`) when the gate or the run step skipped,
    `success` when the runner exited 0, `failure` otherwise."""
    values = {"conclusion": "failure", "notice": "", "final-message": "", "report": "",
              "branch": "", "branches": "{}"}
    notice = args.reason if args.allowed != "true" else args.skipped
    if notice.strip():
        values.update(conclusion="skipped", notice=notice)
        _write_outputs(values, env)
        return 0
    if args.exit_code.strip() == "0":
        values["conclusion"] = "success"
    report = _load_report(Path(args.report)) if args.exit_code.strip() else None
    if report is not None:
        values.update(outputs_for(report, args.report))
    _write_outputs(values, env)
    return 0


def cmd_comment(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"comment must be auto, true or false; got {args.mode!r}")
    number = args.pr or ctx.pr_number
    if mode == "false" or (mode == "auto" and number is None):
        return 0
    if args.notice.strip():
        body = render_notice(args.notice, ctx)
    else:
        report = _load_report(Path(args.report))
        if report is None:
            return 0
        body = render_comment(report, ctx, artifact=args.artifact)
    body = Redactor(secret_values(env))(body)
    if args.write:
        Path(args.write).write_text(body, encoding="utf-8")
    if number is None:
        raise RunnerError("comment: true, but this event is not about a pull request")
    gh = GitHub(ctx.api_url, _token(env, args.token_env))
    try:
        author = args.author.strip() or token_login(gh)
        how, comment_id = upsert_comment(gh, ctx.repository, number, body, author=author)
    except RunnerError as exc:
        # A fork's PR gets a read-only token: the summary is still in the job summary.
        # For a skipped run that is expected, so only a notice.
        annotate("notice" if args.notice.strip() else "warning", "runner comment", str(exc))
        return 0
    finally:
        gh.close()
    print(f"comment {comment_id} {how} on #{number}")
    return 0


def cmd_can_write(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`allowed=true|false` in $GITHUB_OUTPUT. On pull-request events (or `--mode true`):
    a head branch in this repository was pushed by someone with write access; from a fork,
    the PR's author and the event's sender must both have write permission. Any API
    failure counts as no."""
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"require-write-access must be auto, true or false; got {args.mode!r}")
    event = ctx.event or {}
    pr = ctx.pull_request
    allow_users = parse_names(args.allow_users)
    allow_bots = parse_names(args.allow_bots)
    if "*" in allow_bots:
        raise RunnerError("allow-bots takes bot names (e.g. dependabot, renovate[bot]); '*' "
                          "would let any app's bot spend the API key")
    allowed, why = True, "not required"
    if mode == "true" or (mode == "auto" and ctx.event_name in PR_EVENTS):
        head = ((pr.get("head") or {}).get("repo") or {}).get("full_name")
        people = [u for u in (pr.get("user"), event.get("sender")) if isinstance(u, dict)
                  and u.get("login")]
        users = sorted({str(u["login"]) for u in people})
        bots = sorted({str(u["login"]) for u in people if is_bot(u)
                       and not bot_allowed(str(u["login"]), allow_bots)})
        if bots:
            allowed, why = False, (f"{', '.join(bots)} is a bot; list it in allow-bots to run "
                                   "for it")
        elif head and head == ctx.repository:
            why = "the head branch is in this repository"
        elif not users:
            allowed, why = False, "the event names no user to check"
        elif "*" in allow_users or all(u.lower() in allow_users for u in users):
            why = f"{', '.join(users)} allowed by allow-users"
        else:
            gh = GitHub(ctx.api_url, _token(env, args.token_env))
            try:
                lacking = [u for u in users if u.lower() not in allow_users
                           and not has_write_access(gh, ctx.repository, u)]
            except RunnerError as exc:
                annotate("warning", "runner can-write", str(exc))
                lacking = users
            finally:
                gh.close()
            allowed = not lacking
            why = (f"{', '.join(users)} may write" if allowed
                   else f"{', '.join(lacking)} has no write access to {ctx.repository} and "
                        "is not in allow-users")
    print(f"write access: {'yes' if allowed else 'no'} ({why})")
    values = {"allowed": "true" if allowed else "false"}
    if not allowed:
        annotate("notice", "runner", f"not run: {why}")
        _append_summary(f"**runner** did not run: {inline(why)}.\n", env)
        values["reason"] = why
    _write_outputs(values, env)
    return 0


def cmd_pull_requests(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    from runner.workspace import push_sync

    ctx = Context.from_env(env)
    if ctx.event_name in PR_EVENTS:
        raise RunnerError("push: pull-request runs never push; the patches are in the "
                          "report artifact")
    report = _load_report(Path(args.report))
    if report is None:
        return 0
    token = _token(env, args.token_env)
    redact = Redactor(secret_values(env))
    base = args.base or str(((ctx.event or {}).get("repository") or {}).get(
        "default_branch") or "main")
    gh = GitHub(ctx.api_url, token)
    made: dict[str, str] = {}
    kept: dict[str, str] = {}
    failures = 0
    try:
        for t in report.tasks:
            r = t.result
            if r is None or r.branch is None or t.status not in args.statuses.split(","):
                continue
            run = t.run or t.id
            stable = f"{args.branch_prefix}{run}"
            try:
                if r.pushed is None:
                    push_sync(Path(args.repo_dir), r.branch, remote=args.remote, token=token)
                if stable != r.branch:
                    set_branch(gh, ctx.repository, stable, r.commit)
                    gh.request("DELETE", f"/repos/{ctx.repository}/git/refs/heads/{r.branch}",
                               ok=(404, 422))
                how, url = upsert_pull_request(
                    gh, ctx.repository, head=stable, base=base, title=f"runner: {run}",
                    body=redact(render_pr_body(t, report, ctx)))
            except RunnerError as exc:  # WorkspaceError included
                failures += 1
                annotate("warning", "runner pull request", f"{run}: {redact(str(exc))}")
                continue
            made[run] = url
            kept[run] = stable
            print(f"{run}: pull request {how}: {url}")
    finally:
        gh.close()
    _write_outputs({"pull-requests": json.dumps(made, sort_keys=True),
                    "branches": json.dumps(kept, sort_keys=True),
                    "branch": next(iter(kept.values())) if len(kept) == 1 else "",
                    "pr-url": next(iter(made.values())) if len(made) == 1 else ""}, env)
    return 1 if failures else 0


def cmd_finish(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    if args.skipped.strip():
        return 0
    if not args.exit_code.strip().isdigit():
        annotate("error", "runner", "the run step did not finish")
        return EXIT_RUNNER
    code = int(args.exit_code)
    if code == 1 and args.fail_on_task_failure.strip().lower() != "true":
        return 0
    return code


DOCS_START = "<!-- action-docs:start (make action-docs writes this from action.yml) -->"
DOCS_END = "<!-- action-docs:end -->"


def _doc_cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def action_docs(action: Mapping[str, Any]) -> str:
    """README's tables of the Action's inputs and outputs: action.yml is the one source,
    `make action-docs` copies it and a test checks that the README is up to date."""
    lines = [DOCS_START, "", "| Input | Default | What it is for |", "|---|---|---|"]
    for name, spec in action["inputs"].items():
        default = str(spec.get("default", ""))
        lines.append(f"| `{name}` | {f'`{default}`' if default else ''} | "
                     f"{_doc_cell(spec.get('description', ''))} |")
    lines += ["", "| Output | What it holds |", "|---|---|"]
    for name, spec in action["outputs"].items():
        lines.append(f"| `{name}` | {_doc_cell(spec.get('description', ''))} |")
    return "\n".join([*lines, "", DOCS_END])


def readme_with_docs(readme: str, action: Mapping[str, Any]) -> str:
    if readme.count(DOCS_START) != 1 or readme.count(DOCS_END) != 1:
        raise RunnerError(f"README needs one {DOCS_START!r} and one {DOCS_END!r} line")
    head, rest = readme.split(DOCS_START, 1)
    return head + action_docs(action) + rest.split(DOCS_END, 1)[1]


def cmd_docs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    import yaml

    action = yaml.safe_load(Path(args.action).read_text(encoding="utf-8"))
    readme = Path(args.readme)
    readme.write_text(readme_with_docs(readme.read_text(encoding="utf-8"), action),
                      encoding="utf-8")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m runner.github",
                                description="GitHub Actions steps of actions/run.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the runner with the action's inputs")
    run.add_argument("--task-file", default="")
    run.add_argument("--merge", default="", help="globs of shard report directories")
    run.add_argument("--out", required=True)
    run.add_argument("--models", default="")
    run.add_argument("--shard", default="")
    run.add_argument("--sandbox", default="auto")
    run.add_argument("--concurrency", default="")
    run.add_argument("--api-key-env", default="OPENAI_API_KEY")
    run.add_argument("--trusted-config", default="",
                     help="a directory from the base branch the task file must stay inside")
    run.add_argument("--prompt", default="", help="one task with this prompt")
    run.add_argument("--prompt-file", default="", help="one task with this file's prompt")
    run.add_argument("--model", default="", help="one provider/model (added to --models)")
    run.add_argument("--base-url", default="", help="endpoint of the prompt's provider")
    run.add_argument("--reasoning-effort", default="")
    run.add_argument("--extra-args", default="", help="more `runner run` flags")
    run.set_defaults(func=cmd_run)
    gate = sub.add_parser("can-write", help="the write-access gate of pull-request runs")
    gate.add_argument("--mode", default="auto", help="auto (on PR events), true or false")
    gate.add_argument("--token-env", default="GITHUB_TOKEN")
    gate.add_argument("--allow-users", default="", help="logins allowed without write access")
    gate.add_argument("--allow-bots", default="", help="bot logins allowed to trigger a run")
    gate.set_defaults(func=cmd_can_write)
    out = sub.add_parser("outputs", help="report.json -> $GITHUB_OUTPUT")
    out.add_argument("--report", required=True)
    out.add_argument("--allowed", default="true", help="the gate's output")
    out.add_argument("--reason", default="", help="why the gate refused")
    out.add_argument("--skipped", default="", help="why the run step skipped")
    out.add_argument("--exit-code", default="", help="the runner's exit code")
    out.set_defaults(func=cmd_outputs)
    com = sub.add_parser("comment", help="create or edit the PR comment")
    com.add_argument("--report", required=True)
    com.add_argument("--mode", default="auto", help="auto (on PR events), true or false")
    com.add_argument("--pr", type=int, default=None)
    com.add_argument("--artifact", default="")
    com.add_argument("--author", default="",
                     help="only edit a comment by this account (default: the token's)")
    com.add_argument("--token-env", default="GITHUB_TOKEN")
    com.add_argument("--write", default="", help="also write the body to this file")
    com.add_argument("--notice", default="", help="post this skip notice instead")
    com.set_defaults(func=cmd_comment)
    prs = sub.add_parser("pull-requests", help="push result branches, one PR per task")
    prs.add_argument("--report", required=True)
    prs.add_argument("--repo-dir", default=".")
    prs.add_argument("--remote", default="origin")
    prs.add_argument("--base", default="")
    prs.add_argument("--branch-prefix", default="runner/nightly/")
    prs.add_argument("--statuses", default="completed",
                     help="comma-separated run statuses that get a PR")
    prs.add_argument("--token-env", default="GITHUB_TOKEN")
    prs.set_defaults(func=cmd_pull_requests)
    fin = sub.add_parser("finish", help="exit with the runner's code")
    fin.add_argument("--exit-code", default="")
    fin.add_argument("--fail-on-task-failure", default="true")
    fin.add_argument("--skipped", default="", help="why the run was skipped (exit 0)")
    fin.set_defaults(func=cmd_finish)
    docs = sub.add_parser("docs", help="write README's input and output tables")
    docs.add_argument("--action", required=True)
    docs.add_argument("--readme", required=True)
    docs.set_defaults(func=cmd_docs)
    return p


def main(argv: list[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args, os.environ if env is None else env)
    except RunnerError as exc:
        annotate("error", "runner", str(exc))
        return EXIT_BAD_INPUT
    return code


if __name__ == "__main__":
    raise SystemExit(main())
