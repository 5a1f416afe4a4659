"""The `run` step: the action's inputs checked and turned into one `runner run` (or
`runner report merge`), run, and summarised for the job.

Why here: the refusals that guard the API key and the machine (no sandbox off schedule
and workflow_dispatch, no key in the environment of an unsandboxed run, a task file
outside `trusted-config`, the skips GitHub's secret rules make expected) sit in front of
the one call that starts the agent, where a reviewer can see them all.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path

from runner.config.secrets import secrets_from_env
from runner.errors import RunnerError
from runner.github.context import (
    DEPENDABOT,
    PYTHON,
    UNSANDBOXED_EVENTS,
    Context,
    missing_keys,
    parse_extra_args,
    parse_models,
    provider_keys,
    runner_argv,
    sandbox_for,
    trust_problems,
    unsandboxed_runs,
)
from runner.github.launch import (
    read_key,
    restore_step_files,
    run_runner,
    runner_env,
    snapshot_step_files,
)
from runner.github.outcome import step_exit
from runner.github.sudo import drop_sudo
from runner.github.task_input import merge_argv, not_in_config, pr_adds, task_source
from runner.github.workflow_io import annotate, append_summary, load_report, write_outputs
from runner.redact import Redactor
from runner.reports.fmt import inline
from runner.vocabulary import EXIT_BAD_INPUT


def _skip(reason: str, env: Mapping[str, str]) -> int:
    """End the run step green without running: an expected situation, not a failure.
    The outputs step turns `skipped` into conclusion `skipped`, the comment step into the
    sticky comment (where the token may write)."""
    annotate("notice", "runner", f"not run: {reason}")
    append_summary(f"**runner** did not run: {inline(reason)}.\n", env)
    write_outputs({"skipped": reason}, env)
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
    push = _push_wanted(args.push, ctx)
    child = runner_env(env)
    handed = _handover(args, child)
    models = parse_models(f"{args.model} {args.models}")
    merging = bool(args.merge.strip())
    on_pr = ctx.on_pr
    loose: list[str] = []
    if merging:
        argv = merge_argv(args.merge, args.out)
    else:
        task_file, guarded = task_source(args, env)
        trusted = args.trusted_config.strip()
        if not Path(guarded or task_file).is_file() and trusted and on_pr:
            if not pr_adds(guarded, trusted, ctx, env):
                raise RunnerError(not_in_config(guarded, trusted))
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
                write_outputs({"exit-code": str(EXIT_BAD_INPUT)}, env)
                append_summary(
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
        _no_token_work_after(loose, push=push, comment=args.comment, env=env)
        if handed:
            argv += ["--secret-fd", "0"]
    print("runner " + " ".join(argv[len(PYTHON) + 2 :]), flush=True)  # no secret in argv
    report = Path(args.out) / "report.json"
    # Only a report this run writes is published: not one a pull request committed.
    report.unlink(missing_ok=True)
    before = snapshot_step_files(env)
    code = run_runner(argv, child, "".join(f"{k}={v}\n" for k, v in handed.items()))
    for path in restore_step_files(before):
        annotate(
            "error",
            "runner",
            f"the run changed {Path(path).name}, a file through which a step steers the "
            "job's later steps; the change was undone",
        )
    write_outputs({"exit-code": str(code), "batch-id": _batch_id(report)}, env)
    if code >= EXIT_BAD_INPUT and not report.is_file():
        append_summary(f"**runner** exited {code} before writing a report; see the log.\n", env)
    elif report.is_file():
        append_summary(_summary_of(Path(args.out), handed, env), env)
    return _end_unsandboxed(code, report, args.fail_on_task_failure, env) if loose else 0


def _push_wanted(push: str, ctx: Context) -> bool:
    """The `push` input, refused before the agent runs (and the key is spent) where the
    pull-requests step would refuse it after: on a pull request's code."""
    wanted = push.strip().lower() == "true"
    if wanted and ctx.foreign_code:
        raise RunnerError(
            f'push: "true" is refused on {ctx.event_name or "unnamed"} events: runs on a '
            "pull request's code never push (the patches are in the report artifact); "
            "set push only on schedule or workflow_dispatch"
        )
    return wanted


def _batch_id(report: Path) -> str:
    """The batch id of the report the run just wrote, "" when it wrote none; later
    steps use a report only when its batch id is this one."""
    if not report.is_file():
        return ""
    try:
        found = load_report(report)
    except RunnerError:
        return ""
    return found.batch_id if found is not None else ""


