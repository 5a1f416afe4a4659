"""Escape attempts against the real bubblewrap sandbox. Each probe is also run without the
sandbox (danger-full-access) where it is safe, to show the probe itself works."""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.errors import SandboxError
from runner.sandbox.bwrap import SANDBOX_UID, Limits, probe, probe_ahead
from tests.support.sandbox import Box, HostService, Runner, out


def _probes(port: int) -> str:
    """One line per probe: `<name> ok` when it reached the host's service."""
    py = (
        "import socket,sys\n"
        f"try: socket.create_connection(('127.0.0.1', {port}), 2).recv(10); print('py ok')\n"
        "except OSError as e: print('py failed', e)"
    )
    lines = [
        f'python3 -c "{py}"',
        f"(exec 3<>/dev/tcp/127.0.0.1/{port} && head -c4 <&3 >/dev/null) 2>/dev/null"
        " && echo 'devtcp ok' || echo 'devtcp failed'",
    ]
    if shutil.which("curl"):
        lines.append(
            f"curl -sS -m 2 -o /dev/null http://127.0.0.1:{port}/ && echo 'curl ok'"
            " || echo 'curl failed'"
        )
    if shutil.which("wget"):
        lines.append(
            f"wget -q -T 2 -t 1 -O /dev/null http://127.0.0.1:{port}/ && "
            "echo 'wget ok' || echo 'wget failed'"
        )
    return "\n".join(lines)


def test_no_network_inside(box: Box, run: Runner, host_service: HostService) -> None:
    unsandboxed = out(run(box.policy("danger-full-access"), _probes(host_service.port)))
    reached = host_service.accepted
    assert reached >= 2 and "failed" not in unsandboxed, unsandboxed

    for mode in ("read-only", "workspace-write"):
        res = run(
            box.policy(mode),
            _probes(host_service.port) + "\n"
            "getent ahosts example.com >/dev/null && echo 'dns ok' || "
            "echo 'dns failed'\n"
            "python3 -c \"import socket; socket.getaddrinfo('example.com', 443)\" "
            "2>/dev/null && echo 'pydns ok' || echo 'pydns failed'\n"
            "cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' '",
        )
        text = out(res)
        assert " ok" not in text, text
        assert text.count("failed") >= 4, text
        assert text.strip().splitlines()[-1] == "lo", text  # the only interface
    assert host_service.accepted == reached


def test_writes_only_where_allowed(box: Box, run: Runner) -> None:
    marker = f"host-tmp-{uuid.uuid4().hex}"
    script = (
        f"echo w > new.txt && echo 'ws ok'\n"
        f"echo w > src/a.txt && echo 'existing ok'\n"
        f"echo w > {box.outside}/x && echo 'outside ok'\n"
        f"echo w > .git/HEAD && echo 'git ok'\n"
        f"mkdir -p .git/hooks && echo w > .git/hooks/pre-commit && echo 'hooks ok'\n"
        f"echo w > {box.ws.repo}/planted && echo 'repo ok'\n"
        f"echo w > /tmp/{marker} && echo 'tmp ok'\n"
        f"echo w > $HOME/cache && echo 'home ok'\n"
        f"echo w > /etc/runner-test && echo 'etc ok'\n"
    )
    text = out(run(box.policy("workspace-write"), script))
    # (In these tests the user's repository lies under /tmp, which is private inside.)
    oks = set(re.findall(r"(\w+) ok", text)) - {"repo"}
    assert oks == {"ws", "existing", "tmp", "home"}, text
    assert (box.path / "new.txt").read_text() == "w\n"
    assert not list(box.outside.iterdir())
    assert not (box.ws.repo / "planted").exists() and not Path("/tmp", marker).exists()
    assert (box.path / ".git" / "HEAD").read_text() == f"{box.ws.base}\n"

    text = out(run(box.policy("read-only"), script.replace("new.txt", "new2.txt")))
    assert set(re.findall(r"(\w+) ok", text)) - {"repo"} == {"tmp", "home"}, text
    assert not (box.path / "new2.txt").exists()
    assert (box.path / "src" / "a.txt").read_text() == "w\n"  # from the first run only

    # The same writes succeed without the sandbox: the refusals above are the sandbox's.
    text = out(
        run(box.policy("danger-full-access"), f"echo w > {box.outside}/x && echo 'outside ok'")
    )
    assert "outside ok" in text and (box.outside / "x").exists()


