"""The `python -m runner.github` subcommands the composite action's steps call.

Why one module: one short function per action step; they share only the
helpers at the top.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import re
import secrets
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runner.errors import RunnerError
from runner.github.context import (
    DEPENDABOT,
    EXEMPT_EVENTS,
    MOVED_MARKER,
    PYTHON,
    REPLY_MARKER,
    UNSANDBOXED_EVENTS,
    Context,
    bot_allowed,
    is_bot,
    missing_keys,
    parse_extra_args,
    parse_models,
    parse_names,
    prompt_task,
    provider_keys,
    runner_argv,
    sandbox_for,
    summary_marker,
    trust_problems,
    unsandboxed_runs,
)
from runner.github.render import (
    format_outputs,
    outputs_for,
    readme_with_docs,
    render_comment,
    render_pr_body,
)
from runner.github.render import (
    inline as inert,
)
from runner.github.rest import (
    GitHub,
    add_comment,
    has_write_access,
    pulls_from,
    token_login,
    upsert_comment,
    upsert_pull_request,
)
from runner.redact import Redactor
from runner.reports.fmt import inline, truncate
from runner.reports.model import Report
from runner.secret_env import secrets_from_env
from runner.vocabulary import EXIT_BAD_INPUT, EXIT_RUNNER, RunStatus


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
    given = [
        n
        for n, v in (
            ("task-file", args.task_file),
            ("prompt", args.prompt),
            ("prompt-file", args.prompt_file),
        )
        if v.strip()
    ]
    if len(given) > 1:
        raise RunnerError(
            f"give one of task-file, prompt and prompt-file; got {' and '.join(given)}"
        )
    if not given:
        raise RunnerError(
            "one of task-file, prompt or prompt-file is required (or merge, "
            "to combine shard reports)"
        )
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
    if args.pr_head and text.strip():
        text += Path(args.pr_context).read_text(encoding="utf-8")
    import yaml

    data = prompt_task(
        text,
        repo=args.pr_head or env.get("GITHUB_WORKSPACE") or os.getcwd(),
        model=args.model.strip(),
        base_url=args.base_url.strip(),
        key_env=args.api_key_env,
        task_id=Context.from_env(env).prompt_id,
    )
    folder = Path(env.get("RUNNER_TEMP") or os.getcwd()) / f"runner-prompt-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    path = folder / "task.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(path), args.prompt_file


def _pr_adds(path: str, trusted: str, ctx: Context, env: Mapping[str, str]) -> bool:
    """Whether a config file missing from the base is one this pull request adds: the base
    has no trusted config directory at all, or the PR's head commit has the file. Anything
    else (a typo in `task-file`, a file the base deleted) is a configuration error, which
    must not end green."""
    if not Path(trusted).is_dir():
        return True
    sha = (ctx.pull_request.get("head") or {}).get("sha")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{4,64}", sha):
        return False
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    try:
        rel = (Path.cwd() / path).resolve().relative_to(workspace)
    except ValueError:
        return False
    from runner.workspace import has_path_at

    return has_path_at(workspace, sha, rel.as_posix())


def _not_in_config(path: str, trusted: str) -> str:
    have = sorted(
        p.name for p in Path(trusted).iterdir() if p.suffix in (".yaml", ".yml", ".md", ".txt")
    )
    return (
        f"{path}: no such file, in the base branch or in this pull request; "
        f"{trusted} has {', '.join(have) or 'no task or prompt file'}: check the "
        "task-file / prompt-file input"
    )


DIFF_LIMIT = 100_000
"""Characters of a pull request's diff put into a comment command's prompt."""


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run in `text`, so it cannot close early."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def cmd_pr_head(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """A comment command on a pull request (`issue_comment`, for which the job's checkout
    is the default branch): the PR's head, fetched into a new repository of its own that
    keeps no credentials and no remote, and its diff (as GitHub shows it) for the prompt.
    The job's checkout stays as it is, so a `prompt-file` or `trusted-config` is still
    the default branch's. Outputs `dir` (the checkout) and `context` (a file with the
    text added to the prompt); nothing on other events."""
    from runner.safe_markdown import cut
    from runner.workspace import fetch_detached_sync
    from runner.workspace.git import read_git

    ctx = Context.from_env(env)
    number = ctx.pr_number
    if ctx.event_name != "issue_comment" or number is None:
        return 0
    token = _token(env, args.token_env)
    gh = GitHub(ctx.api_url, token)
    path = f"/repos/{ctx.repository}/pulls/{number}"
    try:
        pr = gh.request("GET", path)
        try:
            diff: str | None = gh.request("GET", path, media="application/vnd.github.diff")
        except RunnerError as exc:  # GitHub gives no diff for a very large PR (406)
            annotate("warning", "runner", f"the diff of #{number} is not in the prompt: {exc}")
            diff = None
    finally:
        gh.close()
    head = str(((pr or {}).get("head") or {}).get("sha") or "")
    base = str(((pr or {}).get("base") or {}).get("ref") or "the base branch")
    if not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        raise RunnerError(f"GitHub GET {path}: no head commit in the answer")
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
    origin = read_git(workspace, "remote", "get-url", "origin")
    url = origin.stdout.strip() if origin.returncode == 0 else ""
    url = url or f"{ctx.server_url}/{ctx.repository}.git"
    folder = Path(env.get("RUNNER_TEMP") or os.getcwd()) / f"runner-pr-{secrets.token_hex(4)}"
    got = fetch_detached_sync(folder / str(number), url, f"refs/pull/{number}/head", token=token)
    if got != head:
        raise RunnerError(
            f"pull request #{number} moved while the run started (GitHub says {head[:12]}, "
            f"its head ref is {got[:12]}); send the command again"
        )
    lines = [
        "",
        "",
        "---",
        f"This comment is on pull request #{number}. Your working directory is that pull "
        f"request's head (commit {head}), read-only.",
    ]
    if diff is not None:
        shown, was_cut = cut(diff, DIFF_LIMIT)
        fence = _fence(shown)
        lines += [
            f"Its diff against `{base}`"
            + (f" (cut at {DIFF_LIMIT:,} characters)" if was_cut else "")
            + ":",
            "",
            f"{fence}diff",
            shown,
            fence,
        ]
    context = folder / "context.md"
    context.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"pull request #{number}: head {head} checked out read-only")
    _write_outputs({"dir": str(folder / str(number)), "context": str(context)}, env)
    return 0


def _sandbox(args: argparse.Namespace, ctx: Context) -> str | None:
    """The `--sandbox` of the run: the input's, except that a comment command's checkout
    of the pull request is only ever read."""
    requested = args.sandbox.strip()
    if args.pr_head and requested not in ("auto", "read-only"):
        raise RunnerError(
            "sandbox: a comment command runs on the pull request's code, read-only; "
            f"set sandbox to auto or read-only (got {requested!r})"
        )
    return "read-only" if args.pr_head else sandbox_for(requested, ctx.foreign_code)


def cmd_run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    ctx = Context.from_env(env)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", args.api_key_env):
        raise RunnerError(f"api-key-env must be a variable name, got {args.api_key_env!r}")
    child = dict(env)
    handed = _handover(args, child)
    models = parse_models(f"{args.model} {args.models}")
    merging = bool(args.merge.strip())
    on_pr = ctx.on_pr
    if merging:
        argv = merge_argv(args.merge, args.out)
    else:
        task_file, guarded = _task_source(args, env)
        trusted = args.trusted_config.strip()
        if not Path(guarded or task_file).is_file() and trusted and on_pr:
            if not _pr_adds(guarded, trusted, ctx, env):
                raise RunnerError(_not_in_config(guarded, trusted))
            # The base branch has no runner config yet: the PR that adds it.
            return _skip(
                f"the base branch has no {guarded}; this pull request adds it, and "
                "runner runs on pull requests once it is merged",
                env,
            )
        if not task_file:
            raise RunnerError(f"prompt-file {guarded}: no such file")
        if trusted and guarded:
            problems = (
                trust_problems(Path(guarded), Path(trusted))
                if guarded == task_file
                else (
                    []
                    if Path(guarded).resolve().is_relative_to(Path(trusted).resolve())
                    else [f"the prompt file {guarded} is not inside {trusted}"]
                )
            )
            if problems:
                for problem in problems:
                    annotate("error", "runner trusted-config", problem)
                _write_outputs({"exit-code": str(EXIT_BAD_INPUT)}, env)
                _append_summary(
                    "**runner** did not run: the task file reaches outside "
                    f"`{inline(trusted)}` (see the log).\n",
                    env,
                )
                return 0
        elif on_pr and guarded:
            annotate(
                "warning",
                "runner",
                "a pull-request run without trusted-config: the task "
                "file may read or start files of the pull request (see examples/workflows"
                "/pr-tasks.yml)",
            )
        sandbox = _sandbox(args, ctx)
        argv = runner_argv(
            task_file,
            out=args.out,
            models=models,
            shard=args.shard.strip(),
            sandbox=sandbox,
            concurrency=args.concurrency.strip(),
            effort=args.reasoning_effort.strip().lower(),
            extra=parse_extra_args(args.extra_args),
        )
        secretless = _secretless(ctx)
        lacking = missing_keys(Path(task_file), models, {**child, **handed}) if secretless else []
        if lacking:
            return _skip(f"{', '.join(lacking)} is not set: {secretless}", env)
        loose = unsandboxed_runs(Path(task_file), sandbox, models)
        names = {args.api_key_env, "OPENAI_API_KEY"} | provider_keys(Path(task_file), models)
        inherited = sorted(n for n in names if env.get(n))
        _sandbox_gate(loose, ctx, inherited, keep_sudo=args.keep_sudo, env=env)
        if handed:
            argv += ["--secret-fd", "0"]
    print("runner " + " ".join(argv[len(PYTHON) + 2 :]), flush=True)  # no secret in argv
    code = _run_runner(argv, child, "".join(f"{k}={v}\n" for k, v in handed.items()))
    _write_outputs({"exit-code": str(code)}, env)
    if code >= EXIT_BAD_INPUT and not (Path(args.out) / "report.json").is_file():
        _append_summary(f"**runner** exited {code} before writing a report; see the log.\n", env)
    return 0


def _handover(args: argparse.Namespace, child: dict[str, str]) -> dict[str, str]:
    """{api-key-env: key}, to hand to the runner through a pipe (see _read_key); a key
    the job put into every step's environment is moved there too, out of `child`."""
    key = _read_key(args.api_key_fd) if args.api_key_fd is not None else ""
    inherited = child.pop(args.api_key_env, "")
    if inherited:
        annotate(
            "warning",
            "runner",
            f"{args.api_key_env} is in the job's environment, where every process of the "
            "job can read it; pass the secret as the api-key input instead",
        )
    key = key or inherited
    return {args.api_key_env: key} if key else {}


