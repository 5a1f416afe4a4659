"""Secrets: which variables are secret, their values kept from the agent's environment and
redacted (in every encoding we know) from everything that leaves the runner: reports,
events, stdout/stderr, commit messages, committed files and patches.

The canary test runs whole batches (`runner run`) against a scripted model that tries
every way to leak: printing the environment, reading the runner's own environ through
/proc, writing the canary (plain, base64, hex, URL-encoded, in a file name) into the
repository, and saying it in its final answer."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from runner import workspace
from runner.config import expand, parse_task_file
from runner.config.secrets import secret_names, secrets_from_env, without_secrets
from runner.redact import MASK, Redactor
from tests.support.cli import run_cli, shell
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    last_user_text,
    message_item,
    per_conversation,
    reasoning_item,
    reply_function_call,
    reply_items,
)
from tests.support.redaction import b64_cores

SECRET = "s3cr3t-Value/with+chars&more=="


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


def test_a_secret_written_into_the_repository_never_reaches_commit_or_patch(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "a\n", "ro.txt": "old\n"})
    ws = workspace.prepare_sync(repo, base="HEAD", root=tmp_path / "work", name="r")
    (ws.path / "a.txt").write_text(f"a\nkey={SECRET}\n")
    (ws.path / "ro.txt").write_text(base64.b64encode(SECRET.encode()).decode() + "\n")
    (ws.path / "ro.txt").chmod(0o444)
    (ws.path / f"named-{SECRET.encode().hex()}.txt").write_text("x\n")
    (ws.path / "link").symlink_to(f"/tmp/{SECRET.encode().hex()}")
    (ws.path / "clean.txt").write_text("nothing to see\n")
    patch = tmp_path / "out" / "r.patch"
    redactor = Redactor([SECRET])
    result = workspace.finish_sync(
        ws,
        branch_template="runner/{task}",
        fields={"task": "r"},
        message="m",
        patch_path=patch,
        redact=redactor,
    )
    assert result is not None
    assert result.branch is None  # a run that leaked: no branch
    assert sorted(v.split(":")[0] for v in result.violations) == [
        "a.txt",
        "link",
        f"named-{MASK}.txt",
        "ro.txt",
    ]
    text = patch.read_text()
    assert f"+key={MASK}" in text and "+nothing to see" in text
    show = subprocess.run(
        ["git", "show", "--format=raw", "--stat", "-p", result.commit],
        cwd=repo,  # the commit is written to the user's repository (the run sees its base's)
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for blob in (text, show):
        assert not any(f in blob for f in needles(SECRET))
    workspace.cleanup_sync(ws)


# ------------------------------------------------------------------ the canary batch

CANARIES = {
    "MY_CANARY": "mycanary-7f3a9c1e5b42",  # listed in `secrets:`, an innocent name
    "LOOPBACK_AUTH": "lbauth-29d84c6e0a11f3",  # the provider's env_key, an innocent name
    "CANARY_KEY": "ck-5e1b7a90c3d2f468a",  # a name that looks secret
    "PUSH_AUTH": "push-81aa03f9e6c7b2d5",  # the push token, an innocent name
}
EXTRA_ENV = {**CANARIES, "DATABASE_URL": f"postgres://u:{CANARIES['MY_CANARY']}@db/app"}
NAMES = " ".join(EXTRA_ENV)


def needles(secret: str) -> list[str]:
    raw = secret.encode()
    return [secret, raw.hex(), urllib.parse.quote(secret, safe=""), *b64_cores(raw)]


def leaky_model(req: RecordedRequest, i: int) -> Reply:
    task = last_user_text(req)
    canary = CANARIES["MY_CANARY"]
    if task == "env":
        return [
            shell(
                f"env; tr '\\0' '\\n' < /proc/self/environ; for v in {NAMES}; do "
                'echo "$v=${!v-unset}"; done | tee seen.txt',
                "c1",
            ),
            reply_items([message_item("env looked at")]),
        ][min(i, 1)]
    if task == "parent":
        return [
            shell(
                "tr '\\0' '\\n' < /proc/$PPID/environ > parent-env.txt; grep -c . parent-env.txt",
                "c1",
            ),
            reply_items([message_item("parent looked at")]),
        ][min(i, 1)]
    if task == "write":
        raw = canary.encode()
        body = (
            f"+plain {canary}\n+b64 {base64.b64encode(raw).decode()}\n"
            f"+hex {raw.hex()}\n+url {urllib.parse.quote(canary, safe='')}\n"
        )
        patch = (
            f"*** Begin Patch\n*** Add File: leak.txt\n{body}"
            f"*** Add File: notes-{canary}.txt\n+named\n*** End Patch"
        )
        if i == 0:
            return reply_function_call("apply_patch", {"input": patch}, call_id="p1")
        if i == 1:
            return shell(
                f"echo -n {canary} | base64 > b64.txt; echo -n {canary} | od -An -tx1", "c2"
            )
        return reply_items(
            [
                reasoning_item(f"the key is {canary}"),
                message_item(f"I wrote {canary} and {base64.b64encode(raw).decode()} down"),
            ]
        )
    return reply_items([message_item("nothing to do")])


def scan(blob: bytes, where: str, found: list[str]) -> None:
    for name, secret in EXTRA_ENV.items():
        for needle in needles(secret):
            if needle.encode() in blob:
                found.append(f"{name} ({needle}) in {where}")


def test_canary_is_found_nowhere(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = make_git_repo(tmp_path / "repo", {"README.md": "# r\n"})
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=repo, check=True)
    srv = loopback_thread(per_conversation(leaky_model))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nsecrets: [MY_CANARY]\n"
        f"providers:\n  fake: {{base_url: '{srv.base_url}', env_key: LOOPBACK_AUTH}}\n"
        "defaults:\n  model: fake/m\n"
        "  git: {push: {remote: origin, token_env: PUSH_AUTH}}\n"
        f"tasks:\n"
        + "".join(
            f"  - {{id: {t}, prompt: {t}, repo: '{repo}'}}\n"
            for t in ("env", "parent", "write", "quiet")
        )
    )
    summary = tmp_path / "step-summary.md"
    found: list[str] = []
    outs: dict[str, Any] = {}
    for flags in ([], ["--json"]):
        out = tmp_path / ("out-json" if flags else "out")
        res = run_cli(
            "run",
            tasks,
            "--out",
            out,
            *flags,
            env={**EXTRA_ENV, "GITHUB_STEP_SUMMARY": str(summary)},
        )
        assert res.returncode in (0, 1), res.stderr
        assert "Traceback" not in res.stderr
        scan(res.stdout.encode(), f"stdout {flags}", found)
        scan(res.stderr.encode(), f"stderr {flags}", found)
        for f in out.rglob("*"):
            if f.is_file():
                scan(f.read_bytes(), str(f.relative_to(tmp_path)), found)
        outs[str(flags)] = (res, json.loads((out / "report.json").read_text()))
    scan(summary.read_bytes(), "step summary", found)
    for git_dir in (repo, remote):
        objects = subprocess.run(
            ["git", "cat-file", "--batch-all-objects", "--batch"],
            cwd=git_dir,
            capture_output=True,
            check=True,
        ).stdout
        scan(objects, f"objects of {git_dir.name}", found)
        refs = subprocess.run(
            ["git", "for-each-ref"], cwd=git_dir, capture_output=True, check=True
        ).stdout
        scan(refs, f"refs of {git_dir.name}", found)
    assert found == []

    # ... and not because nothing happened.
    res, report = outs["[]"]
    by_id = {t["id"]: t for t in report["runs"]}
    env_patch = (tmp_path / "out" / by_id["env"]["result"]["patch"]).read_text()
    for name in EXTRA_ENV:
        assert f"+{name}=unset" in env_patch  # never in the agent's environment
    assert by_id["env"]["result"]["branch"] and by_id["env"]["result"]["pushed"]
    write = by_id["write"]
    assert write["status"] == "scope_violation" and write["result"]["branch"] is None
    assert any("secret" in v for v in write["result"]["violations"])
    leak = (tmp_path / "out" / write["result"]["patch"]).read_text()
    assert f"+plain {MASK}" in leak and f"notes-{MASK}.txt" in leak
    assert f"I wrote {MASK}" in res.stdout
    assert len(srv.requests) == 2 * (2 + 2 + 3 + 1)


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


def test_hide_own_makes_the_runner_non_dumpable() -> None:
    """Another process of the runner's user may then not read its /proc environ or mem."""
    probe = (
        "import ctypes; from runner.secret_env import hide_own; "
        "get = lambda: ctypes.CDLL(None).prctl(3, 0, 0, 0, 0); "  # PR_GET_DUMPABLE
        "before = get(); hide_own(['RUNNER_TEST_NOTHING']); print(before, get())"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.split() == ["1", "0"]
