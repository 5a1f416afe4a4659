"""Everything `runner run` would refuse, found before the first model request.

`runner validate` and `runner run` call the same `check`, so a file that validates does
not fail late: after an hour of model time, a branch template with an unknown field or an
empty instructions file would throw the work away. Each problem names the file, line and
field its run remembers choosing the value at (`ResolvedTask.at`), without going back to
the task file.

`offline` skips what depends on the machine the check runs on (API key variables, the
repositories), e.g. for a lint job that validates task files without their secrets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from runner import workspace
from runner.config import BatchLimits, Origin, ResolvedTask, TaskFile, field_line
from runner.errors import ConfigError, Problem


def _say(at: Origin, message: str) -> Problem:
    return at.problem(message)


def check(
    tasks: Sequence[ResolvedTask],
    *,
    file: str,
    env: Mapping[str, str],
    tf: TaskFile | None = None,
    models: Sequence[str] = (),
    budget: BatchLimits | None = None,
    offline: bool = False,
) -> None:
    """Raise one ConfigError listing every problem found, or return. Each run says where
    its values came from (`ResolvedTask.at`); `tf` only locates `budget:`. `models` is
    kept for callers of the old signature and not needed."""
    del models
    budget = budget if budget is not None else (tf.budget if tf is not None else None)
    line = field_line(tf, ("budget", "max_cost_usd")) if tf is not None else None
    budget_at = Origin(file=file, line=line, field="budget.max_cost_usd")
    found: list[Problem] = []
    found += _collisions(tasks)
    found += _branches(tasks)
    found += _prices(tasks, budget, budget_at)
    found += _output_caps(tasks)
    if not offline:
        found += _keys(tasks, env)
        found += _repos(tasks)
    unique = list({str(p): p for p in found}.values())  # a defaults' problem once
    if unique:
        raise ConfigError(unique)


def _collisions(tasks: Sequence[ResolvedTask]) -> list[Problem]:
    """Two runs with one name would share a workspace, events file, patch and branch."""
    first: dict[str, ResolvedTask] = {}
    out = []
    for t in tasks:
        other = first.setdefault(t.run, t)
        if other is t:
            continue
        a, b = f"{other.provider_name}/{other.model}", f"{t.provider_name}/{t.model}"
        why = (
            f"{b!r} is listed twice"
            if a == b
            else f"{a!r} and {b!r} both make the run name {t.run!r} (characters other than "
            "letters, digits, '.', '_' and '-' become '-')"
        )
        out.append(
            _say(
                t.at("model"),
                f"{why}; each model may appear once, and names must stay distinct",
            )
        )
    return out


def _branches(tasks: Sequence[ResolvedTask]) -> list[Problem]:
    from runner.run import branch_fields

    out = []
    for t in tasks:
        try:  # with a run id of the real length: the batch's own is not made yet
            workspace.branch_name(t.git.branch, branch_fields(t, "0" * 12))
        except workspace.WorkspaceError as exc:
            out.append(_say(t.at("git", "branch"), str(exc)))
    return out


def _prices(
    tasks: Sequence[ResolvedTask], budget: BatchLimits | None, budget_at: Origin
) -> list[Problem]:
    """A cost limit needs a price: refuse to start rather than never stop."""
    out = []
    for t in tasks:
        if t.price is not None:
            continue
        what = f"{t.provider_name}/{t.model}"
        fix = (
            f"{what} has no known price; give one under models: {what}: price: "
            "{input: ..., cached_input: ..., output: ...} (USD per million tokens)"
        )
        if t.limits.max_cost_usd is not None:
            out.append(_say(t.at("limits", "max_cost_usd"), fix))
        elif budget is not None and budget.max_cost_usd is not None:
            out.append(budget_at.problem(fix))
    return out


def _output_caps(tasks: Sequence[ResolvedTask]) -> list[Problem]:
    """With constrained tool calls every answer is sized to `max_output_tokens`: a cap too
    small to hold one call of each offered tool would silently take the tools away."""
    from runner.providers.constrained import Constrained, answer_branches
    from runner.providers.grammar import allocate
    from runner.wiring import make_tools

    out = []
    for t in tasks:
        cap = t.model_options.max_output_tokens
        if not t.provider.constrained_tools or cap is None:
            continue
        specs = [tool.spec() for tool in make_tools(t)]
        for branch in answer_branches(specs, settings=Constrained()):
            if allocate(branch, cap) is not None:
                continue
            name = branch["properties"].get("tool", {}).get("const", "the final answer")
            need = next(n for n in range(cap, 100_000) if allocate(branch, n) is not None)
            out.append(
                _say(
                    t.at("model_options", "max_output_tokens"),
                    f"{cap} tokens cannot hold one answer of the constrained format "
                    f"for {name!r} (it needs at least {need}); raise it",
                )
            )
            break
    return out


def _keys(tasks: Sequence[ResolvedTask], env: Mapping[str, str]) -> list[Problem]:
    out = []
    for t in tasks:
        key = t.provider.env_key
        if key and not env.get(key):
            out.append(
                _say(
                    t.at("model"),
                    f"{t.provider_name}/{t.model} needs the environment variable "
                    f"{key} (the API key for {t.provider_name}, see providers."
                    f"{t.provider_name}.env_key); it is not set. `runner validate "
                    "--offline` skips this check",
                )
            )
    return out


def _repos(tasks: Sequence[ResolvedTask]) -> list[Problem]:
    """Every task's repository and base must name a commit before anything starts."""
    out = []
    checked: set[tuple[Path, str]] = set()
    for t in tasks:
        if (t.repo, t.git.base) in checked:
            continue
        checked.add((t.repo, t.git.base))
        if ".git" in t.repo.parts:
            out.append(
                _say(
                    t.at("repo"),
                    f"{t.repo} is inside a repository's .git "
                    "directory; point repo at the work tree that holds it",
                )
            )
            continue
        try:
            workspace.check_base(t.repo, t.git.base)
        except workspace.WorkspaceError as exc:
            out.append(_say(t.at(*_culprit(t)), str(exc)))
    return out


def _culprit(t: ResolvedTask) -> tuple[str, ...]:
    """The field to blame for a base that names no commit: `git.base` when it was set and
    the repository itself has commits, else `repo`."""
    if t.git.base == "HEAD":
        return ("repo",)
    try:
        workspace.check_base(t.repo, "HEAD")
    except workspace.WorkspaceError:
        return ("repo",)
    return ("git", "base")
