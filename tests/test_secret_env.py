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

from runner import workspace
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
