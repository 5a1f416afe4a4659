"""Running `actions/run` (and workflows that use it) locally, as the Actions runner would.

`run_action` reads `actions/run/action.yml` and runs its `run:` steps the way the Actions
runner does (bash -eo pipefail, a fresh GITHUB_OUTPUT per step, `${{ }}` evaluated in
`env:` and `if:`), against the loopback model server and `FakeGitHub`, a loopback fake of
the GitHub REST API with state. Only the steps that need the network or sudo are left
out: `uses:` steps (setup-python, cache, upload-artifact) and the `install` and
`bubblewrap` steps, whose `if:` is still evaluated (outcome "skipped" when it is false,
"skipped-by-harness" when the step would have run); the test's own venv stands in for
the installed runner.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from runner.github import ACTIONS_BOT
from tests.support import paths

ROOT = paths.ROOT
ACTION_DIR = ROOT / "actions" / "run"
ACTION = ACTION_DIR / "action.yml"
GOLDEN = paths.GOLDEN / "github"
BIN = Path(sys.executable).parent
ACTION_REF = "your-org/runner/actions/run@" + "0" * 40
"""How the examples and the README refer to the action: pinned to a commit that cannot
exist, so a copy that is not adapted fails instead of running someone else's code."""
SKIPPED = {"install", "bubblewrap"}
"""Steps that need the network or sudo; everything else runs for real."""
API_KEY = "sk-canary-api-key-5d41402abc4b2a76"
GITHUB_TOKEN = "ghs_canaryGitHubToken0123456789abcdef"
PAT = "github_pat_canaryPersonalToken0123456789"
"""A personal access token: `GET /user` answers with its account (unlike GITHUB_TOKEN)."""
FORK_TOKEN = "ghs_canaryForkReadOnlyToken0123456789ab"
"""The GITHUB_TOKEN of a fork's pull request: it reads, every write is refused."""
REPO = "octo/widgets"
PR_WORKFLOW = ROOT / "examples/workflows/pr-tasks.yml"


# ------------------------------------------------------------------ fake GitHub REST API