def test_symlink_escapes_fail(box: Box, run: Runner) -> None:
    (box.outside / "target").mkdir()
    (box.outside / "target").chmod(0o777)
    private = box.path.parent / f".{box.path.name}.runner"
    assert (private / "index").exists()  # the runner's private git dir exists on the host
    script = (
        f"ln -s {box.outside}/target out && echo w > out/f && echo 'link ok'\n"
        f"ln -s {private} priv && cat priv/index >/dev/null && echo 'private ok'\n"
        f"ls {box.path.parent}\n"
        "ln -s / root && echo w > root/var/tmp/runner-escape && echo 'root ok'\n"
        f"ln -s {os.path.relpath(box.outside / 'target', box.path)} rel && "
        "touch rel/escape && echo 'relative ok'\n"
    )
    text = out(run(box.policy("workspace-write"), script))
    assert " ok" not in text, text
    assert not list((box.outside / "target").iterdir())
    assert not Path("/var/tmp/runner-escape").exists()
    # Only this run's workspace is visible in the runs' directory.
    assert re.search(rf"^{box.path.name}$", text, re.M), text
    assert ".runner" not in text


def test_git_reads_work_writes_do_not(box: Box, run: Runner) -> None:
    (box.path / "README.md").write_text("# changed\n")
    script = (
        "git status --porcelain && git diff --stat && git log --format=%H -1 && "
        "git show HEAD:src/a.txt && echo 'reads ok'\n"
        "git -c user.name=a -c user.email=a@a commit -qam x && echo 'commit ok'\n"
        f"ls {box.ws.repo}/.git | wc -l\n"
    )
    for mode in ("workspace-write", "read-only"):
        text = out(run(box.policy(mode), script))
        assert "reads ok" in text and "commit ok" not in text, text
        assert " M README.md" in text and box.ws.base in text
        assert text.strip().splitlines()[-1] == "0", text  # the user's git dir is hidden


def test_no_secret_inside(box: Box, run: Runner) -> None:
    secret = f"sk-canary-{uuid.uuid4().hex}"
    plain = f"plain-canary-{uuid.uuid4().hex}"
    env = {
        **os.environ,
        "OPENAI_API_KEY": secret,
        "RUNNER_TEST_TOKEN": secret,
        "DATABASE_URL": plain,
    }
    script = (
        "env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n';"
        " ls /proc | grep -c '^[0-9]'"
    )
    for mode in ("read-only", "workspace-write"):
        res = run(box.policy(mode), script, env=env)
        text = out(res)
        assert res.truncated_bytes == 0 and secret not in text and plain not in text
        assert "HOME=/tmp/home" in text and "TERM=dumb" in text and "PATH=" in text
        assert "bwrap" in text  # the command lines were readable
    # Without the sandbox only names that look secret are dropped: the probe finds the rest.
    text = out(run(box.policy("danger-full-access"), "env", env=env))
    assert secret not in text and plain in text


def test_identity(box: Box, run: Runner) -> None:
    script = (
        "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' "
        "/proc/self/status"
    )
    status = dict(
        line.split(":", 1) for line in out(run(box.policy("workspace-write"), script)).splitlines()
    )
    uid = SANDBOX_UID if os.geteuid() == 0 else os.getuid()
    assert status["Uid"].split() == [str(uid)] * 4
    assert status["CapEff"].strip() == status["CapPrm"].strip() == "0" * 16
    assert status["CapAmb"].strip() == "0" * 16
    assert status["NoNewPrivs"].strip() == "1"
    if os.geteuid() == 0:  # root's command is nobody, with no groups and no bounding set
        assert status["Gid"].split() == [str(SANDBOX_UID)] * 4
        assert status["Groups"].strip() == ""
        assert status["CapBnd"].strip() == "0" * 16
        text = out(run(box.policy("workspace-write"), "cat /root/.profile /etc/shadow"))
        # root's home is not even there (hidden), and shadow is not readable
        assert "/root/.profile: No such file" in text and "shadow: Permission denied" in text, text