def _sandbox_gate(
    loose: list[str],
    ctx: Context,
    inherited: list[str],
    *,
    keep_sudo: bool,
    env: Mapping[str, str],
) -> None:
    """No run without a sandbox (`loose`: those that would) except on schedule and
    workflow_dispatch; there, none while a key is in this step's environment
    (`inherited`), and sudo is dropped first unless keep-sudo. An unsandboxed agent
    reads /proc/<pid>/environ of every process of its user, this step's Python among
    them, and a key the job's `env:` gave the step sits there from its start."""
    if loose and ctx.event_name not in UNSANDBOXED_EVENTS:
        raise RunnerError(
            f"sandbox: danger-full-access ({', '.join(loose)}) is refused on "
            f"{ctx.event_name or 'unnamed'} events: an agent without a sandbox would run "
            "the text or code of whoever opened the issue, pull request or comment with "
            "this job's rights; it is allowed on schedule and workflow_dispatch only"
        )
    if loose and inherited:
        raise RunnerError(
            f"{', '.join(inherited)} {'is' if len(inherited) == 1 else 'are'} in this "
            f"step's environment (an env: of the job or workflow), where the unsandboxed "
            f"run ({', '.join(loose)}) could read it from /proc; remove it from env: and "
            "pass the key through the api-key input only"
        )
    if loose and not keep_sudo:
        drop_sudo(env)


