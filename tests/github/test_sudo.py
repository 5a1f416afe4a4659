"""Taking sudo (and a container daemon's socket) away from the job's user before an
unsandboxed run: the drop script on copies of a hosted runner's files, and `drop_sudo` as
that user, with a stand-in `sudo`. Each needs root to become another user."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from runner.errors import RunnerError
from runner.github.sudo import drop_sudo
from tests.support.gha import ROOT

FAKE_SUDO = """#!/bin/sh
# Stands in for sudo: logs its arguments; `-n true` works until the drop script ran.
printf '%s\n' "$*" | tr '\n' ' ' >> "$FAKE_SUDO_DIR/log"; echo >> "$FAKE_SUDO_DIR/log"
case "$1 $2" in
  "-n true") [ ! -e "$FAKE_SUDO_DIR/dropped" ];;
  "-n sh") [ "$FAKE_SUDO_WORKS" = 1 ] && : > "$FAKE_SUDO_DIR/dropped"; echo "sudo: dropped lines";;
  *) exit 0;;
esac
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("gpasswd"), reason="gpasswd -Q needs root"
)
def test_the_drop_script_leaves_the_user_no_rule_that_allows_anything(tmp_path: Path) -> None:
    """The script the action runs through sudo, on a copy of a hosted runner's sudoers
    (a NOPASSWD file for the user, a NOPASSWD `%sudo` rule, the user in `sudo`): the
    user's own lines go, it leaves the group, and since the job's processes keep their
    groups anyway, a `!ALL` rule comes last, after the `@includedir`."""
    from runner.github.sudo import DROP_SUDO_SCRIPT

    etc = tmp_path / "etc"
    (etc / "sudoers.d").mkdir(parents=True)
    main_file = (
        "Defaults env_reset\n%sudo ALL=(ALL:ALL) NOPASSWD: ALL\n@includedir /etc/sudoers.d\n"
    )
    (etc / "sudoers").write_text(main_file)
    (etc / "sudoers.d/runner").write_text("nobody ALL=(ALL) NOPASSWD:ALL\n")
    (etc / "sudoers.d/other").write_text("daemon ALL=(ALL) NOPASSWD:ALL\n")
    (etc / "group").write_text("root:x:0:\nsudo:x:27:nobody,daemon\nadm:x:4:nobody\n")
    (etc / "gshadow").write_text("root:*::\nsudo:*::nobody,daemon\nadm:*::nobody\n")
    (etc / "passwd").write_text("root:x:0:0::/:/bin/sh\nnobody:x:65534:65534::/:/bin/sh\n")
    done = subprocess.run(
        ["sh", "-c", DROP_SUDO_SCRIPT, "drop-sudo", "nobody", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (etc / "sudoers.d/runner").read_text() == ""
    assert (etc / "sudoers.d/other").read_text() == "daemon ALL=(ALL) NOPASSWD:ALL\n"
    assert "sudo:x:27:daemon\n" in (etc / "group").read_text()
    assert "adm:x:4:nobody" in (etc / "group").read_text()  # not a sudo group: kept
    sudoers = (etc / "sudoers").read_text()
    assert sudoers.startswith(main_file)
    assert sudoers.splitlines()[-1] == "nobody ALL=(ALL:ALL) !ALL"
    assert "removed nobody's lines from /etc/sudoers.d/runner" in done.stdout
    assert "removed nobody from the sudo group" in done.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
@pytest.mark.parametrize("works", [True, False])
def test_sudo_is_dropped_before_an_unsandboxed_run(works: bool) -> None:
    """As a normal user with passwordless sudo (a stand-in `sudo` on PATH): the drop
    script is run through sudo for that user, and if sudo still works afterwards the
    run is refused (exit 2) rather than started with root at hand."""
    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o777)
        sudo = folder / "sudo"
        sudo.write_text(FAKE_SUDO)
        sudo.chmod(sudo.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | 0o444)
        code = (
            "import os, sys; from runner.errors import RunnerError; "
            "from runner.github.sudo import drop_sudo\n"
            "try:\n    drop_sudo(os.environ)\n"
            "except RunnerError as exc:\n    print('refused:', exc); sys.exit(2)\n"
        )
        proc = subprocess.run(
            [
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=+dac_read_search",
                "--ambient-caps=+dac_read_search",
                sys.executable,
                "-I",
                "-c",
                code,
            ],
            env={
                "PATH": f"{folder}:/usr/bin:/bin",
                "FAKE_SUDO_DIR": str(folder),
                "FAKE_SUDO_WORKS": "1" if works else "0",
            },
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        log = [line.rstrip() for line in (folder / "log").read_text().splitlines()]
        assert log[0] == "-n true" and log[1].startswith("-n sh -c ")
        assert log[1].endswith(" drop-sudo nobody")
        if works:
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "sudo: dropped for nobody" in proc.stdout
        else:
            assert proc.returncode == 2
            assert "refused: could not take sudo away from nobody" in proc.stdout
            assert "keep-sudo: true" in proc.stdout
    finally:
        for p in folder.iterdir():
            p.unlink()


AS_DOCKER_MEMBER = [
    shutil.which("setpriv") or "setpriv",
    "--reuid=65534",
    "--regid=65534",
    "--groups=4242",
]
"""A process of the job's user as hosted runners start it: in the `docker` group (4242
here), which it keeps for its whole life whatever /etc/group says later."""

CONNECT = (
    "import socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "try:\n    s.connect(sys.argv[1]); print('connected')\n"
    "except OSError as exc:\n    print('refused', exc.strerror)\n"
)


def listening_socket(path: Path) -> Any:
    import socket

    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen(4)
    return sock


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
def test_the_drop_closes_the_docker_socket_to_a_process_that_keeps_the_group() -> None:
    """Measured on a real socket: a process in the socket's group connects; after the
    drop script (its `root` argument pointing at a copy of /run and /var/run) the same
    kind of process, still in the group, is refused, and root still connects."""
    from runner.github.sudo import DROP_SUDO_SCRIPT

    top = Path(tempfile.mkdtemp(prefix="dk"))
    try:
        top.chmod(0o755)
        (top / "run").mkdir()
        (top / "var").mkdir()
        (top / "var/run").symlink_to("../run")
        (top / "etc/sudoers.d").mkdir(parents=True)
        (top / "etc/sudoers").write_text("")
        (top / "etc/group").write_text("docker:x:4242:nobody\n")
        path = top / "run/docker.sock"
        server = listening_socket(path)
        try:
            os.chown(path, 0, 4242)
            path.chmod(0o660)

            def connect(*prefix: str) -> str:
                argv = [*prefix, sys.executable, "-I", "-c", CONNECT, str(path)]
                return subprocess.run(argv, capture_output=True, text=True).stdout.strip()

            assert connect(*AS_DOCKER_MEMBER) == "connected"
            done = subprocess.run(
                ["sh", "-c", DROP_SUDO_SCRIPT, "drop-sudo", "nobody", str(top)],
                capture_output=True,
                text=True,
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.count("is root's only for the rest of the job") == 1
            assert "/run/docker.sock is root's only" in done.stdout
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            assert connect(*AS_DOCKER_MEMBER) == "refused Permission denied"
            assert connect() == "connected"  # the daemon's own user (root) keeps it
        finally:
            server.close()
    finally:
        shutil.rmtree(top)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root")
@pytest.mark.parametrize(
    ("sudo", "mode", "refused"),
    [(True, 0o660, True), (False, 0o660, True), (True, 0o600, False), (False, 0o600, False)],
)
def test_an_open_container_socket_refuses_the_unsandboxed_run(
    sudo: bool, mode: int, refused: bool
) -> None:
    """Whatever the drop did (a stand-in sudo here, or no sudo at all), a container
    daemon's socket the user can still open is root at hand: the run is refused."""
    folder = Path(tempfile.mkdtemp(prefix="dk"))
    try:
        folder.chmod(0o777)
        if sudo:
            (folder / "sudo").write_text(FAKE_SUDO)
            (folder / "sudo").chmod(0o755)
        path = folder / "docker.sock"
        server = listening_socket(path)
        try:
            os.chown(path, 0, 4242)
            path.chmod(mode)
            code = (
                "import os, sys; from runner.errors import RunnerError; "
                "from runner.github.sudo import drop_sudo\n"
                "try:\n    drop_sudo(os.environ, sockets=(sys.argv[1], '/nonexistent.sock'))\n"
                "except RunnerError as exc:\n    print('refused:', exc); sys.exit(2)\n"
            )
            proc = subprocess.run(
                [*AS_DOCKER_MEMBER, sys.executable, "-I", "-c", code, str(path)],
                env={
                    "PATH": f"{folder}:/usr/bin:/bin" if sudo else "/nonexistent",
                    "FAKE_SUDO_DIR": str(folder),
                    "FAKE_SUDO_WORKS": "1",
                },
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            server.close()
        if refused:
            assert proc.returncode == 2, proc.stdout + proc.stderr
            assert f"refused: {path} is open to this user (the docker group)" in proc.stdout
            assert "keep-sudo: true" in proc.stdout
        else:
            assert proc.returncode == 0, proc.stdout + proc.stderr
    finally:
        shutil.rmtree(folder)


@pytest.mark.skipif(os.geteuid() != 0, reason="as root")
def test_as_root_there_is_nothing_to_drop_and_a_warning_says_why(
    capsys: pytest.CaptureFixture[str],
) -> None:
    drop_sudo({"PATH": "/nonexistent"}, sockets=())
    assert capsys.readouterr().out.startswith(
        "::warning title=runner::the job runs as root, so the unsandboxed agent has root too"
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="as a normal user")
def test_without_sudo_a_socket_the_user_can_open_still_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closed, open_ = tmp_path / "closed.sock", tmp_path / "open.sock"
    closed.write_text("")
    closed.chmod(0o400)
    open_.write_text("")
    drop_sudo({"PATH": "/nonexistent"}, sockets=(str(closed), str(tmp_path / "absent.sock")))
    assert "sudo: not available to this user, nothing to drop" in capsys.readouterr().out
    with pytest.raises(RunnerError, match=rf"^{re.escape(str(open_))} is open to this user"):
        drop_sudo({"PATH": "/nonexistent"}, sockets=(str(closed), str(open_)))