def _no_token_work_after(
    loose: list[str], *, push: bool, comment: str, env: Mapping[str, str]
) -> None:
    """An unsandboxed agent runs as the job's user: it can leave a process behind that
    reads a later step's environment from /proc, rewrite the Action's venv those steps
    import (a `.pth` file runs at interpreter start, -I or not), rewrite the code of a
    later `uses:` step, or point the checkout's remote elsewhere. So nothing after it in
    this job is trusted: pushing and commenting are refused before the agent starts, and
    output `unsandboxed`, written first, keeps every later step of the Action from
    running (this step sets conclusion, exit code and report itself, see
    _end_unsandboxed; on a refusal, conclusion failure)."""
    if not loose:
        return
    write_outputs({"unsandboxed": "true"}, env)
    commenting = comment.strip().lower() == "true"
    wanted = [name for name, on in (("push", push), ("comment", commenting)) if on]
    if wanted:
        write_outputs({"conclusion": "failure"}, env)
        raise RunnerError(
            f"{' and '.join(wanted)} with a run without a sandbox ({', '.join(loose)}) is "
            "refused: the agent runs as this job's user, so no later step of the job can "
            "be trusted with the GitHub token. Run the agent in a job of its own that "
            "uploads its out dir, and push or comment from a second job (see "
            "examples/workflows/nightly-full-access.yml)"
        )
    _preload()


def _preload() -> None:
    """Import now, before the agent starts, what this process needs after it: a module
    first imported later would be read from the venv the agent could have rewritten."""
    import runner.reports.fmt
    import runner.reports.markdown
    import runner.safe_markdown  # noqa: F401


def _end_unsandboxed(
    code: int, report: Path, fail_on_task_failure: str, env: Mapping[str, str]
) -> int:
    """The outputs and exit code of an unsandboxed run, from this process, which was
    running before the agent started: the Action's later steps (outputs, comment, pull
    requests, upload, finish) do not run after such an agent, whose job user could have
    rewritten what they execute. What the runner reports (its exit code, its report) was
    made where the agent ran, so the notice says so."""
    conclusion = "success" if code == 0 else "failure"
    write_outputs(
        {"conclusion": conclusion, "report": str(report) if report.is_file() else ""}, env
    )
    annotate(
        "notice",
        "runner",
        f"a run had no sandbox: the agent controlled this job from then on, so the "
        f"Action's later steps (outputs, comment, pull requests, upload, finish) did not "
        f"run; conclusion {conclusion} and exit-code {code} come from the runner, which "
        "ran beside the agent (upload the out dir yourself: README)",
    )
    return step_exit(code, fail_on_task_failure)


def _summary_of(out: Path, handed: Mapping[str, str], env: Mapping[str, str]) -> str:
    """The run's summary for the job summary (which the runner no longer writes itself):
    its summary.md, or the report re-rendered to fit GitHub's limit."""
    from runner.reports.fmt import STEP_SUMMARY_MAX_CHARS
    from runner.reports.markdown import render_markdown

    text = (out / "summary.md").read_text(encoding="utf-8", errors="replace")
    if len(text) > STEP_SUMMARY_MAX_CHARS:
        report = load_report(out / "report.json")
        text = render_markdown(report, max_chars=STEP_SUMMARY_MAX_CHARS) if report else ""
    redact = Redactor([*secrets_from_env(env), *handed.values()])
    return redact(text) + "\n"


def _handover(args: argparse.Namespace, child: dict[str, str]) -> dict[str, str]:
    """{api-key-env: key}, to hand to the runner through a pipe (see read_key); a key
    the job put into every step's environment is moved there too, out of `child`."""
    key = read_key(args.api_key_fd) if args.api_key_fd is not None else ""
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


def _secretless(ctx: Context) -> str:
    """Why this run has no Actions secrets, or "": a fork's pull request gets none, and a
    run Dependabot triggered (it is the sender: a pull request, or a push of its branch)
    only Dependabot's. Both are expected: the run is skipped, green."""
    if ctx.on_pr and ctx.from_fork:
        return "GitHub passes no secrets to workflows of pull requests from forks"
    sender = (ctx.event or {}).get("sender")
    if isinstance(sender, dict) and str(sender.get("login", "")).lower() == DEPENDABOT:
        return "GitHub passes Dependabot's runs only Dependabot secrets"
    return ""