def _read_key(fd: int) -> str:
    """The API key from a pipe the step opened (`3<<<"$KEY"`), so it is in no process's
    environment: /proc/<pid>/environ shows the environment a process started with to
    every process of the same user, and an unsandboxed agent is one of those."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
    except OSError as exc:
        raise RunnerError(f"api-key: cannot read file descriptor {fd}: {exc.strerror}") from None
    key = b"".join(chunks).decode("utf-8", "replace").strip()
    if "\n" in key:
        raise RunnerError("api-key must be one line (the provider's key)")
    return key


def _secretless(ctx: Context) -> str:
    """Why this run has no Actions secrets, or "": a fork's pull request gets none, and a
    run Dependabot triggered (it is the sender) only Dependabot's. Both are expected: the
    run is skipped, green."""
    if not ctx.on_pr:
        return ""
    if ctx.from_fork:
        return "GitHub passes no secrets to workflows of pull requests from forks"
    sender = (ctx.event or {}).get("sender")
    if isinstance(sender, dict) and str(sender.get("login", "")).lower() == DEPENDABOT:
        return "GitHub passes Dependabot's runs only Dependabot secrets"
    return ""


ERROR_START = re.compile(r"(?:runner: )?error: (.*)|runner: (.*)")
"""The first line of one of the runner's own errors: `error: ...` (a located problem),
`runner: error: ...` (a bad flag) or `runner: ...` (it could not run)."""
PROGRESS_LINE = re.compile(r"runner: (?:\d+ runs?|\d+/\d+ runs done,.*|\d+ run\(s\) never .*)")
"""The runner's progress lines, which also start with `runner: ` but are no error."""
OTHER_LINE = re.compile(r"\[\d+/\d+\] |\s|usage: ")
"""Lines of the runner's log that end an error's continuation: a finished run, an
indented detail, argparse's usage."""
ANNOTATIONS = 10
"""`::error` annotations a run step makes at most; the rest are in the log."""


