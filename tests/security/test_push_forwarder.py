"""The push forwarder carries the token to one repository's smart-HTTP endpoints only.

Attack review of issue 25, finding 1: a full-access command of another run read the
forwarder's address (`http://127.0.0.1:P/<32 hex>`) from git's /proc/<pid>/cmdline and
asked it for `ADDR/../other-private.git/info/refs` and `ADDR/../../api/v3/user`; the
forwarder appended the target to the remote's URL, httpx resolved the `..`, and the token
authenticated requests to another repository and to the host's API. Here run `a` pushes
to a slow remote that logs every path with its Authorization header, while run `b`'s
command finds the address and sends every spelling of another path we know, plus the
legitimate one (which only git itself may use)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import runner
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.git_http import git_http_remote
from tests.support.loopback import Reply, last_user_text, per_conversation, reply_function_call
from tests.support.loopback import reply_message as done
from tests.support.security import KEY, sh

TOKEN = "ghp_forwarder_canary_9d3e61f0"

PROBES = {
    "parent-repo": ("GET", "/../other-private.git/info/refs?service=git-upload-pack"),
    "api": ("GET", "/../../api/v3/user"),
    "encoded-dots": ("GET", "/%2e%2e/other-private.git/info/refs?service=git-upload-pack"),
    "encoded-slash": ("GET", "/..%2fother-private.git/info/refs?service=git-upload-pack"),
    "double-slash": ("GET", "//info/refs?service=git-upload-pack"),
    "backslash": ("GET", "/..\\..\\api/v3/user"),
    "extra-param": ("GET", "/info/refs?service=git-upload-pack&x=1"),
    "other-service": ("GET", "/info/refs?service=git-upload-archive"),
    "dumb-http": ("GET", "/HEAD"),
    "put": ("PUT", "/git-receive-pack"),
    "get-pack": ("GET", "/git-receive-pack"),
    "legit": ("GET", "/info/refs?service=git-receive-pack"),
}
"""Each probe: the method and what follows the forwarder's random path."""

PROBE = r"""
import json, re, socket, sys, threading, time
probes = json.loads(sys.argv[1])
found, deadline = None, time.time() + 40
while found is None and time.time() < deadline:
    for pid in filter(str.isdigit, __import__("os").listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        m = re.search(rb"http://127\.0\.0\.1:(\d+)(/[0-9a-f]{32})", cmd)
        if m:
            found = (int(m[1]), m[2].decode())
            break
    time.sleep(0.01)
got = {}
def probe(name, method, rest):
    s = socket.create_connection(("127.0.0.1", found[0]), timeout=15)
    req = f"{method} {found[1]}{rest} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    s.sendall(req.encode())
    got[name] = s.recv(100).split(b"\r\n")[0].decode()
    s.close()
if found:
    threads = [threading.Thread(target=probe, args=(n, *p)) for n, p in probes.items()]
    [t.start() for t in threads]
    [t.join() for t in threads]
open(sys.argv[2], "w").write(json.dumps({"found": bool(found), "got": got}))
"""


def _system_python() -> str:
    found = shutil.which(
        f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/local/bin:/usr/bin:/bin"
    )
    if found is None:
        pytest.skip("no system python of this version for the unprivileged user")
    return found


def _attack(loopback_thread: ThreadFactory, remote_dir: Path, base: Path, who: str | None) -> None:
    python = sys.executable if who is None else _system_python()
    seen = base / "probes.json"
    (base / "probe.py").write_text(PROBE)
    argv = f"{python} {base / 'probe.py'} '{json.dumps(PROBES)}' {seen}"

    def script(req: object, i: int) -> Reply:
        text = last_user_text(req)  # type: ignore[arg-type]
        if "probe-b" in text and i == 0:
            return reply_function_call(
                "shell", {"command": ["bash", "-c", argv], "timeout_ms": 60000}, call_id="b0"
            )
        if "push-a" in text and i == 0:
            return sh("echo changed > a.txt", "a0")
        return done("done")

    srv = loopback_thread(per_conversation(script))
    repo = make_git_repo(base / "repo")
    with git_http_remote(remote_dir, TOKEN, delay_s=1.0) as remote:
        (base / "tasks.yaml").write_text(
            "version: 1\n"
            f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
            "defaults:\n"
            "  model: fake/m\n"
            "  sandbox: danger-full-access\n"
            f"  git: {{push: {{remote: '{remote.url}', token_env: GITHUB_TOKEN}}}}\n"
            "tasks:\n"
            f"  - {{id: a, prompt: push-a, repo: '{repo}'}}\n"
            f"  - {{id: b, prompt: probe-b, repo: '{repo}'}}\n"
        )
        env = {**os.environ, "FAKE_API_KEY": KEY, "GITHUB_TOKEN": TOKEN}
        cmd = [python, "-m", "runner", "run", str(base / "tasks.yaml")]
        if who is not None:
            subprocess.run(["chown", "-R", f"{who}:{who}", str(base)], check=True)
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
                "GITHUB_TOKEN": TOKEN,
            }
            cmd = ["setpriv", f"--reuid={who}", f"--regid={who}", "--init-groups", *cmd]
        proc = subprocess.run(
            [*cmd, "--out", str(base / "out"), "--concurrency", "2"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        pushed = subprocess.run(
            ["git", "-C", str(remote.bare), "for-each-ref", "--format=%(refname)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert "refs/heads/" in pushed, "the legitimate push did not go through"
    result = json.loads(seen.read_text())
    assert result["found"], "the probe never saw the forwarder's address"
    assert set(result["got"]) == set(PROBES), result  # every probe was answered
    basic = "Basic " + base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    allowed = {
        ("/remote.git/info/refs?service=git-receive-pack", "GET"),
        ("/remote.git/info/refs?service=git-upload-pack", "GET"),
        ("/remote.git/git-receive-pack", "POST"),
        ("/remote.git/git-upload-pack", "POST"),
    }
    with_token = [(m, p) for m, p, auth in remote.seen if auth == basic]
    assert with_token, "the push never sent the token"
    for method, path in with_token:
        assert (path, method) in allowed, f"the token went to {method} {path}"
    for name, status in result["got"].items():
        want = "403" if name == "legit" else "404"
        assert want in status, f"probe {name} ({PROBES[name]}) got {status!r}"


def test_the_forwarder_sends_the_token_to_the_one_repository_only(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    _attack(loopback_thread, tmp_path, tmp_path, None)


def test_the_forwarder_sends_the_token_to_the_one_repository_only_unprivileged(
    loopback_thread: ThreadFactory,
    tmp_path: Path,
    user: str,  # noqa: F811
) -> None:
    base = Path(tempfile.mkdtemp(prefix="runner-fwd-test-", dir="/var/tmp"))
    try:
        base.chmod(0o755)
        _attack(loopback_thread, tmp_path, base, user)
    finally:
        shutil.rmtree(base, ignore_errors=True)
