"""Which task file the run step runs: the `task-file` input, a one-task file made from
`prompt` / `prompt-file`, the inline `tasks` YAML, or the shard reports to merge.

Why apart: the inputs disagree in where their file lives and what a pull request may
control; settling that here leaves the run step one path to check against
`trusted-config`.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from runner.errors import RunnerError
from runner.github.context import PYTHON, Context, prompt_task


def merge_argv(patterns: str, out: str) -> list[str]:
    """`runner report merge` over the directories the globs match (shard artifacts)."""
    dirs = sorted({str(p) for pat in patterns.split() for p in Path().glob(pat) if p.is_dir()})
    if not dirs:
        raise RunnerError(f"merge: no directory matches {patterns!r}")
    return [*PYTHON, "-m", "runner", "report", "merge", *dirs, "--out", out]


def task_source(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str, str]:
    """(task file to run, file the pull request must not control): the `task-file`, or a
    one-task file made from `prompt` / `prompt-file` outside the workspace."""
    given = [
        n
        for n, v in (
            ("task-file", args.task_file),
            ("tasks", args.tasks),
            ("prompt", args.prompt),
            ("prompt-file", args.prompt_file),
        )
        if v.strip()
    ]
    if len(given) > 1:
        raise RunnerError(
            f"give one of task-file, tasks, prompt and prompt-file; got {' and '.join(given)}"
        )
    if not given:
        raise RunnerError(
            "one of task-file, tasks, prompt or prompt-file is required (or merge, "
            "to combine shard reports)"
        )
    if args.task_file.strip():
        return args.task_file, args.task_file
    if args.tasks.strip():
        return inline_tasks(args.tasks, env), ""
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


def inline_tasks(text: str, env: Mapping[str, str]) -> str:
    """The `tasks` input (a task file's YAML, so that one workflow file is all a recipe
    copies) written to a file of its own outside the workspace. A task's `repo` (default
    `.`) is taken from the checkout, not from where that file lies.

    Shards of one benchmark each write the file on their own machine, and the merge
    accepts them only if they ran the same task file (path and content): so the path
    is named after the input, and each `repo` is written relative to the file (the
    runner's temp directory and the checkout are siblings on every runner)."""
    import hashlib

    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise RunnerError(
            f"tasks input{where}: not YAML ({getattr(exc, 'problem', exc)})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list):
        raise RunnerError("tasks input: a task file's YAML, a mapping with a `tasks` list")
    workspace = Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve()
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    folder = (Path(env.get("RUNNER_TEMP") or os.getcwd()) / f"runner-tasks-{digest}").resolve()
    for n, task in enumerate(data["tasks"]):
        if not isinstance(task, dict):
            raise RunnerError(f"tasks input: tasks[{n}] is not a mapping")
        repo = task.get("repo", ".")
        if not isinstance(repo, str):
            raise RunnerError(f"tasks input: tasks[{n}].repo is not a path")
        task["repo"] = os.path.relpath(workspace / repo, folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return str(path)


def pr_adds(path: str, trusted: str, ctx: Context, env: Mapping[str, str]) -> bool:
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


def not_in_config(path: str, trusted: str) -> str:
    have = sorted(
        p.name for p in Path(trusted).iterdir() if p.suffix in (".yaml", ".yml", ".md", ".txt")
    )
    return (
        f"{path}: no such file, in the base branch or in this pull request; "
        f"{trusted} has {', '.join(have) or 'no task or prompt file'}: check the "
        "task-file / prompt-file input"
    )
