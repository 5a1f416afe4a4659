"""Attacker review of issue 25, finding 3: another batch of the same user is hidden
whatever its TMPDIR, alive, finished or killed. Batch A (TMPDIR tmpA) runs while batch B
(TMPDIR tmpB) looks for A's live transcript in A's out dir and A's repository `.env`;
after A ends, a later batch looks for A's out dir; after batch K is killed with
SIGKILL, a later batch looks for K's workspace. Each as root and as an unprivileged user
(`setpriv`), with everything under /var/tmp, a folder the host shows."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.isolation import PATH, Who, run_outputs, scripted
from tests.support.loopback import reply_message
from tests.support.security import hold, let_go, sh, tasks

CANARY = "batch-a-transcript-canary-31c7"
ENV = "A_DB_PASSWORD=batch-a-env-canary-90b2"
KILLED = "batch-k-workspace-canary-e4d1"


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    for _ in range(600):
        if path.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert path.exists(), proc.communicate(timeout=60)


def test_other_batches_are_hidden_alive_finished_and_killed(
    loopback_thread: ThreadFactory, who: Who
) -> None:
    place = Path(tempfile.mkdtemp(prefix="runner-iso-", dir="/var/tmp"))
    place.chmod(0o755)
    try:
        for sub in ("a", "b", "k", "tmpA", "tmpB", "tmpK"):
            (place / sub).mkdir()
            (place / sub).chmod(0o755)
        repo_a = make_git_repo(place / "a" / "repo", {"README.md": "a\n"})
        (repo_a / ".env").write_text(ENV + "\n")
        repo_b = make_git_repo(place / "b" / "repo", {"README.md": "b\n"})
        a_out, k_work = place / "a" / "out", place / "tmpK" / "runner-work"
        look = (
            f"cat {a_out}/threads/*.jsonl {a_out}/report.json {repo_a}/.env; "
            f"cat {k_work}/*/k1/secret.txt; echo listed: $(ls -a {a_out} {repo_a} {k_work}); "
            "echo probe-done"
        )
        steps = {
            # A's command lasts until B has looked (the test drops `go` into A's
            # workspace then), not a fixed 10 s that B had to finish within.
            "a1": [sh(f"echo {CANARY}; {hold()}", "a"), reply_message("done")],
            "k1": [sh(f"echo {KILLED} > secret.txt; sleep 60", "k"), reply_message("done")],
            "b1": [sh(look, "b"), reply_message("done")],
        }
        srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
        task_a = tasks(place / "a", srv.base_url, repo_a, ["a1"])
        task_k = tasks(place / "k", srv.base_url, repo_a, ["k1"])
        task_b = tasks(place / "b", srv.base_url, repo_b, ["b1"])
        who.own(place)

        def start(task: Path, tmp: str, out: Path) -> subprocess.Popen[str]:
            env = {**who.env, "PATH": PATH, "TMPDIR": str(place / tmp)}
            return subprocess.Popen(
                who.argv("run", task, "--out", out),
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd="/",
                start_new_session=True,
            )

        def look_from_b(n: int) -> str:
            out = place / "b" / f"out{n}"
            res = who.cli("run", task_b, "--out", out, env={"TMPDIR": str(place / "tmpB")})
            assert res.returncode == 0, res.stderr
            seen = run_outputs(out, "b1")
            assert "probe-done" in seen, seen
            return seen

        k = start(task_k, "tmpK", place / "k" / "out")
        try:
            _wait_for(k_work / "0" / "k1" / "secret.txt", k)
        finally:
            os.killpg(k.pid, signal.SIGKILL)  # the runner and its sandbox: kill -9
            k.communicate(timeout=60)
        assert (k_work / "0" / "k1" / "secret.txt").exists()
        a = start(task_a, "tmpA", a_out)
        try:
            _wait_for(a_out / "threads" / "a1.jsonl", a)
            for _ in range(200):  # A's command has printed: its transcript holds it
                if CANARY in (a_out / "threads" / "a1.jsonl").read_text():
                    break
                time.sleep(0.05)
            alive = look_from_b(1)
            assert a.poll() is None, "batch A ended before B looked"
        finally:
            held = let_go(place / "tmpA" / "runner-work" / "*" / "a1")
            a_err = a.communicate(timeout=180)[1]
        assert a.returncode == 0, a_err
        assert held, "no workspace of A's to let its command end"
        finished = look_from_b(2)
        for seen in (alive, finished):
            assert CANARY not in seen and ENV not in seen and KILLED not in seen, seen
            listed = seen.split("listed:")[-1]
            for name in ("report.json", "threads", "README.md", ".env", "0.lock"):
                assert name not in listed, (name, seen)
    finally:
        shutil.rmtree(place, ignore_errors=True)
