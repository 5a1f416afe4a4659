"""runner/config/secrets.py: which variables are secrets (by name, by a credential in a URL
or a connection string, by the task file), the values to redact, and the environment the
agent starts from without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import expand, parse_task_file
from runner.config.secrets import secret_names, secrets_from_env, without_secrets


def test_which_variables_are_secret(tmp_path: Path) -> None:
    text = (
        "version: 1\nsecrets: [MY_CANARY]\n"
        "providers:\n  p: {base_url: 'http://127.0.0.1:9/v1', env_key: LOOPBACK_AUTH}\n"
        "defaults:\n  model: p/m\n  git: {push: {remote: origin, token_env: PUSH_AUTH}}\n"
        "tasks:\n  - {id: a, prompt: p}\n"
    )
    tasks = expand(parse_task_file(text, "t.yaml"), tmp_path)
    env = {
        "MY_CANARY": "canary-value-1",
        "LOOPBACK_AUTH": "auth-value-22",
        "PUSH_AUTH": "push-value-333",
        "OPENAI_API_KEY": "sk-value-4444",
        "DB_URL": "postgres://u:canary-value-1@h/db",
        "PATH": "/usr/bin",
        "HOME": "/home/x",
    }
    # A URL with a password is a secret whatever its variable is called (issue 25).
    assert secret_names(env, tasks) == {
        "MY_CANARY",
        "LOOPBACK_AUTH",
        "PUSH_AUTH",
        "OPENAI_API_KEY",
        "DB_URL",
    }
    assert sorted(set(secrets_from_env(env, tasks))) == sorted(
        [
            "canary-value-1",
            "auth-value-22",
            "push-value-333",
            "sk-value-4444",
            "postgres://u:canary-value-1@h/db",
            "u:canary-value-1",
        ]
    )
    assert without_secrets(env, tasks) == {"PATH": "/usr/bin", "HOME": "/home/x"}


@pytest.mark.parametrize(
    ("url", "credentials"),
    [
        ("postgres://h/db?password=querypw-canary-777", ["querypw-canary-777"]),
        ("https://ghp_tokenonly123@github.com/o/r", ["ghp_tokenonly123"]),
        (
            "redis://u:p%40ss-word@h:6379",
            ["u:p%40ss-word", "p%40ss-word", "u:p@ss-word", "p@ss-word"],
        ),
        ("https://x.blob.core/c?sv=1&sig=abc%2Fdefgh&se=2", ["abc%2Fdefgh", "abc/defgh"]),
        ("https://h/api?api_key=k-123456789;pwd=pw-987654321", ["k-123456789", "pw-987654321"]),
        ("https://h/x?X-Amz-Signature=ff00ff00ff", ["ff00ff00ff"]),
        ("https://example.com/a?page=2&q=token", []),
        ("ssh://git@github.com/o/r.git", []),
        ("http://127.0.0.1:8080/v1", []),
    ],
)
def test_every_url_credential_is_a_secret(url: str, credentials: list[str]) -> None:
    """Userinfo with or without a colon, and query parameters named like credentials."""
    env = {"SOME_URL": url, "PATH": "/usr/bin"}
    assert ("SOME_URL" in secret_names(env)) == bool(credentials)
    found = secrets_from_env(env)
    assert found == ([url, *credentials] if credentials else [])
    assert without_secrets(env, []) == (
        {"PATH": "/usr/bin"} if credentials else {"SOME_URL": url, "PATH": "/usr/bin"}
    )


@pytest.mark.parametrize(
    ("value", "credentials"),
    [
        ("jdbc:sqlserver://db:1433;user=sa;password=jdbcpw-canary-1", ["jdbcpw-canary-1"]),
        (
            "Server=tcp:db,1433;Database=app;User ID=u;Password=adopw-canary-2;",
            ["adopw-canary-2"],
        ),
        ("Driver={ODBC};Server=db;Uid=u;Pwd=odbcpw-canary-3", ["odbcpw-canary-3"]),
        ("Server=db; PWD = 'quoted;pw-4' ;Database=x", ["'quoted;pw-4'", "quoted;pw-4"]),
        ("Host=db;Port=5432;Database=app;Username=u", []),
        ("Server=db;Integrated Security=true;Password=", []),
    ],
)
def test_a_connection_string_password_is_a_secret(value: str, credentials: list[str]) -> None:
    """Attack review of issue 25, finding 3: `password=`/`pwd=` pairs of JDBC, ADO.NET and
    ODBC connection strings, whatever the variable is called."""
    env = {"APP_CONN": value, "HOME": "/home/x"}
    assert ("APP_CONN" in secret_names(env)) == bool(credentials)
    assert secrets_from_env(env) == ([value, *credentials] if credentials else [])
    assert ("APP_CONN" in without_secrets(env, [])) == (not credentials)


SECRET_NAMES = [
    "NPM_CONFIG__AUTH",
    "npm_config__auth",
    "GH_PAT",
    "AZURE_DEVOPS_PAT",
    "REGISTRY_AUTH",
    "DB_PWD",
    "SMTP_PASS",
]


ORDINARY_NAMES = [
    "PATH",
    "HOME",
    "PWD",
    "OLDPWD",
    "AUTHOR",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "CLASSPATH",
    "LD_LIBRARY_PATH",
    "PATCH_LEVEL",
    "PATTERN",
    "OAUTH_CALLBACK_URL",
    "AUTH_MODE_DOC",
    "PASSIVE_MODE",
    "LANG",
    "SHELL",
    "USER",
]


def test_credential_names_are_secrets_and_ordinary_names_stay_visible() -> None:
    """Names ending in a credential's word (`_PAT`, `_AUTH`, `_PWD`, `_PASS`) are secrets;
    `PATH`, `PWD`, `AUTHOR`... are not, and reach the agent's environment."""
    env = {name: f"value-of-{name.lower()}" for name in SECRET_NAMES + ORDINARY_NAMES}
    assert secret_names(env) == set(SECRET_NAMES)
    assert sorted(without_secrets(env, [])) == sorted(ORDINARY_NAMES)


def test_names_given_through_secret_fd_are_secrets_and_short_values_hide_no_neighbour() -> None:
    """`extra` (what `--secret-fd` named) is secret whatever the name; a value shorter than
    the redactor's minimum is not looked for inside other variables (it would hide them all)."""
    env = {"PLAIN_NAME": "x1", "OTHER": "has x1 inside", "LONGER": "value-long-enough"}
    assert secret_names(env, [], extra={"PLAIN_NAME", "LONGER"}) == {"PLAIN_NAME", "LONGER"}
    assert without_secrets(env, [], extra={"PLAIN_NAME"}) == {
        "OTHER": "has x1 inside",
        "LONGER": "value-long-enough",
    }
    inside = {"LONGER": "value-long-enough", "COPY": "prefix value-long-enough suffix"}
    assert without_secrets(inside, [], extra={"LONGER"}) == {}