@dataclass
class FakeGitHub:
    """Just enough of api.github.com for comments, refs and pull requests, with state."""

    tokens: dict[str, str | None]
    """Accepted tokens -> the login `GET /user` reports (None: refused there, as for an
    installation token, which writes as github-actions[bot])."""
    comments: dict[int, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)
    """user -> `permission` of the collaborator-permission endpoint; absent: 404."""
    refs: dict[str, str] = field(default_factory=dict)
    pulls: list[dict[str, Any]] = field(default_factory=list)
    log: list[tuple[str, str, Any]] = field(default_factory=list)
    read_only: set[str] = field(default_factory=set)
    """Tokens that may only read (a fork's pull request's GITHUB_TOKEN)."""
    prs_forbidden: bool = False
    """The repository setting that stops GitHub Actions from opening pull requests is off:
    `POST /pulls` is refused with GitHub's 403."""
    pr_details: dict[int, dict[str, Any]] = field(default_factory=dict)
    """number -> what `GET /pulls/{number}` answers (head/base); its "diff" key is the
    answer to the same call with `Accept: application/vnd.github.diff`."""
    next_id: int = 1000
    url: str = ""
    authors: dict[str, str] = field(default_factory=dict)
    """Tokens -> who their comments are by, where `GET /user` refuses them (another
    GitHub App's installation token: `my-app[bot]`); default github-actions[bot]."""
    faults: list[tuple[int, dict[str, str]] | tuple[int, dict[str, str], bytes]] = field(
        default_factory=list
    )
    """Answers given first, in order, whatever is asked: (status, headers), e.g. a 503
    with a Retry-After, or (status, headers, body) for a body of our own (else a JSON
    message); the request is still logged."""

    def calls(self, method: str, pattern: str = "") -> list[tuple[str, str, Any]]:
        return [c for c in self.log if c[0] == method and re.search(pattern, c[1])]

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        body: Any,
        token: str,
        accept: str = "",
    ) -> tuple[int, Any]:
        if method != "GET" and token in self.read_only:
            return 403, {"message": "Resource not accessible by integration"}
        if path == "/user" and method == "GET":
            login = self.tokens[token]
            if login is None:
                return 403, {"message": "Resource not accessible by integration"}
            return 200, {"login": login, "type": "User"}
        base = f"/repos/{REPO}"
        if not path.startswith(base):
            return 404, {"message": "Not Found"}
        path = path[len(base) :]
        if (m := re.fullmatch(r"/collaborators/([^/]+)/permission", path)) and method == "GET":
            if m[1] not in self.permissions:
                return 404, {"message": "Not Found"}
            return 200, {"permission": self.permissions[m[1]], "user": {"login": m[1]}}
        if m := re.fullmatch(r"/issues/(\d+)/comments", path):
            if method == "GET":
                mine = [c for c in self.comments.values() if c["issue"] == int(m[1])]
                per, page = int(query["per_page"][0]), int(query["page"][0])
                return 200, mine[(page - 1) * per : page * per]
            self.next_id += 1
            self.comments[self.next_id] = {
                "id": self.next_id,
                "issue": int(m[1]),
                "body": body["body"],
                "user": {"login": self.tokens[token] or self.authors.get(token, ACTIONS_BOT)},
            }
            return 201, self.comments[self.next_id]
        if (m := re.fullmatch(r"/issues/comments/(\d+)", path)) and method == "PATCH":
            self.comments[int(m[1])]["body"] = body["body"]
            return 200, self.comments[int(m[1])]
        if m := re.fullmatch(r"/git/refs?/heads/(.+)", path):
            if method == "GET":
                if m[1] not in self.refs:
                    return 404, {"message": "Not Found"}
                return 200, {"ref": f"refs/heads/{m[1]}", "object": {"sha": self.refs[m[1]]}}
            if method == "PATCH":
                self.refs[m[1]] = body["sha"]
                return 200, {}
            if method == "DELETE":
                return (204, None) if self.refs.pop(m[1], None) else (422, {"message": "no"})
        if path == "/git/refs" and method == "POST":
            self.refs[body["ref"].removeprefix("refs/heads/")] = body["sha"]
            return 201, {}
        if path == "/pulls" and method == "GET":
            owner, head = query["head"][0].split(":", 1)
            state = query.get("state", ["open"])[0]
            found = [
                p
                for p in self.pulls
                if p["head"] == head
                and p.get("head_owner", REPO.split("/")[0]) == owner
                and state in (p.get("state", "open"), "all")
            ]
            per, page = int(query.get("per_page", ["30"])[0]), int(query.get("page", ["1"])[0])
            return 200, found[(page - 1) * per : page * per]
        if path == "/pulls" and method == "POST":
            if self.prs_forbidden:
                return 403, {
                    "message": "GitHub Actions is not permitted to create or approve pull "
                    "requests.",
                }
            number = len(self.pulls) + 1
            self.pulls.append(
                {
                    **body,
                    "number": number,
                    "state": "open",
                    "merged_at": None,
                    "html_url": f"https://github.test/{REPO}/pull/{number}",
                }
            )
            return 201, self.pulls[-1]
        if (m := re.fullmatch(r"/pulls/(\d+)", path)) and method == "GET":
            if int(m[1]) not in self.pr_details:
                return 404, {"message": "Not Found"}
            pr = self.pr_details[int(m[1])]
            if accept == "application/vnd.github.diff":
                return 200, pr["diff"]
            return 200, {k: v for k, v in pr.items() if k != "diff"}
        if (m := re.fullmatch(r"/pulls/(\d+)", path)) and method == "PATCH":
            pr = self.pulls[int(m[1]) - 1]
            pr.update(body)
            return 200, pr
        return 404, {"message": "Not Found"}


