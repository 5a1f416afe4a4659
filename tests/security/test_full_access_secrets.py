"""Class 4 of issue 25: under `danger-full-access` a command runs on the host as the
runner's user, so it can read `/proc/<pid>/environ` of every process above it. Neither
the runner nor anything else it started may show a secret there: not the provider key,
not a push token, not a credential inside a URL (`DATABASE_URL`, `?password=`, or
`https://TOKEN@host`). The command writes what
it read to a file outside the run, so redaction cannot hide a leak from this test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import runner
from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import Reply, Script, per_conversation, reply_message
from tests.support.security import KEY, sh

GITHUB_TOKEN = "ghp_fullaccess_canary_7c1e9b2a"
DB_PASSWORD = "dbpass-canary-5d8f3a61"
DATABASE_URL = f"postgres://app:{DB_PASSWORD}@db.internal:5432/prod"
QUERY_PASSWORD = "querypw-canary-777"
DB2_URL = f"postgres://h/db?sslmode=require&password={QUERY_PASSWORD}"
URL_TOKEN = "urltoken-canary-4e2a9c"
MIRROR_URL = f"https://{URL_TOKEN}@git.example.com/org/repo.git"
"""Credentials in a URL under names that do not look secret: a query parameter, and a
userinfo with no colon (a token)."""
SECRETS = (KEY, GITHUB_TOKEN, DB_PASSWORD, QUERY_PASSWORD, URL_TOKEN)

# Every ancestor's environ, reversed (a form no redactor knows), then the runner's own by
# pid, and the command's own environment.
WALK = """
p=$$
while [ "$p" -gt 1 ]; do
  echo "== $p"; tr '\\0' '\\n' </proc/$p/environ | rev
  p=$(awk '/^PPid:/{print $2}' /proc/$p/status)
