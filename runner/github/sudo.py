"""Taking root away from the job's user before an unsandboxed agent starts (keep-sudo:
false).

Why apart: it edits the machine (sudoers, groups, container sockets) with a shell script
run as root; the script and the checks that it worked are tested on their own, against a
copied root and a real socket.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping

from runner.errors import RunnerError
from runner.github.workflow_io import annotate

CONTAINER_SOCKETS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
)
"""Sockets of container daemons that run as root: whoever may open one has root."""


def drop_sudo(env: Mapping[str, str], sockets: tuple[str, ...] = CONTAINER_SOCKETS) -> None:
    """Take root away from the job's user before an unsandboxed agent starts (as
    codex-action's drop-sudo does): with it the agent could read any process's memory
    and secrets, and change the machine for the job's later steps. Lines naming the
    user are removed from the sudoers files, the user leaves the sudo, admin and wheel
    groups, and `sudo -n true` must then fail, or the run is refused. The Docker socket
    is root too (`docker run -v /:/host`), and hosted runners put the user in the
    `docker` group: the socket becomes root's only, and a container socket the user can
    still open refuses the run. Nothing to do where there is no passwordless sudo and no
    such socket; as root it cannot help (a warning)."""
    if os.geteuid() == 0:
        annotate(
            "warning",
            "runner",
            "the job runs as root, so the unsandboxed agent has root too; run it as a "
            "normal user (keep-sudo: true silences this)",
        )
        return
    sudo = shutil.which("sudo", path=env.get("PATH"))
    if sudo is None or _quiet([sudo, "-n", "true"], env) != 0:
        print("sudo: not available to this user, nothing to drop")
        _refuse_open_sockets(sockets)
        return
    user = pwd.getpwuid(os.getuid()).pw_name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", user):
        raise RunnerError(f"keep-sudo: cannot drop sudo for the user name {user!r}")
    done = subprocess.run(
        [sudo, "-n", "sh", "-c", DROP_SUDO_SCRIPT, "drop-sudo", user],
        env=env,
        check=False,
        capture_output=True,
        text=True,
    )
    sys.stdout.write(done.stdout)
    _quiet([sudo, "-K"], env)
    if done.returncode != 0 or _quiet([sudo, "-n", "true"], env) == 0:
        why = done.stderr.strip()[-300:] or "sudo still works"
        raise RunnerError(
            f"could not take sudo away from {user} ({why}); the unsandboxed agent would "
            "have root: set keep-sudo: true to run anyway"
        )
    print(f"sudo: dropped for {user}")
    _refuse_open_sockets(sockets)


def _refuse_open_sockets(sockets: tuple[str, ...]) -> None:
    """Group membership outlives the drop (the job's processes keep their groups), so
    what counts is whether this process can still open the socket."""
    for sock in sockets:
        if os.path.exists(sock) and os.access(sock, os.W_OK):
            raise RunnerError(
                f"{sock} is open to this user (the docker group): through it the "
                "unsandboxed agent would have root; set keep-sudo: true to run anyway"
            )


DROP_SUDO_SCRIPT = r"""set -eu
user=$1
root=${2:-}
for f in "$root/etc/sudoers" "$root"/etc/sudoers.d/*; do
  [ -f "$f" ] || continue
  if grep -Eq "^[[:space:]]*$user[[:space:]]" "$f"; then
    sed -i -E "/^[[:space:]]*$user[[:space:]]/d" "$f"
    echo "sudo: removed $user's lines from ${f#"$root"}"
  fi
done
for group in sudo admin wheel; do
  if grep -Eq "^$group:[^:]*:[^:]*:(.*,)?$user(,|$)" "$root/etc/group"; then
    gpasswd -Q "${root:-/}" -d "$user" "$group" >/dev/null
    echo "sudo: removed $user from the $group group"
  fi
done
printf '\n# runner keep-sudo: false\n%s ALL=(ALL:ALL) !ALL\n' "$user" >> "$root/etc/sudoers"
echo "sudo: $user may run nothing (last rule of /etc/sudoers)"
for sock in "$root/run/docker.sock" "$root/var/run/docker.sock" \
            "$root/run/containerd/containerd.sock" "$root/run/podman/podman.sock"; do
  if [ -S "$sock" ] && [ "$(stat -L -c %a "$sock")" != 600 ]; then
    chmod 0600 "$sock"
    echo "sudo: ${sock#"$root"} is root's only for the rest of the job"
  fi
done
"""
"""Run as root with the user's name (and, for tests, a root directory). Removing the
user's own lines and groups is not enough: the job's processes keep the groups they
started with (a `%sudo` or `%admin` rule still matches them until the next login), and a
`User_Alias` or `ALL` rule names nobody. The last matching rule decides, so one `!ALL`
at the very end of /etc/sudoers (after its `@includedir`) denies the user everything.
For the same reason leaving the `docker` group would not close the Docker socket (on
hosted runners it is even the user's primary group): its mode does, checked at every
connect. The daemon is root-owned, so root keeps it; the job's later steps lose it."""


def _quiet(argv: list[str], env: Mapping[str, str]) -> int:
    return subprocess.run(argv, env=env, check=False, capture_output=True).returncode