def serve_fake_github() -> Iterator[FakeGitHub]:
    """A FakeGitHub on a loopback port, for the `github` fixture of a test module."""
    fake = FakeGitHub(
        tokens={GITHUB_TOKEN: None, PAT: "octo-bot", FORK_TOKEN: None},
        read_only={FORK_TOKEN},
        permissions={"alice": "write"},  # the fixtures' maintainer
    )
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlsplit(self.path)
            length = int(self.headers.get("content-length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            with lock:
                fake.log.append((self.command, url.path, body))
                token = (self.headers.get("authorization") or "").removeprefix("Bearer ")
                extra: dict[str, str] = {}
                raw: list[bytes] = []
                if fake.faults:
                    status, extra, *raw = fake.faults.pop(0)
                    answer = {"message": f"fault {status}"}
                elif token not in fake.tokens:
                    status, answer = 401, {"message": "Bad credentials"}
                else:
                    status, answer = fake.handle(
                        self.command,
                        url.path,
                        parse_qs(url.query),
                        body,
                        token,
                        self.headers.get("accept") or "",
                    )
            data = (
                raw[0]
                if raw
                else b""
                if answer is None
                else answer.encode()
                if isinstance(answer, str)
                else json.dumps(answer).encode()
            )
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake
    server.shutdown()
    server.server_close()
    thread.join(5)


def github_remote(tmp: Path) -> tuple[str, Path]:
    """(GITHUB_SERVER_URL, the bare repository at SERVER/REPO.git): where the Action's
    pull-requests step pushes, built from the environment as on GitHub (never the
    checkout's own remote). A file URL: git is given no token for it."""
    server = tmp / "github-server"
    origin = server / f"{REPO}.git"
    origin.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    return f"file://{server}", origin


# ------------------------------------------------------------------ running the action


def parse_output_file(text: str) -> dict[str, str]:
    """GITHUB_OUTPUT as the Actions runner reads it: `name=value` or `name<<DELIM`."""
    values: dict[str, str] = {}
    lines = iter(text.split("\n"))
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            chunk = []
            for nxt in lines:
                if nxt == delim:
                    break
                chunk.append(nxt)
            else:
                raise AssertionError(f"unterminated value for {name}")
            values[name] = "\n".join(chunk)
        elif line:
            name, value = line.split("=", 1)
            values[name] = value
    return values


@dataclass
class ActionRun:
    outputs: dict[str, str]
    step_outputs: dict[str, dict[str, str]]
    outcomes: dict[str, str]
    logs: dict[str, str]
    failed: bool
    files: list[Path]
    """Every file the run wrote where GitHub would keep it: GITHUB_OUTPUT files, the step
    summary and the out dir (the artifact)."""


class Expressions:
    """The few `${{ }}` forms the action uses; anything else fails the test, so the
    action cannot grow an expression this harness silently gets wrong."""

    def __init__(
        self,
        inputs: dict[str, str],
        steps: dict[str, dict[str, str]],
        github: dict[str, str],
        event: dict[str, Any] | None = None,
        outcomes: dict[str, str] | None = None,
    ) -> None:
        self.inputs, self.steps, self.github = inputs, steps, github
        self.event = event or {}
        self.outcomes = {} if outcomes is None else outcomes

    def value(self, expr: str) -> str:
        expr = expr.strip()
        if "||" in expr:  # the first non-empty string, as GitHub's `||` on strings
            return next((v for v in (self.value(e) for e in expr.split("||")) if v), "")
        if m := re.fullmatch(r"inputs\.([\w-]+)", expr):
            return self.inputs[m[1]]
        if m := re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expr):
            return self.steps.get(m[1], {}).get(m[2], "")
        if m := re.fullmatch(r"steps\.([\w-]+)\.outcome", expr):
            outcome = self.outcomes.get(m[1], "")  # in GitHub's words
            if outcome.startswith("failure"):
                return "failure"
            return "success" if outcome == "skipped-by-harness" else outcome
        if m := re.fullmatch(r"github\.(\w+)", expr):
            return self.github[m[1]]
        if m := re.fullmatch(r"github\.event\.([\w.-]+)", expr):
            value: Any = self.event
            for part in m[1].split("."):  # a missing field is null: ''
                value = value.get(part, "") if isinstance(value, dict) else ""
            return "" if value is None else str(value)
        if expr == "runner.os":
            return "Linux"
        if m := re.fullmatch(r"'([^']*)'", expr):
            return m[1]
        raise AssertionError(f"harness does not know the expression {expr!r}")

    def substitute(self, text: str) -> str:
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: self.value(m[1]), text)

    def condition(self, cond: str, failed: bool) -> bool:
        ok = True
        saw_always = False
        for term in (t.strip() for t in cond.split("&&")):
            if term == "always()":
                saw_always = True
            elif m := re.fullmatch(r"(.+?)\s*(==|!=)\s*(.+)", term):
                equal = self.value(m[1]) == self.value(m[3])
                ok = ok and (equal if m[2] == "==" else not equal)
            else:
                raise AssertionError(f"harness does not know the condition {term!r}")
        return ok and (saw_always or not failed)


