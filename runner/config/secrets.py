"""Which environment variables are secrets, and the environment the agent starts from.

Provider keys and push tokens are secrets whatever their names; so is anything that looks
like one (`*_TOKEN`, `*_KEY`, `*_PAT`, `*_AUTH`, ...), whatever the task file lists under
`secrets:`, and any variable holding a credential in a URL, userinfo
(`postgres://u:pw@host`, `https://TOKEN@host`) or a query parameter named like one
(`?password=`, `?sig=`), or in a connection string's `password=` or `pwd=` pair
(`jdbc:sqlserver://db;user=sa;password=...`, ADO.NET `Server=...;Pwd=...;`). Their
values are redacted from every artifact, and the agent's commands never see them.

In config because the config pass needs it: a secret an MCP server would hold where a
full-access command can read it is refused before anything starts."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Collection, Mapping, Sequence

from runner.config.resolved import Run
from runner.redact import MIN_SECRET_LEN
from runner.sandbox.env import SECRET_NAME

URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://([^\s/?#@]+@)?[^\s?#]*(?:\?([^\s#]*))?")
"""A URL with its userinfo (`user:password@`, or a bare token: `https://TOKEN@host`)
and its query string."""
CREDENTIAL_PARAM = re.compile(r"pass|pwd|token|secret|key|auth|sig|credential", re.IGNORECASE)
"""Query parameters that carry a credential: `password`, `pwd`, `access_token`, `api_key`,
`sig`, `X-Amz-Signature`, `client_secret`... A name matched wrongly costs a hidden
variable; one missed costs a leak."""


def url_passwords(value: str) -> list[str]:
    """The credentials of the URLs in `value`, as written and decoded: the userinfo
    (`user:password`, its password, or a bare token) and the value of every query
    parameter named like a credential. A non-empty list makes the variable a secret."""
    found: list[str] = []
    for m in URL.finditer(value):
        if m[1]:
            userinfo = m[1][:-1]
            user, colon, password = userinfo.partition(":")
            if colon or len(user) >= MIN_SECRET_LEN:  # `ssh://git@host` names a user
                found += [userinfo, password] if colon else [user]
        for param in re.split(r"[&;]", m[2] or ""):
            name, eq, secret = param.partition("=")
            if eq and secret and CREDENTIAL_PARAM.search(urllib.parse.unquote_plus(name)):
                found.append(secret)
    found += [urllib.parse.unquote_plus(f) for f in found]
    return [f for f in dict.fromkeys(found) if f]


CONNECTION_PASSWORD = re.compile(
    r"""(?:^|[;\s])\s*(?:password|pwd)\s*=\s*("[^"]*"|'[^']*'|[^;]*)""", re.IGNORECASE
)
"""A `password=` or `pwd=` pair of a `key=value;` connection string (JDBC after its URL,
ADO.NET, ODBC), its value bare or quoted."""


def connection_passwords(value: str) -> list[str]:
    """The passwords of a connection string in `value`, as written and unquoted."""
    found: list[str] = []
    for m in CONNECTION_PASSWORD.finditer(value):
        written = m[1].strip()
        found += [written, written[1:-1]] if written[:1] in "\"'" and written else [written]
    return [f for f in dict.fromkeys(found) if f]


def credentials_in(value: str) -> list[str]:
    """Every credential `value` carries in a URL or a connection string; a non-empty list
    makes the variable a secret."""
    return list(dict.fromkeys(url_passwords(value) + connection_passwords(value)))


def secret_names(
    env: Mapping[str, str], tasks: Sequence[Run] = (), extra: Collection[str] = ()
) -> set[str]:
    """Variables whose values are secrets: names that look secret, values holding a URL
    with a credential, the task file's `secrets:`, every provider key and push token in use,
    whatever its name, and `extra` (what came through `--secret-fd`)."""
    names = {k for k in env if SECRET_NAME.search(k) or credentials_in(env[k])}
    names |= set(extra)
    for t in tasks:
        names.update(t.secrets)
        if t.provider.env_key:
            names.add(t.provider.env_key)
        if t.git.push is not None and t.git.push.token_env:
            names.add(t.git.push.token_env)
    return names


def secrets_from_env(
    env: Mapping[str, str], tasks: Sequence[Run] = (), extra: Collection[str] = ()
) -> list[str]:
    """The values to redact: each secret variable's whole value, and every credential in
    it (a model may print just that part)."""
    values = [env[k] for k in sorted(secret_names(env, tasks, extra)) if env.get(k)]
    return values + [p for v in values for p in credentials_in(v)]


def without_secrets(
    env: Mapping[str, str], tasks: Sequence[Run], extra: Collection[str] = ()
) -> dict[str, str]:
    """The environment the agent's commands and the check start from: no secret variable,
    and no variable that carries a secret's value inside (`DB_URL=postgres://u:KEY@h`)."""
    names = secret_names(env, tasks, extra)
    values = [v for v in secrets_from_env(env, tasks, extra) if len(v) >= MIN_SECRET_LEN]
    return {k: v for k, v in env.items() if k not in names and not any(s in v for s in values)}