def _run_runner(argv: list[str], env: Mapping[str, str], secrets: str) -> int:
    """Run the runner, the secrets on its stdin. Its stderr goes through to the log,
    except its own error lines: when it could not run (exit 2 or 3) they become
    `::error` annotations instead, each multi-line error one annotation and at most
    ANNOTATIONS of them (the rest stay plain lines), because an error's text can be a
    model server's and must not flood the run's summary."""
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.PIPE if secrets else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    if proc.stdin is not None:
        proc.stdin.write(secrets)
        proc.stdin.close()
    assert proc.stderr is not None
    errors: list[tuple[list[str], list[str]]] = []  # (message lines, lines as printed)
    inside = ""  # "error" or "runner": the kind of error the next lines may continue
    for line in proc.stderr:
        text = line.rstrip("\n")
        start = ERROR_START.fullmatch(text)
        if start and PROGRESS_LINE.fullmatch(text):
            inside = ""
        elif start and not (inside == "runner" and start[1] is not None):
            errors.append(([start[1] if start[1] is not None else start[2]], [text]))
            inside = "error" if start[1] is not None else "runner"
            continue
        elif inside and text and not OTHER_LINE.match(text):
            errors[-1][0].append(text)  # `error: ` lines too, inside a `runner: ` error
            errors[-1][1].append(text)
            continue
        else:
            inside = ""
        sys.stderr.write(line)
        sys.stderr.flush()
    proc.stderr.close()
    code = proc.wait()
    shown = errors[:ANNOTATIONS] if code >= EXIT_BAD_INPUT else []
    for message, _ in shown:
        annotate("error", "runner", "\n".join(message))
    if shown and len(errors) > ANNOTATIONS:
        annotate("error", "runner", f"{len(errors) - ANNOTATIONS} more in the log")
    for _, printed in errors[len(shown) :]:
        sys.stderr.write("".join(f"{t}\n" for t in printed))
    sys.stderr.flush()
    return code


