"""The full-access supervisor (runner/sandbox/reaper.py), run as the runner runs it: a file
under `python -I -S`, in its own process. It passes the command's status on as a shell
would, and leaves none of what the command started behind, on return or when asked to
stop. (The same through LocalExecutor, against a real run's daemons, is in
tests/security/test_full_access_daemons.py.)"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from runner.sandbox import reaper
from tests.support.procs import alive, ends_soon

REAPER = [sys.executable, "-I", "-S", reaper.__file__]
DAEMON = "setsid -f sh -c 'echo $$ > {f}; exec sleep 300'; while [ ! -s {f} ]; do :; done"


def supervise(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*REAPER, *argv], capture_output=True, text=True, timeout=30)


def test_the_commands_status_is_passed_on_as_a_shell_says_it() -> None:
    """(An exit code: the daemon test below.) SIGPIPE is the default again in the command,
    or `yes` would never end."""
    done = supervise("sh", "-c", "yes | head -c 3; kill -9 $$")
    assert (done.returncode, done.stdout) == (128 + 9, "y\ny")


def test_a_command_not_found_is_127_and_one_not_runnable_is_126(tmp_path: Path) -> None:
    gone = supervise(str(tmp_path / "absent"))
    assert gone.returncode == 127
    assert f"failed to start '{tmp_path / 'absent'}'" in gone.stderr
    plain = tmp_path / "plain"
    plain.write_text("echo hi\n")
    assert supervise(str(plain)).returncode == 126


def test_without_a_command_it_says_how_it_is_used() -> None:
    done = supervise("--parent-death", "1")
    assert done.returncode == 2 and done.stderr.startswith("usage: reaper.py")


def test_a_daemon_the_command_left_is_ended_before_the_status_is_given(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon"
    done = supervise("sh", "-c", DAEMON.format(f=pid_file) + "; exit 3")
    assert done.returncode == 3
    assert not alive(int(pid_file.read_text())), "the daemon outlived its supervisor"


def test_asked_to_stop_it_ends_the_command_and_its_daemons(tmp_path: Path) -> None:
    pid_file = tmp_path / "daemon"
    proc = subprocess.Popen([*REAPER, "sh", "-c", DAEMON.format(f=pid_file) + "; sleep 300"])
    try:
        deadline = time.monotonic() + 20
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.005)
        daemon = int(pid_file.read_text())
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
        assert ends_soon(daemon, within_s=0.5)
    finally:
        proc.kill()
        proc.wait()


def test_a_parent_that_is_not_its_parent_stops_it_at_once() -> None:
    """`--parent-death PID` when PID already died (is not the parent): nothing starts."""
    done = supervise("--parent-death", "1", "sh", "-c", "echo ran")
    assert (done.returncode, done.stdout) == (128 + signal.SIGTERM, "")
