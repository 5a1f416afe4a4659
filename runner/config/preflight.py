"""Everything `runner run` would refuse, found by the config pass before the first model
request.

`runner validate` and `runner run` both load runs through `config.load`, which ends here,
so a file that validates does not fail late: after an hour of model time, a branch
template with an unknown field or an empty instructions file would throw the work away.
Each problem names the file, line and field its run remembers choosing the value at
(`Run.at`), without going back to the task file.

`offline` skips what depends on the machine the check runs on (API key variables, the
repositories, the secrets in the environment, the container engine and its images), e.g.
for a lint job that validates task files without their secrets.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from runner import workspace
from runner.config.envcheck import engine_problems
from runner.config.resolved import Origin, Run, branch_fields
from runner.config.schema import BatchLimits
from runner.errors import ConfigError, Problem

FULL_ACCESS = "danger-full-access"


def _say(at: Origin, message: str) -> Problem:
    return at.problem(message)


def check(
    runs: Sequence[Run],
    *,
    env: Mapping[str, str],
    budget: BatchLimits | None = None,
    budget_at: Origin | None = None,
    offline: bool = False,
    concurrency: int | None = None,
    secret_vars: Collection[str] = (),
) -> None:
    """Raise one ConfigError listing every problem found, or return. `budget_at` is where
    `budget.max_cost_usd` was written. `concurrency` (`runner run` only) and `secret_vars`
    (`--secret-fd`) decide which MCP secrets a full-access command could read
    (`mcp_secrets`)."""
    found = problems(
        runs,
        env=env,
        budget=budget,
        budget_at=budget_at,
        offline=offline,
        concurrency=concurrency,
        secret_vars=secret_vars,
    )
    if found:
        raise ConfigError(found)


def problems(
    runs: Sequence[Run],
    *,
    env: Mapping[str, str],
    budget: BatchLimits | None = None,
    budget_at: Origin | None = None,
    offline: bool = False,
    concurrency: int | None = None,
    secret_vars: Collection[str] = (),
    bases: dict[tuple[str, str], str] | None = None,
) -> list[Problem]:
    """What `check` raises, each problem once (a defaults' problem is every run's).
    `bases` gets the commit each repository's base names, as the check found it."""
    if budget_at is None:
        file = runs[0].origins[""].file if runs else ""
        budget_at = Origin(file=file, line=None, field="budget.max_cost_usd")
    found: list[Problem] = []
    found += _collisions(runs)
    found += _branches(runs)
    found += _prices([t for t in runs if t.agent == "model"], budget, budget_at)
    found += _output_caps(runs)
    found += _local_models(runs)
    if not offline:
        found += _keys([t for t in runs if t.agent == "model"], env)  # oracle, nop: no model
        found += _suite_graders(runs)
        found += _repos(
            [t for t in runs if t.repo_named or t.environment.backend == "local"],
            {} if bases is None else bases,
        )
        found += engine_problems(runs, env)
        found += mcp_secrets(runs, env, concurrency or 1, secret_vars)
    return list({str(p): p for p in found}.values())


def _collisions(tasks: Sequence[Run]) -> list[Problem]:
    """Two runs with one name would share a workspace, events file, patch and branch."""
    first: dict[str, Run] = {}
    out = []
    for t in tasks:
        other = first.setdefault(t.name, t)
        if other is t:
            continue
        a, b = other.label, t.label
        why = (
            f"{b!r} is listed twice"
            if a == b
            else f"{a!r} and {b!r} both make the run name {t.name!r} (characters other than "
            "letters, digits, '.', '_' and '-' become '-')"
        )
        out.append(
            _say(
                t.at("model"),
                f"{why}; each model may appear once, and names must stay distinct",
            )
        )
    return out


def _branches(tasks: Sequence[Run]) -> list[Problem]:
    out = []
    for t in tasks:
        try:  # with a batch id of the real length: the batch's own is not made yet
            workspace.branch_name(t.git.branch, branch_fields(t, "0" * 12))
        except workspace.WorkspaceError as exc:
            out.append(_say(t.at("git", "branch"), str(exc)))
    return out


def _prices(tasks: Sequence[Run], budget: BatchLimits | None, budget_at: Origin) -> list[Problem]:
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