def _until_gone(marker: str) -> None:
    deadline = time.monotonic() + 5
    while _survivors(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _survivors(marker) == []


def _survivors(marker: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd:
            found.append(cmd.decode(errors="replace"))
    return found


def test_nothing_survives_a_timeout(box: Box, run: Runner) -> None:
    marker = f"runner-marker-{uuid.uuid4().hex[:12]}"
    spawn = (
        f"setsid bash -c 'exec -a {marker}-a sleep 300' &\n"
        f"(setsid bash -c '(exec -a {marker}-b sleep 300 &)' &)\n"
        f"nohup bash -c 'trap \"\" TERM HUP; exec -a {marker}-c sleep 300' "
        ">/dev/null 2>&1 &\n"
        "sleep 0.5; echo started\n"
    )
    res = run(box.policy("workspace-write"), spawn + "sleep 300", timeout_s=2)
    assert res.timed_out and res.exit_code == 124
    assert "started" in out(res)
    _until_gone(marker)

    # A command that returns leaves nothing behind either.
    res = run(box.policy("workspace-write"), spawn + "echo back", timeout_s=20)
    assert res.exit_code == 0 and not res.timed_out
    _until_gone(marker)


@pytest.mark.slow
def test_fork_bomb_is_stopped(box: Box, run: Runner) -> None:
    marker = f"bomb-{uuid.uuid4().hex[:12]}"  # in every forked shell's command line
    # A watcher forks its `sleep` before the bomb, then counts with builtins only.
    script = (
        f": {marker}\n"
        "(sleep 2; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; "
        'echo "procs=$n" > count.txt) &\n'
        "bomb() { bomb | bomb & }; bomb; sleep 30"
    )
    start = time.monotonic()
    res = run(box.policy("workspace-write"), script, timeout_s=5)
    assert time.monotonic() - start < 10
    assert "Resource temporarily unavailable" in out(res)
    procs = int((box.path / "count.txt").read_text().strip().removeprefix("procs="))
    limit = Limits().processes
    assert limit // 2 < procs <= limit + 2, procs  # it hit the limit and stayed under it
    _until_gone(marker)


def test_huge_writes_are_stopped(box: Box, run: Runner) -> None:
    limits = Limits(file_bytes=32 << 20)  # the default is 1 GiB: same mechanism, less disk
    script = (
        'head -c 10G /dev/zero > big; echo "ws=$?"\n'
        'head -c 10G /dev/zero > /tmp/big; echo "tmp=$?"\n'
    )
    start = time.monotonic()
    res = run(box.policy("workspace-write"), script, limits=limits, timeout_s=60)
    assert time.monotonic() - start < 30
    text = out(res)
    assert "ws=153" in text and "tmp=153" in text, text  # 128 + SIGXFSZ
    assert (box.path / "big").stat().st_size == limits.file_bytes


def test_two_threads_asking_at_once_start_one_probe(tmp_path: Path) -> None:
    """`probe_ahead` runs in a worker thread beside the first run's workspace; a run that
    asks meanwhile waits for that answer instead of starting a second bwrap process."""
    real = shutil.which("bwrap")
    assert real is not None
    folder = tmp_path / "bin"
    folder.mkdir()
    calls = tmp_path / "calls"
    # Slow enough that the second caller asks while the first probe is still running.
    (folder / "bwrap").write_text(f'#!/bin/sh\necho x >> {calls}\nsleep 0.3\nexec {real} "$@"\n')
    (folder / "bwrap").chmod(0o755)
    search = f"{folder}:{os.environ['PATH']}"
    found: list[object] = []

    def ask() -> None:
        found.append(probe(search))

    with ThreadPoolExecutor(4) as pool:
        for _ in range(4):
            pool.submit(ask)
    assert len(found) == 4 and len(set(map(id, found))) == 1
    assert calls.read_text() == "x\n"


def test_probe_ahead_keeps_a_failure_for_the_run_to_report(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text("#!/bin/sh\necho 'no user namespaces' >&2\nexit 1\n")
    (folder / "bwrap").chmod(0o755)
    search = f"{folder}:{os.environ['PATH']}"
    saved = os.environ["PATH"]
    os.environ["PATH"] = search
    try:
        probe_ahead()  # says nothing
    finally:
        os.environ["PATH"] = saved
    with pytest.raises(SandboxError, match="no user namespaces"):
        probe(search)


def test_a_bwrap_that_never_answers_is_said_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runner.sandbox import bwrap

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "bwrap").write_text("#!/bin/sh\nexec sleep 30\n")
    (folder / "bwrap").chmod(0o755)
    monkeypatch.setattr(bwrap, "PROBE_TIMEOUT_S", 0.5)
    with pytest.raises(SandboxError) as got:
        probe(f"{folder}:{os.environ['PATH']}")
    assert "did not finish a sandboxed `true` in 0.5 s" in str(got.value)
    assert "did not finish" in str(got.value) and "install" not in str(got.value)