def drop_sudo(env: Mapping[str, str]) -> None:
    """Take sudo away from the job's user before an unsandboxed agent starts (as
    codex-action's drop-sudo does): with it the agent could read any process's memory
    and secrets, and change the machine for the job's later steps. Lines naming the
    user are removed from the sudoers files, the user leaves the sudo, admin and wheel
    groups, and `sudo -n true` must then fail, or the run is refused. Nothing to do
    where there is no passwordless sudo; as root it cannot help (a warning)."""
    if os.geteuid() == 0:
        annotate(
            "warning",
            "runner",
            "the job runs as root, so the unsandboxed agent has root too; run it as a "
            "normal user (keep-sudo: true silences this)",
        )
        return
    sudo = shutil.which("sudo", path=env.get("PATH"))
    if sudo is None or _quiet([sudo, "-n", "true"], env) != 0:
        print("sudo: not available to this user, nothing to drop")
        return
    user = pwd.getpwuid(os.getuid()).pw_name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", user):
        raise RunnerError(f"keep-sudo: cannot drop sudo for the user name {user!r}")
    done = subprocess.run(
        [sudo, "-n", "sh", "-c", DROP_SUDO_SCRIPT, "drop-sudo", user],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    sys.stdout.write(done.stdout)
    _quiet([sudo, "-K"], env)
    if done.returncode != 0 or _quiet([sudo, "-n", "true"], env) == 0:
        why = done.stderr.strip()[-300:] or "sudo still works"
        raise RunnerError(
            f"could not take sudo away from {user} ({why}); the unsandboxed agent would "
            "have root: set keep-sudo: true to run anyway"
        )
    print(f"sudo: dropped for {user}")


DROP_SUDO_SCRIPT = r"""set -eu
user=$1
for f in /etc/sudoers /etc/sudoers.d/*; do
  [ -f "$f" ] || continue
  if grep -Eq "^[[:space:]]*$user[[:space:]]" "$f"; then
    sed -i -E "/^[[:space:]]*$user[[:space:]]/d" "$f"
    echo "sudo: removed $user's lines from $f"
  fi
done
for group in sudo admin wheel; do
  if id -nG "$user" | tr ' ' '
' | grep -qx "$group"; then
    gpasswd -d "$user" "$group" >/dev/null
    echo "sudo: removed $user from the $group group"
  fi
done
"""


def _quiet(argv: list[str], env: Mapping[str, str]) -> int:
    return subprocess.run(argv, env=env, check=False, capture_output=True).returncode


def cmd_outputs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Every output the Action documents, also when nothing ran: `conclusion` is
    `skipped` (with the reason as `notice`) when the gate or the run step skipped,
    `success` when the runner exited 0, `failure` otherwise."""
    values = {
        "conclusion": "failure",
        "notice": "",
        "final-message": "",
        "report": "",
        "branch": "",
        "branches": "{}",
    }
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
    """The run's comment. On a comment command (an event with a `comment`) a new comment
    answers it; otherwise the sticky comment of `--tag` is edited or created. A skipped
    run writes nothing: its reason (a refused stranger, a bot) is in the log and in the
    `notice` output, never in the thread, where it would bury the review. With `auto`
    an event with no issue or pull request to write to (a discussion, a commit comment)
    gets no comment and stays green; `true` there is a configuration error. A comment
    GitHub refuses fails the step (so `conclusion` is failure), except on a fork's pull
    request, whose token GitHub makes read-only whatever the workflow asks."""
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"comment must be auto, true or false; got {args.mode!r}")
    marker = summary_marker(args.tag)
    reply = bool(ctx.comment)
    number = args.pr or ctx.issue_number
    if mode == "false" or (mode == "auto" and ctx.pr_number is None and not reply):
        return 0
    if number is None:
        if mode == "true":
            raise RunnerError(
                f"comment: true, but this {ctx.event_name or 'unnamed'} event is not about "
                "a pull request or issue; set comment to auto or false"
            )
        annotate(
            "notice",
            "runner comment",
            f"no comment: a {ctx.event_name or 'unnamed'} event has no pull request or "
            "issue to write to (the summary is in the job summary)",
        )
        return 0
    if args.notice.strip():
        print("comment: none for a skipped run (the reason is the notice output)")
        return 0
    report = _load_report(Path(args.report))
    if report is None:
        return 0
    body = render_comment(
        report, ctx, artifact=args.artifact, marker=REPLY_MARKER if reply else marker
    )
    body = Redactor(secrets_from_env(env))(body)
    if args.write:
        Path(args.write).write_text(body, encoding="utf-8")
    gh = GitHub(ctx.api_url, _token(env, args.token_env))
    try:
        if reply:
            how, comment_id = "created", add_comment(gh, ctx.repository, number, body)
        else:
            author = args.author.strip() or token_login(gh)
            how, comment_id = upsert_comment(
                gh, ctx.repository, number, body, author=author, marker=marker
            )
    except RunnerError as exc:
        if ctx.from_fork:  # expected: the summary is still in the job summary
            annotate("warning", "runner comment", f"{exc} (a fork's token is read-only)")
            return 0
        raise RunnerError(
            f"comment: could not write to #{number}: {exc}. Give the job `permissions: "
            "pull-requests: write` (and `issues: write` for issues), or a github-token "
            "that has them; or set comment: false"
        ) from None
    finally:
        gh.close()
    print(f"comment {comment_id} {how} on #{number}")
    return 0


ANY_USER_ACK = "i-understand"
"""The value of `allow-any-user` that lets `allow-users: "*"` (or no gate) stand."""
PULL_REQUEST_TARGET = (
    "pull_request_target is refused: it runs with this repository's secrets and a "
    "write token while the pull request's author decides the code and the text the "
    "agent reads; use `on: pull_request` (a fork's pull request then gets no secrets "
    "and is skipped with a notice)"
)


def _refuse_anyone(allow_users: set[str], mode: str, ack: str) -> None:
    """`allow-users: "*"` and `require-write-access: false` let anyone who can open an
    issue or comment spend the key and steer the agent: only with the acknowledgement."""
    if ack.strip() not in ("", ANY_USER_ACK):
        raise RunnerError(f"allow-any-user must be empty or {ANY_USER_ACK!r}; got {ack!r}")
    opened = "allow-users: '*'" if "*" in allow_users else "require-write-access: false"
    if ("*" in allow_users or mode == "false") and ack.strip() != ANY_USER_ACK:
        raise RunnerError(
            f"{opened} lets anyone who can open an issue, a pull request or a comment run "
            "the agent with your API key and steer it; list logins in allow-users "
            f"instead, or set allow-any-user: {ANY_USER_ACK} to accept that"
        )


def cmd_can_write(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`allowed=true|false` in $GITHUB_OUTPUT. Every event is gated except those only a
    writer can cause (EXEMPT_EVENTS): everyone in `Context.people` (the sender and the
    authors of what the event is about) must have write, maintain or admin permission,
    or be named in allow-users (people) or allow-bots (bots). An event that names
    nobody, and any API failure, count as no. `pull_request_target` is refused outright (exit 2)."""
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"require-write-access must be auto, true or false; got {args.mode!r}")
    if ctx.event_name == "pull_request_target":
        raise RunnerError(PULL_REQUEST_TARGET)
    summary_marker(args.comment_tag)  # a bad tag stops here, before the key is spent
    allow_users = parse_names(args.allow_users)
    allow_bots = parse_names(args.allow_bots)
    if "*" in allow_bots:
        raise RunnerError(
            "allow-bots takes bot names (e.g. dependabot, renovate[bot]); '*' "
            "would let any app's bot spend the API key"
        )
    _refuse_anyone(allow_users, mode, args.allow_any_user)
    allowed, why = _gate(ctx, mode, allow_users, allow_bots, env, args.token_env)
    print(f"write access: {'yes' if allowed else 'no'} ({why})")
    values = {"allowed": "true" if allowed else "false"}
    if not allowed:
        annotate("notice", "runner", f"not run: {why}")
        _append_summary(f"**runner** did not run: {inline(why)}.\n", env)
        values["reason"] = why
    _write_outputs(values, env)
    return 0


