"""Which environment variables are secrets, and the environment the agent starts from.

Provider keys and push tokens are secrets whatever their names; so is anything that looks
like one (`*_TOKEN`, `*_KEY`, ...) and whatever the task file lists under `secrets:`. Their
values are redacted from every artifact, and the agent's commands never see them."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from runner.config import ResolvedTask
from runner.redact import MIN_SECRET_LEN
from runner.sandbox.env import SECRET_NAME


def secret_names(
    env: Mapping[str, str], tasks: Sequence[ResolvedTask] = (), extra: Collection[str] = ()
) -> set[str]:
    """Variables whose values are secrets: names that look secret, the task file's
    `secrets:`, every provider key and push token in use, whatever its name, and `extra`
    (what came through `--secret-fd`)."""
    names = {k for k in env if SECRET_NAME.search(k)} | set(extra)
    for t in tasks:
        names.update(t.secrets)
        if t.provider.env_key:
            names.add(t.provider.env_key)
        if t.git.push is not None and t.git.push.token_env:
            names.add(t.git.push.token_env)
    return names


def secrets_from_env(
    env: Mapping[str, str], tasks: Sequence[ResolvedTask] = (), extra: Collection[str] = ()
) -> list[str]:
    return [env[k] for k in sorted(secret_names(env, tasks, extra)) if env.get(k)]


def without_secrets(
    env: Mapping[str, str], tasks: Sequence[ResolvedTask], extra: Collection[str] = ()
) -> dict[str, str]:
    """The environment the agent's commands and the check start from: no secret variable,
    and no variable that carries a secret's value inside (`DB_URL=postgres://u:KEY@h`)."""
    names = secret_names(env, tasks, extra)
    values = [v for v in secrets_from_env(env, tasks, extra) if len(v) >= MIN_SECRET_LEN]
    return {k: v for k, v in env.items() if k not in names and not any(s in v for s in values)}