def action_inputs(overrides: dict[str, str]) -> dict[str, str]:
    spec = yaml.safe_load(ACTION.read_text())["inputs"]
    unknown = set(overrides) - set(spec)
    assert not unknown, f"not inputs of the action: {unknown}"
    values = {name: str(i.get("default", "")) for name, i in spec.items()}
    values.update(overrides)
    missing = [n for n, i in spec.items() if i.get("required") and not values[n]]
    assert not missing, f"required inputs missing: {missing}"
    return values


def run_action(
    tmp: Path,
    workspace: Path,
    inputs: dict[str, str],
    *,
    event_name: str,
    event: dict[str, Any],
    api_url: str,
    job_env: dict[str, str] | None = None,
    token: str = GITHUB_TOKEN,
) -> ActionRun:
    action = yaml.safe_load(ACTION.read_text())
    tmp.mkdir(parents=True, exist_ok=True)
    event_path = tmp / "event.json"
    event_path.write_text(json.dumps(event))
    summary = tmp / "step-summary.md"
    summary.touch()
    runner_temp = tmp / "runner-temp"
    runner_temp.mkdir(exist_ok=True)
    base_env = {
        "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(ACTION_DIR),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": "https://github.test",
        "GITHUB_RUN_ID": "4242",
        "RUNNER_TEMP": str(runner_temp),
        "RUNNER_OS": "Linux",
        "GIT_CONFIG_NOSYSTEM": "1",
        **(job_env or {}),
    }
    values = action_inputs(inputs)
    if values["github-token"] == "${{ github.token }}":
        values["github-token"] = token
    steps: dict[str, dict[str, str]] = {"install": {"python": sys.executable}}
    outcomes: dict[str, str] = {}
    expr = Expressions(
        values, steps, {"token": token, "action_path": str(ACTION_DIR)}, event, outcomes
    )
    logs: dict[str, str] = {}
    files: list[Path] = [summary]
    failed = False
    for n, step in enumerate(action["runs"]["steps"]):
        sid = step.get("id", f"step{n}")
        if "if" in step and not expr.condition(step["if"], failed):
            outcomes[sid] = "skipped"
            continue
        if "uses" in step or sid in SKIPPED:  # it would have run
            outcomes[sid] = "skipped-by-harness"
            continue
        assert step["shell"] == "bash"
        out_file = tmp / f"output-{sid}"
        out_file.write_text("")
        env = {**base_env, "GITHUB_OUTPUT": str(out_file)}
        for name in ("env", "path", "state"):  # read back by GitHub; here only kept
            (tmp / f"{name}-{sid}").write_text("")
            env[f"GITHUB_{name.upper()}"] = str(tmp / f"{name}-{sid}")
            files.append(tmp / f"{name}-{sid}")
        files.append(out_file)
        env.update({k: expr.substitute(str(v)) for k, v in (step.get("env") or {}).items()})
        script = tmp / f"step-{sid}.sh"
        script.write_text(step["run"])
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        logs[sid] = proc.stdout + proc.stderr
        steps[sid] = parse_output_file(out_file.read_text())
        outcomes[sid] = "success" if proc.returncode == 0 else f"failure({proc.returncode})"
        failed = failed or proc.returncode != 0
    outputs = {name: expr.substitute(o["value"]) for name, o in action["outputs"].items()}
    out_dir = workspace / values["out-dir"]
    files += [p for p in out_dir.rglob("*") if p.is_file()]
    return ActionRun(outputs, steps, outcomes, logs, failed, files)