PRS_FORBIDDEN = "GitHub Actions is not permitted to create or approve pull requests"
"""GitHub's 403 message when the repository does not let workflows open pull requests."""
PUSH_RIGHTS = (
    "; if GitHub refused it, give the job `permissions: contents: write` and "
    "`pull-requests: write`, or a github-token that has them"
)
"""What to fix when a push or a pull request failed (the step then fails)."""
PRS_SETTING = (
    'Settings > Actions > General > "Allow GitHub Actions to create and approve pull requests"'
)


def _runner_wrote(message: str) -> bool:
    """Whether a commit (`%cn <%ce>` then its message, as `remote_tip` shows it) is a
    result commit: the runner's fixed identity and its `Runner-Run:` trailer."""
    from runner.workspace import IDENTITY

    first, _, body = message.partition("\n")
    return first == f"{IDENTITY[0]} <{IDENTITY[1]}>" and bool(
        re.search(r"(?m)^Runner-Run: \S", body)
    )


def _tell_pr(gh: GitHub, repo: str, pr: Mapping[str, Any] | None, run: str, text: str) -> None:
    """A notice on the task's open PR, one per PR (edited, not repeated every night)."""
    if pr is None:
        return
    marker = MOVED_MARKER.format(run=run)
    try:
        upsert_comment(
            gh,
            repo,
            int(pr["number"]),
            f"{marker}\n{text}\n",
            author=token_login(gh),
            marker=marker,
        )
    except RunnerError as exc:
        annotate("warning", "runner pull request", f"{run}: {exc}")


def _gate(
    ctx: Context,
    mode: str,
    allow_users: set[str],
    allow_bots: set[str],
    env: Mapping[str, str],
    token_env: str,
) -> tuple[bool, str]:
    """(allowed, why) for the event in `ctx`; see cmd_can_write."""
    if mode == "false":
        return True, "not required (require-write-access: false)"
    if mode == "auto" and ctx.event_name in EXEMPT_EVENTS:
        return True, f"not required: only a writer can cause {ctx.event_name}"
    people = ctx.people
    users = sorted({str(u["login"]) for u in people})
    bots = sorted({str(u["login"]) for u in people if is_bot(u)})
    refused = [b for b in bots if not bot_allowed(b, allow_bots)]
    if refused:
        return False, f"{', '.join(refused)} is a bot; list it in allow-bots to run for it"
    if not users:
        return False, f"the {ctx.event_name or 'unnamed'} event names no user to check"
    humans = [u for u in users if u not in bots]
    asked = [u for u in humans if "*" not in allow_users and u.lower() not in allow_users]
    if not asked:
        return True, f"{', '.join(users)} allowed by allow-users / allow-bots"
    gh = GitHub(ctx.api_url, _token(env, token_env))
    try:
        lacking = [u for u in asked if not has_write_access(gh, ctx.repository, u)]
    except RunnerError as exc:
        annotate("warning", "runner can-write", str(exc))
        lacking = asked
    finally:
        gh.close()
    if lacking:
        return False, (
            f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no write "
            f"access to {ctx.repository} and {'is' if len(lacking) == 1 else 'are'} not in "
            "allow-users"
        )
    return True, f"{', '.join(users)} may write"