def _output_caps(tasks: Sequence[Run]) -> list[Problem]:
    """With constrained tool calls every answer is sized to `max_output_tokens`: a cap too
    small to hold one call of each offered tool would silently take the tools away."""
    capped = [
        t
        for t in tasks
        if t.provider.constrained_tools and t.model_options.max_output_tokens is not None
    ]
    if not capped:
        return []  # the grammar modules are loaded only for a batch that needs them
    from runner.providers.constrained import Constrained, answer_branches
    from runner.providers.grammar import allocate
    from runner.tools.offered import offered_tools

    out = []
    for t in capped:
        cap = t.model_options.max_output_tokens
        assert cap is not None
        tools = offered_tools(
            t.tools,
            apply_patch_tool=t.apply_patch_tool,
            shell_timeout_ms=t.shell_timeout_ms,
            web_search=t.web_search,
        )
        specs = [tool.spec() for tool in tools]
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


def _local_models(tasks: Sequence[Run]) -> list[Problem]:
    """The embedded engine serves the one model it ships with, whatever the request names:
    `local/foo` would run that model and label its results `local/foo`."""
    if not any(t.provider_name == "local" for t in tasks):
        return []  # the engine's module is loaded only for a batch that runs it
    from runner.providers.local import MODEL_NAME

    known = f"local/{MODEL_NAME}"
    return [
        _say(
            t.at("model"),
            f"local/{t.model}: the embedded engine (provider local) has no model "
            f"{t.api_model!r}; its known models: {known}. A model of your own runs on "
            "another provider (e.g. ollama, lmstudio or vllm)",
        )
        for t in tasks
        if t.provider_name == "local" and t.api_model != MODEL_NAME
    ]


def _suite_graders(tasks: Sequence[Run]) -> list[Problem]:
    """SWE-bench runs are graded by the swebench package: missing, say so before any run."""
    swe = [t for t in tasks if t.suite is not None and t.suite.format == "swe-bench"]
    if not swe:
        return []
    from runner.suites.swe_grading import swebench_problem

    wrong = swebench_problem()
    return [] if wrong is None else [_say(swe[0].at("prompt"), wrong.message)]


def _keys(tasks: Sequence[Run], env: Mapping[str, str]) -> list[Problem]:
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


def mcp_secrets(
    tasks: Sequence[Run],
    env: Mapping[str, str],
    concurrency: int,
    secret_vars: Collection[str],
) -> list[Problem]:
    """A stdio MCP server holds its `env_vars` in its environment, which any process of
    the same user reads in /proc/<pid>/environ; nothing the runner can set up on the host
    stops that (a Landlock domain does not, measured; the server is an ordinary, dumpable
    process). A full-access command is such a process, so a secret there is refused
    wherever one could run beside the server: in its own run, or in any run of the batch
    when runs overlap (`--concurrency` above 1)."""
    full = [t for t in tasks if t.sandbox == FULL_ACCESS]
    if not full:
        return []
    from runner.config.secrets import without_secrets

    visible = without_secrets(env, tasks, secret_vars)
    out = []
    for t in tasks:
        own = t.sandbox == FULL_ACCESS
        if not own and concurrency == 1:
            continue
        for name, server in sorted(t.mcp_servers.items()):
            secret = [
                (j, var)
                for j, var in enumerate(server.env_vars)
                if server.command is not None and var in env and var not in visible
            ]
            for j, var in secret:
                reader = (
                    "this run's own commands"
                    if own
                    else f"run {full[0].name}'s commands (danger-full-access, at "
                    f"--concurrency {concurrency})"
                )
                fix = "" if own else ", run the batch with --concurrency 1"
                out.append(
                    _say(
                        t.at("mcp_servers", name, "env_vars", j),
                        f"{var} is a secret, and MCP server {name!r} would hold it in its "
                        f"environment, where {reader} can read it (/proc/<pid>/environ: "
                        "a danger-full-access command runs on the host as your user). "
                        f"Allowed: no secret in this server's env_vars{fix}, a sandbox "
                        "(workspace-write or read-only) for every run, or a `url` server "
                        "with `bearer_token_env_var` (the runner keeps that token)",
                    )
                )
    return out


def _repos(tasks: Sequence[Run], bases: dict[tuple[str, str], str]) -> list[Problem]:
    """Every task's repository and base must name a commit before anything starts; the
    commits found go to `bases`."""
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
            bases[(str(t.repo), t.git.base)] = workspace.check_base(t.repo, t.git.base)
        except workspace.WorkspaceError as exc:
            out.append(_say(t.at(*_culprit(t)), str(exc)))
    return out


def _culprit(t: Run) -> tuple[str, ...]:
    """The field to blame for a base that names no commit: `git.base` when it was set and
    the repository itself has commits, else `repo`."""
    if t.git.base == "HEAD":
        return ("repo",)
    try:
        workspace.check_base(t.repo, "HEAD")
    except workspace.WorkspaceError:
        return ("repo",)
    return ("git", "base")