done
echo "== parent"; tr '\\0' '\\n' </proc/$PPID/environ
echo "== self"; env
"""


def _task_file(dir_: Path, base_url: str, repo: Path) -> Path:
    path = dir_ / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults: {model: fake/m, sandbox: danger-full-access}\n"
        f"tasks:\n  - {{id: t, prompt: look around, repo: '{repo}'}}\n"
    )
    return path


def _script(seen: Path) -> Script:
    def script(req: object, i: int) -> Reply:
        if i == 0:
            return sh(f"( {WALK} ) > {seen} 2>&1; rev {seen}", "c0")
        return reply_message("done")

    return per_conversation(script)


def _assert_nothing_leaked(seen: Path, out: Path, bodies: list[bytes]) -> None:
    read = seen.read_text(errors="replace")
    assert "== self" in read, read  # the walk ran to the end
    for secret in SECRETS:
        for form in (secret, secret[::-1]):
            assert form not in read, f"the command read {form!r}"
            for body in bodies:
                assert form.encode() not in body, "a request carries a secret"
            for f in out.rglob("*"):
                if f.is_file():
                    assert form.encode() not in f.read_bytes(), f"{f} carries a secret"


def _run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def test_a_root_runners_full_access_command_reads_no_secret(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Root may read any process's environ: the runner itself must not show secrets."""
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    seen = tmp_path / "seen.txt"
    srv = loopback_thread(_script(seen))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "out"
    env = {
        **os.environ,
        "FAKE_API_KEY": KEY,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "DATABASE_URL": DATABASE_URL,
        "DB2_URL": DB2_URL,
        "MIRROR_URL": MIRROR_URL,
    }
    task_file = _task_file(tmp_path, srv.base_url, repo)
    proc = _run([sys.executable, "-m", "runner", "run", str(task_file), "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    _assert_nothing_leaked(seen, out, [r.raw for r in srv.requests])


def test_an_unprivileged_runners_full_access_command_reads_no_secret(
    loopback_thread: ThreadFactory, user: str
) -> None:
    python = shutil.which(
        f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/local/bin:/usr/bin:/bin"
    )
    if python is None:
        pytest.skip("no system python of this version for the unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="runner-fa-test-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        seen = base / "seen.txt"
        srv = loopback_thread(_script(seen))
        repo = make_git_repo(base / "repo")
        out = base / "out"
        task_file = _task_file(base, srv.base_url, repo)
        subprocess.run(["chown", "-R", f"{user}:{user}", str(base)], check=True)
        site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
        src = str(Path(runner.__file__).resolve().parent.parent)
        env = {
            "HOME": str(base),
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "PYTHONPATH": f"{src}:{site}",
            "TMPDIR": str(base),
            "FAKE_API_KEY": KEY,
            "GITHUB_TOKEN": GITHUB_TOKEN,
            "DATABASE_URL": DATABASE_URL,
            "DB2_URL": DB2_URL,
            "MIRROR_URL": MIRROR_URL,
        }
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", python]
        proc = _run([*argv, "-m", "runner", "run", str(task_file), "--out", str(out)], env)
        assert proc.returncode == 0, proc.stderr
        _assert_nothing_leaked(seen, out, [r.raw for r in srv.requests])
    finally:
        shutil.rmtree(base, ignore_errors=True)


PUSH_TOKEN = "ghp_pushwindow_canary_51b7d0e3"

SCAN = r"""
import os, stat, sys, time
import base64
token = bytes.fromhex(sys.argv[1])
basic = base64.b64encode(b"x-access-token:" + token)
found, saw_git, deadline = [], 0, time.time() + 40
def look(path, label):
    try:
        # Pipes are left alone: reading one steals bytes from a git of the runner and
        # fails that run, which says nothing about the token (none travels in a pipe).
        if stat.S_ISFIFO(os.stat(path).st_mode):
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        data = os.read(fd, 1 << 20)
    except OSError:
        data = b""
    finally:
        os.close(fd)
    if token in data or token[::-1] in data or basic in data:
        found.append(label)
while time.time() < deadline:
    gits = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"\0push\0" in cmd or b"remote-http" in cmd:
            gits += 1
        look(f"/proc/{pid}/cmdline", f"{pid} cmdline")
        look(f"/proc/{pid}/environ", f"{pid} environ")
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            look(f"/proc/{pid}/fd/{fd}", f"{pid} fd {fd}")
    saw_git += gits > 0
    if saw_git >= 20 and gits == 0:
        break
    time.sleep(0.02)
open(sys.argv[2], "w").write(f"scans-with-git={saw_git}\n" + "\n".join(found))
"""


def test_a_full_access_command_cannot_read_the_token_of_another_runs_push(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Review 2 of issue 25, item 1: at concurrency 2 under danger-full-access, run `a`
    pushes to a slow HTTP remote that demands the token while run `b`'s command reads
    every /proc/*/cmdline, environ and fd it can open. The token reaches the remote and
    nothing `b` can read holds it."""
    _push_window(loopback_thread, tmp_path, tmp_path, None)


def test_an_unprivileged_full_access_command_cannot_read_the_token_of_a_push(
    loopback_thread: ThreadFactory, tmp_path: Path, user: str
) -> None:
    """The same, with the runner (and so both runs' commands and git) as a fresh
    unprivileged user: what a same-uid process may open in /proc, as on a CI runner."""
    base = Path(tempfile.mkdtemp(prefix="runner-fa-push-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        _push_window(loopback_thread, tmp_path, base, user)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _push_window(
    loopback_thread: ThreadFactory, remote_dir: Path, base: Path, user: str | None
) -> None:
    from tests.support.git_http import git_http_remote
    from tests.support.loopback import last_user_text

    seen = base / "scan.txt"
    scanner = base / "scan.py"
    scanner.write_text(SCAN)
    python = sys.executable
    if user is not None:
        found = shutil.which(
            f"python{sys.version_info[0]}.{sys.version_info[1]}",
            path="/usr/local/bin:/usr/bin:/bin",
        )
        if found is None:
            pytest.skip("no system python of this version for the unprivileged user")
        python = found

    def script(req: object, i: int) -> Reply:
        text = last_user_text(req)  # type: ignore[arg-type]
        if "scan-b" in text and i == 0:
            cmd = f"{python} {scanner} {PUSH_TOKEN.encode().hex()} {seen}"
            return reply_function_call_long(cmd, "b0")
        if "push-a" in text and i == 0:
            return sh("echo changed > a.txt", "a0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(base / "repo")
    out = base / "out"
    with git_http_remote(remote_dir, PUSH_TOKEN, delay_s=1.0) as remote:
        (base / "tasks.yaml").write_text(
            "version: 1\n"
            "providers:\n"
            f"  fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}\n"
            "defaults:\n"
            "  model: fake/m\n"
            "  sandbox: danger-full-access\n"
            f"  git: {{push: {{remote: '{remote.url}', token_env: GITHUB_TOKEN}}}}\n"
            "tasks:\n"
            f"  - {{id: a, prompt: push-a, repo: '{repo}'}}\n"
            f"  - {{id: b, prompt: scan-b, repo: '{repo}'}}\n"
        )
        env = {**os.environ, "FAKE_API_KEY": KEY, "GITHUB_TOKEN": PUSH_TOKEN}
        argv = [python, "-m", "runner", "run", str(base / "tasks.yaml")]
        if user is not None:
            subprocess.run(["chown", "-R", f"{user}:{user}", str(base)], check=True)
            site = next(
                p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)
            )
            src = str(Path(runner.__file__).resolve().parent.parent)
            env = {
                "HOME": str(base),
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "PYTHONPATH": f"{src}:{site}",
                "TMPDIR": str(base),
                "FAKE_API_KEY": KEY,
                "GITHUB_TOKEN": PUSH_TOKEN,
            }
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", *argv]
        proc = _run([*argv, "--out", str(out), "--concurrency", "2"], env)
        assert proc.returncode == 0, proc.stderr
        assert "not isolated from each other" in proc.stderr  # said, since not enforced
        pushed = subprocess.run(
            ["git", "-C", str(remote.bare), "for-each-ref", "--format=%(refname)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert "refs/heads/" in pushed, "the push did not authenticate"
    read = seen.read_text()
    scans = int(read.splitlines()[0].split("=")[1])
    assert scans >= 20, f"the scan never overlapped the push: {read}"
    assert read.splitlines()[1:] == [], f"the token was readable: {read}"


def reply_function_call_long(cmd: str, call_id: str) -> Reply:
    from tests.support.loopback import reply_function_call

    return reply_function_call(
        "shell", {"command": ["bash", "-c", cmd], "timeout_ms": 60000}, call_id=call_id
    )


def _mcp_task_file(dir_: Path, repo: Path, *, own: bool) -> Path:
    """Run `srv` has an MCP server given GITHUB_TOKEN; run `fa` is full-access. With
    `own`, the server belongs to the full-access run itself."""
    server = "{calc: {command: [python3, server.py], env_vars: [HOME, GITHUB_TOKEN]}}"
    where = "fa" if own else "srv"
    lines = [
        "version: 1",
        "providers:",
        "  fake: {base_url: 'http://127.0.0.1:9/v1', env_key: FAKE_API_KEY}",
        "defaults: {model: fake/m}",
        "tasks:",
    ]
    for run in ("srv", "fa"):
        mode = "danger-full-access" if run == "fa" else "workspace-write"
        lines.append(f"  - id: {run}")
        lines.append(f"    prompt: p\n    repo: '{repo}'\n    sandbox: {mode}")
        if run == where:
            lines.append(f"    mcp_servers: {server}")
    path = dir_ / "tasks.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """A refusal before anything runs: the command in-process is enough."""
    return run_cli(*args, env={"FAKE_API_KEY": KEY, "GITHUB_TOKEN": GITHUB_TOKEN})


def test_a_secret_mcp_env_var_beside_a_full_access_run_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    """Review 2 of issue 25, item 2: a stdio MCP server holds its `env_vars` in its
    /proc/<pid>/environ, which a full-access command of another run (same user) reads. At
    --concurrency 2 the batch is refused (exit 2) at the env_vars entry; at 1 the runs
    never overlap, so `validate` accepts it."""
    repo = make_git_repo(tmp_path / "repo")
    task_file = _mcp_task_file(tmp_path, repo, own=False)
    out = tmp_path / "out"
    proc = _cli("run", task_file, "--out", out, "--concurrency", "2")
    assert proc.returncode == 2, proc.stderr
    line = next(
        i for i, text in enumerate(task_file.read_text().splitlines(), 1) if "mcp_servers" in text
    )
    assert f"{task_file}:{line}: tasks[0].mcp_servers.calc.env_vars[1]:" in proc.stderr
    assert "GITHUB_TOKEN is a secret" in proc.stderr and "--concurrency 1" in proc.stderr
    assert "Traceback" not in proc.stderr and GITHUB_TOKEN not in proc.stderr
    assert not (out / "threads").exists(), "a run started"
    assert _cli("validate", task_file).returncode == 0


def test_a_secret_mcp_env_var_of_a_full_access_run_itself_is_refused(tmp_path: Path) -> None:
    """The run's own commands read its server's environ too, whatever the concurrency."""
    repo = make_git_repo(tmp_path / "repo")
    task_file = _mcp_task_file(tmp_path, repo, own=True)
    for args in (("validate",), ("run", "--concurrency", "1", "--out", tmp_path / "out")):
        proc = _cli(*args[:1], task_file, *args[1:])
        assert proc.returncode == 2, proc.stderr
        assert "tasks[1].mcp_servers.calc.env_vars[1]:" in proc.stderr
        assert "this run's own commands" in proc.stderr
        assert "Traceback" not in proc.stderr