def cmd_pull_requests(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """One branch `branch-prefix + run` and one PR per task. The branch moves only by
    compare-and-swap from a commit the runner wrote (a person's commits on it are never
    overwritten), a PR closed without merging is not opened again unless
    `--reopen-closed true`, and the outputs name what was actually pushed, PR or not."""
    from runner.workspace import WorkspaceError, remote_tip, swap_branch_sync

    ctx = Context.from_env(env)
    if ctx.foreign_code:
        raise RunnerError(
            f"push: runs on a pull request's code ({ctx.event_name}) never push; the "
            "patches are in the report artifact"
        )
    reopen = args.reopen_closed.strip().lower()
    if reopen not in ("true", "false"):
        raise RunnerError(f'reopen-closed must be "true" or "false"; got {args.reopen_closed!r}')
    report = _load_report(Path(args.report))
    if report is None:
        return 0
    token = _token(env, args.token_env)
    redact = Redactor(secrets_from_env(env))
    base = args.base or str(
        ((ctx.event or {}).get("repository") or {}).get("default_branch") or "main"
    )
    repo_dir = Path(args.repo_dir)
    gh = GitHub(ctx.api_url, token)
    made: dict[str, str] = {}
    kept: dict[str, str] = {}
    failures = 0
    try:
        for t in report.runs:
            r = t.result
            if r is None or r.branch is None or t.status not in args.statuses:
                continue
            run = t.run or t.id
            stable = f"{args.branch_prefix}{run}"
            try:
                prs = pulls_from(gh, ctx.repository, stable, base)
                open_pr = next((p for p in prs if p.get("state") == "open"), None)
                if open_pr is None and prs and not prs[0].get("merged_at") and reopen != "true":
                    annotate(
                        "notice",
                        "runner pull request",
                        f"{run}: pull request #{prs[0]['number']} was closed without merging, "
                        f'so {stable} is left as it is (reopen-closed: "true" opens a new one)',
                    )
                    continue
                tip, message = remote_tip(repo_dir, stable, remote=args.remote, token=token)
                moved = tip is not None and not _runner_wrote(message)
                if not moved:
                    try:
                        swap_branch_sync(
                            repo_dir,
                            r.commit,
                            stable,
                            remote=args.remote,
                            expected=tip,
                            token=token,
                        )
                    except WorkspaceError:
                        if remote_tip(repo_dir, stable, remote=args.remote, token=token)[0] == tip:
                            raise
                        moved = True  # a push came in between: the lease refused ours
                if moved:
                    text = (
                        f"**runner** left `{stable}` alone: someone else moved it (its tip is "
                        f"not a commit runner wrote), so the result of **{inert(run)}** was not "
                        "pushed. Runner updates the branch again once its tip is a runner "
                        "commit, or after this pull request is merged."
                    )
                    annotate(
                        "notice",
                        "runner pull request",
                        f"{run}: {stable} moved by someone else; left alone",
                    )
                    _tell_pr(gh, ctx.repository, open_pr, run, text)
                    continue
                kept[run] = stable
                if r.pushed and stable != r.branch:
                    gh.request(
                        "DELETE",
                        f"/repos/{ctx.repository}/git/refs/heads/{r.branch}",
                        ok=(404, 422),
                    )
                try:
                    how, url = upsert_pull_request(
                        gh,
                        ctx.repository,
                        head=stable,
                        base=base,
                        title=f"runner: {run}",
                        body=redact(render_pr_body(t, report, ctx)),
                    )
                except RunnerError as exc:
                    if PRS_FORBIDDEN not in str(exc):
                        raise
                    why = (
                        f"{run}: pushed {stable}, but this repository does not let GitHub "
                        f"Actions open pull requests; enable {PRS_SETTING}, or open it by hand"
                    )
                    annotate("warning", "runner pull request", why)
                    _append_summary(f"**runner**: {inline(why)}.\n", env)
                    continue
            except RunnerError as exc:  # WorkspaceError included
                failures += 1
                annotate("error", "runner pull request", f"{run}: {redact(str(exc))}{PUSH_RIGHTS}")
                continue
            made[run] = url
            print(f"{run}: pull request {how}: {url}")
    finally:
        gh.close()
    _write_outputs(
        {
            "pull-requests": json.dumps(made, sort_keys=True),
            "branches": json.dumps(kept, sort_keys=True),
            "branch": next(iter(kept.values())) if len(kept) == 1 else "",
            "pr-url": next(iter(made.values())) if len(made) == 1 else "",
        },
        env,
    )
    return 1 if failures else 0


def cmd_finish(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """The step's exit code (the runner's; a skip is 0; exit 1 only with
    fail-on-task-failure) and the action's final `conclusion`: the report's, but
    failure when a step of the action itself failed (`--outcomes`: step=outcome), so a
    comment that could not be written or a refused push never ends `success`."""
    steps = dict(p.partition("=")[::2] for p in args.outcomes.split())
    failed = [name for name, outcome in steps.items() if outcome == "failure"]
    conclusion = args.conclusion.strip() or "failure"
    if failed:
        conclusion = "failure"
        print(f"conclusion: failure (the {', '.join(failed)} step failed)")
    _write_outputs({"conclusion": conclusion}, env)
    if {"gate", "run"} & set(failed):
        return EXIT_BAD_INPUT  # that step's error is in the log already
    if args.allowed.strip() != "true" or args.skipped.strip():
        return 0
    if not args.exit_code.strip().isdigit():
        annotate("error", "runner", "the run step did not finish")
        return EXIT_RUNNER
    code = int(args.exit_code)
    if code == 1 and args.fail_on_task_failure.strip().lower() != "true":
        return 0
    return code


def cmd_docs(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    import yaml

    action = yaml.safe_load(Path(args.action).read_text(encoding="utf-8"))
    readme = Path(args.readme)
    readme.write_text(
        readme_with_docs(readme.read_text(encoding="utf-8"), action), encoding="utf-8"
    )
    return 0


def _statuses(text: str) -> frozenset[RunStatus]:
    """`--statuses`: run statuses from the one vocabulary; a misspelt one is an error, not
    a filter that silently matches nothing."""
    try:
        return frozenset(RunStatus(s.strip()) for s in text.split(",") if s.strip())
    except ValueError:
        allowed = ", ".join(s.value for s in RunStatus)
        raise argparse.ArgumentTypeError(f"{text!r}: each must be one of {allowed}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m runner.github", description="GitHub Actions steps of actions/run."
    )
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
    run.add_argument(
        "--api-key-fd", type=int, default=None, help="read the API key from this descriptor"
    )
    run.add_argument(
        "--keep-sudo",
        type=lambda v: v.strip().lower() == "true",
        default=False,
        help='"true": leave sudo to an unsandboxed agent',
    )
    run.add_argument(
        "--trusted-config",
        default="",
        help="a directory from the base branch the task file must stay inside",
    )
    run.add_argument("--prompt", default="", help="one task with this prompt")
    run.add_argument("--prompt-file", default="", help="one task with this file's prompt")
    run.add_argument("--model", default="", help="one provider/model (added to --models)")
    run.add_argument("--base-url", default="", help="endpoint of the prompt's provider")
    run.add_argument("--reasoning-effort", default="")
    run.add_argument("--extra-args", default="", help="more `runner run` flags")
    run.add_argument("--pr-head", default="", help="a comment command's PR checkout")
    run.add_argument("--pr-context", default="", help="text added to its prompt")
    run.set_defaults(func=cmd_run)
    head = sub.add_parser("pr-head", help="check out the PR of a comment command")
    head.add_argument("--token-env", default="GITHUB_TOKEN")
    head.set_defaults(func=cmd_pr_head)
    gate = sub.add_parser("can-write", help="the write-access gate of every event")
    gate.add_argument(
        "--mode", default="auto", help="auto (all but schedule, dispatch, push), true or false"
    )
    gate.add_argument("--token-env", default="GITHUB_TOKEN")
    gate.add_argument("--comment-tag", default="", help="checked here, used by the comment")
    gate.add_argument("--allow-users", default="", help="logins allowed without write access")
    gate.add_argument("--allow-bots", default="", help="bot logins allowed to trigger a run")
    gate.add_argument(
        "--allow-any-user", default="", help=f"{ANY_USER_ACK!r}: accept allow-users '*'"
    )
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
    com.add_argument(
        "--author", default="", help="only edit a comment by this account (default: the token's)"
    )
    com.add_argument("--token-env", default="GITHUB_TOKEN")
    com.add_argument("--write", default="", help="also write the body to this file")
    com.add_argument("--notice", default="", help="the run was skipped: write nothing")
    com.add_argument("--tag", default="", help="which sticky comment (comment-tag)")
    com.set_defaults(func=cmd_comment)
    prs = sub.add_parser("pull-requests", help="push result branches, one PR per task")
    prs.add_argument("--report", required=True)
    prs.add_argument("--repo-dir", default=".")
    prs.add_argument("--remote", default="origin")
    prs.add_argument("--base", default="")
    prs.add_argument("--branch-prefix", default="runner/nightly/")
    prs.add_argument(
        "--statuses",
        type=_statuses,
        default=frozenset({RunStatus.COMPLETED}),
        help="comma-separated run statuses that get a PR (default: completed)",
    )
    prs.add_argument("--token-env", default="GITHUB_TOKEN")
    prs.add_argument(
        "--reopen-closed", default="false", help='"true": a new PR after one closed unmerged'
    )
    prs.set_defaults(func=cmd_pull_requests)
    fin = sub.add_parser("finish", help="exit with the runner's code")
    fin.add_argument("--exit-code", default="")
    fin.add_argument("--fail-on-task-failure", default="true")
    fin.add_argument("--skipped", default="", help="why the run was skipped (exit 0)")
    fin.add_argument("--allowed", default="true", help="the gate's output")
    fin.add_argument("--conclusion", default="", help="the outputs step's conclusion")
    fin.add_argument("--outcomes", default="", help="step=outcome of the action's steps")
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
