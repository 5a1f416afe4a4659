"""Commands inside bubblewrap (`read-only`, `workspace-write`), as Codex runs them on Linux.

Every command gets fresh namespaces (mount, pid, ipc, uts, cgroup, user unless the runner
is root, network unless the policy allows it), the mount table of runner/sandbox/mounts.py
and the host's view of runner/sandbox/hostview.py. The argument list itself reaches
bubblewrap through a memfd (`--args`), since the sandbox's process 1 is bubblewrap and
anyone inside may read its `/proc/1/cmdline`.

Identity: as a normal user, bubblewrap runs unprivileged in a new user namespace and the
command keeps the user's uid. As root, bubblewrap runs as root without a user namespace
(so it can bind paths only root can reach, such as a repository under /root) and the
command starts through `setpriv` as uid/gid 65534 (nobody), no supplementary groups, no
capabilities, empty bounding set; the workspace (and any writable root) is handed to that
user first. Mapping root into a user namespace instead would keep the host uid 0, which
reads root's files and is exempt from RLIMIT_NPROC. Either way the command has no
capabilities and no_new_privs (bubblewrap sets it).

Lifetime: bubblewrap is process 1 of the sandbox's pid namespace and exits when the
command does; the kernel then kills everything left in the namespace, `setsid` children
included. A timeout kills bubblewrap's process group (`run_process`), and
`--die-with-parent` covers a runner that dies.

Resources: `prlimit` inside the sandbox sets RLIMIT_NPROC and RLIMIT_FSIZE. For a normal
user it is set after the user namespace exists, so the kernel counts processes per
sandbox: the host user's other processes do not count, and a fork bomb stops at the
limit. For root's sandboxes the count is uid 65534's, shared by the runs of the batch.

Why this module: the probe, the argv and the resource limits decide how a command is
started and as whom, read together; what it sees is the mount table (pure) and the host's
view (read from the disk), each in its own module.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

from runner import hostfs
from runner.errors import SandboxError
from runner.frozen import frozen
from runner.sandbox.env import login_profile, sandbox_env
from runner.sandbox.environment import EXECUTOR_OUTPUT_CAP, ExecResult
from runner.sandbox.hostview import (
    CREDENTIALS,
    existing,
    homes,
    host_view,
    object_stores,
    resolv_under_run,
    run_dirs,
    tools_in,
    visible_path,
)
from runner.sandbox.mounts import HOME, MAX_SHM_BYTES, MAX_TMP_BYTES, OBJECTS_AT, Layout, mount_args
from runner.sandbox.policy import PROTECTED_NAMES, Policy
from runner.sandbox.process import run_process

SANDBOX_UID = 65534
"""Who commands run as when the runner is root (`nobody` on Debian)."""
MAX_PROCESSES = 512
"""Processes and threads one command may have at once (RLIMIT_NPROC)."""
MAX_WRITTEN_FILE_BYTES = 1 << 30
"""Largest file a command may write (RLIMIT_FSIZE): a write past it gets SIGXFSZ."""
MAX_WORKSPACE_GROWTH = 4 << 30
"""How much a run's commands may add to its workspace's disk use, all commands together.
Checked about every second while a command runs (more rarely in a huge tree); the
command that goes past it is stopped (exit 125), the run and the batch go on."""
WATCH_EVERY_S = 1.0
PROBE_TIMEOUT_S = 10.0
FIX = (
    "install bubblewrap (`apt-get install bubblewrap`); where it is installed but "
    "cannot create namespaces, allow unprivileged user namespaces "
    "(`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`); or run the task with "
    "`sandbox: danger-full-access` to go without a sandbox on purpose"
)


@frozen
class Host:
    """What the probe found: the programs to run and as whom."""

    bwrap: str
    prlimit: str
    setpriv: str | None
    """Set when the runner is root: the command drops to `uid` through it."""
    uid: int | None
    user: str | None
    """The name commands run under (USER, LOGNAME)."""
    home: Path | None
    """The runner's own home, whose credential files are hidden."""


@frozen
class Limits:
    processes: int = MAX_PROCESSES
    file_bytes: int = MAX_WRITTEN_FILE_BYTES
    tmp_bytes: int = MAX_TMP_BYTES
    shm_bytes: int = MAX_SHM_BYTES
    workspace_growth_bytes: int = MAX_WORKSPACE_GROWTH


def probe(search_path: str | None = None) -> Host:
    """Check once per process (per PATH) that bubblewrap works here; SandboxError if not.

    Never falls back: a sandboxed mode either runs in bubblewrap or fails the run.
    """
    with _PROBING:  # a second caller waits for the answer rather than probe again
        found = _probe(search_path if search_path is not None else os.environ.get("PATH", ""))
    if isinstance(found, str):
        raise SandboxError(found)
    return found


_PROBING = threading.Lock()


def probe_ahead() -> None:
    """`probe` now, its answer kept for the first sandboxed command. The batch calls it
    in a worker thread while the first workspace is made: the probe is a bwrap process
    (about 13 ms), which the first run otherwise waited for after its git work. A
    failure is the first run's to report, so it is not raised here."""
    with contextlib.suppress(SandboxError):
        probe()


@functools.cache
def _probe(search_path: str) -> Host | str:
    def which(name: str) -> str | None:
        return shutil.which(name, path=search_path)

    bwrap = which("bwrap")
    if bwrap is None:
        return f"the sandbox needs bubblewrap (`bwrap`), which is not installed: {FIX}"
    root = os.geteuid() == 0
    tools = {name: which(name) for name in ("prlimit", "true", *(["setpriv"] if root else []))}
    missing = [name for name, path in tools.items() if path is None]
    if missing:
        return (
            f"the sandbox needs {', '.join(missing)} (util-linux, coreutils), not found "
            "on PATH: install util-linux and coreutils"
        )
    uid = SANDBOX_UID if root else None
    host = Host(
        bwrap=bwrap,
        prlimit=str(tools["prlimit"]),
        setpriv=tools.get("setpriv"),
        uid=uid,
        user=_user_name(uid if uid is not None else os.getuid()),
        home=Path(os.path.expanduser("~")),
    )
    argv = [
        bwrap,
        *namespace_args(host, network=False),
        "--die-with-parent",
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--",
        *command_prefix(host, Limits()),
        str(tools["true"]),
    ]
    try:
        proc = subprocess.run(
            argv, env={}, capture_output=True, timeout=PROBE_TIMEOUT_S, cwd="/", check=False
        )
    except subprocess.TimeoutExpired:
        return (
            f"bubblewrap ({bwrap}) did not finish a sandboxed `true` in {PROBE_TIMEOUT_S:g} s; "
            "the sandbox cannot be used on this machine as it is"
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap ({bwrap}) could not be started: {exc}; {FIX}"
    if proc.returncode != 0:
        why = proc.stderr.decode(errors="replace").strip()[-500:] or f"exit {proc.returncode}"
        return f"bubblewrap ({bwrap}) cannot create a sandbox here ({why}): {FIX}"
    return host


def _user_name(uid: int) -> str | None:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def namespace_args(host: Host, *, network: bool) -> list[str]:
    """New namespaces for everything; a user namespace only for an unprivileged runner
    (root keeps real root for setup, and the command leaves it through setpriv)."""
    if host.setpriv is None:
        args = ["--unshare-all", "--cap-drop", "ALL"]
        return args + (["--share-net"] if network else [])
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    return args + ([] if network else ["--unshare-net"])


def command_prefix(host: Host, limits: Limits) -> list[str]:
    """What runs inside the sandbox before the command: the identity switch (root runner
    only), then the resource limits."""
    prefix: list[str] = []
    if host.setpriv is not None and host.uid is not None:
        prefix += [
            host.setpriv,
            f"--reuid={host.uid}",
            f"--regid={host.uid}",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
            "--",
        ]
    return prefix + [
        host.prlimit,
        f"--nproc={limits.processes}",
        f"--fsize={limits.file_bytes}",
        "--",
    ]


class BwrapExecutor:
    """Runs each command in a fresh bubblewrap sandbox enforcing `policy`."""

    def __init__(
        self,
        policy: Policy,
        host: Host,
        limits: Limits | None = None,
        *,
        objects: Sequence[Path] | None = None,
    ) -> None:
        """`objects`: the object stores the workspace borrows, as the runner made them;
        without it they are read from the workspace's alternates, which is safe only
        before the agent has run."""
        if not policy.sandboxed:
            raise SandboxError("danger-full-access runs without bubblewrap (LocalExecutor)")
        self.policy = policy
        self.host = host
        self.limits = limits or Limits()
        self._stores = (
            tuple(Path(os.path.realpath(p)) for p in objects)
            if objects is not None
            else tuple(object_stores(policy.workspace))
        )
        found_homes = homes(host.home)
        # A store given as a git dir's `objects` (not the runner's own pack): its git dir
        # (config, hooks) stays hidden.
        others = [*policy.hidden, *(s.parent for s in self._stores if s.name == "objects")]
        self._hidden = (*others, *found_homes)
        self._shown = tuple(tools_in(found_homes, others))
        credentials = [Path(os.path.realpath(h / c)) for h in found_homes for c in CREDENTIALS]
        self._masked = tuple(
            existing([c for c in credentials if any(c.is_relative_to(s) for s in self._shown)])
        )
        self._others = self._not_hidden(run_dirs())
        self._view = host_view((*self._hidden, *self._others))
        self._paths: dict[str, str] = {}
        self._resolv = resolv_under_run()
        self.limit_notes: list[str] = []
        self._base_usage: int | None = None
        """The workspace's disk use before the first command: the cap counts growth."""

    def _not_hidden(self, places: Sequence[Path]) -> tuple[Path, ...]:
        """`places` less this sandbox's own hidden ones, by a set: there can be hundreds."""
        hidden = set(self._hidden)
        return tuple(p for p in places if p not in hidden)

    def layout(self) -> Layout:
        """Looked up per command: a `.runner` made by one command is protected in the next,
        and a batch started since the last command has its run directories left out."""
        others = self._not_hidden(run_dirs())
        if others != self._others:
            self._others, self._view = others, host_view((*self._hidden, *others))
        protected = existing(
            [root / name for root in self.policy.writable() for name in PROTECTED_NAMES]
        )
        return Layout(
            objects=self._stores,
            protected=tuple(p for p, _ in protected),
            masked=self._masked,
            resolv=self._resolv,
            shown=self._shown,
            mounted=self.policy.mounted,
            host=tuple(self._view.binds),
            links=tuple(self._view.links),
            folders=tuple(self._view.folders),
        )

    def command(
        self, argv: Sequence[str], *, cwd: Path, layout: Layout, alternates_fd: int | None
    ) -> list[str]:
        """The whole bubblewrap command line for one command (paths only, no secrets)."""
        return [
            self.host.bwrap,
            *self.options(cwd=cwd, layout=layout, alternates_fd=alternates_fd),
            "--",
            *command_prefix(self.host, self.limits),
            *argv,
        ]

    def options(self, *, cwd: Path, layout: Layout, alternates_fd: int | None) -> list[str]:
        """bubblewrap's options: namespaces, mounts, working directory."""
        return [
            *namespace_args(self.host, network=self.policy.network),
            "--die-with-parent",
            "--new-session",
            "--hostname",
            "sandbox",
            *mount_args(
                self.policy,
                layout,
                alternates_fd=alternates_fd,
                tmp_bytes=self.limits.tmp_bytes,
                shm_bytes=self.limits.shm_bytes,
            ),
            "--chdir",
            str(cwd),
        ]

    def _visible_path(self, value: str) -> str:
        """`visible_path` of this sandbox, kept: PATH is the same for every command."""
        if value not in self._paths:
            seen = (*self._shown, self.policy.workspace, *self.policy.writable())
            self._paths[value] = visible_path(value, self._hidden, seen)
        return self._paths[value]

    async def _watch_disk(self, base: int) -> str:
        """Returns once the workspace has grown past its cap (see MAX_WORKSPACE_GROWTH)."""
        cap = self.limits.workspace_growth_bytes
        walk_s = 0.0
        while True:
            # A command shorter than this costs no walk; a huge tree is walked at most a
            # tenth of the time.
            await anyio.sleep(max(WATCH_EVERY_S, 10 * walk_s))
            t0 = time.monotonic()
            used = await anyio.to_thread.run_sync(
                hostfs.disk_usage, self.policy.workspace, abandon_on_cancel=True
            )
            walk_s = time.monotonic() - t0
            if used - base > cap:
                why = (
                    f"the workspace grew by {(used - base) >> 20} MiB, past its cap of "
                    f"{cap >> 20} MiB for this run; delete files to go on"
                )
                self.limit_notes.append(f"a command was stopped: {why}")
                return why

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        timeout_s: float,
        env: Mapping[str, str],
        stdin: bytes | None = None,
        output_cap: int = EXECUTOR_OUTPUT_CAP,
    ) -> ExecResult:
        layout = self.layout()
        alternates_fd = None
        if layout.objects:
            alternates_fd = _pipe_with(
                "".join(f"{OBJECTS_AT}/{i}\n" for i in range(len(layout.objects)))
            )
        watch = None
        if self.policy.mode == "workspace-write":
            if self._base_usage is None:
                self._base_usage = await anyio.to_thread.run_sync(
                    hostfs.disk_usage, self.policy.workspace
                )
            watch = partial(self._watch_disk, self._base_usage)
        inner = sandbox_env(env, home=HOME, user=self.host.user)
        inner["PATH"] = self._visible_path(inner["PATH"])
        profile_fd = _pipe_with(login_profile(inner["PATH"]))
        # The options go through a memfd: process 1 inside is bubblewrap, whose
        # command line every command may read.
        options = self.options(cwd=cwd, layout=layout, alternates_fd=alternates_fd)
        options += ["--file", str(profile_fd), f"{HOME}/.profile"]
        args_fd = _memfd_with("".join(f"{o}\0" for o in options))
        full = [
            self.host.bwrap,
            "--args",
            str(args_fd),
            "--",
            *command_prefix(self.host, self.limits),
            *argv,
        ]
        fds = (
            (args_fd, profile_fd) if alternates_fd is None else (args_fd, profile_fd, alternates_fd)
        )
        try:
            return await run_process(
                full,
                cwd=Path("/"),
                timeout_s=timeout_s,
                env=inner,
                pass_fds=fds,
                watch=watch,
                stdin=stdin,
                output_cap=output_cap,
            )
        finally:
            os.close(args_fd)
            os.close(profile_fd)
            if alternates_fd is not None:
                os.close(alternates_fd)


def _memfd_with(text: str) -> int:
    """An in-memory file holding `text`, read from its start (no size limit, unlike a
    pipe)."""
    fd = os.memfd_create("runner-bwrap-args", 0)
    try:
        os.write(fd, text.encode())
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _pipe_with(text: str) -> int:
    """A pipe's read end holding `text` (small: it must fit the pipe's buffer)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, text.encode())
    finally:
        os.close(write_fd)
    return read_fd


def hand_over(paths: Sequence[Path], uid: int) -> None:
    """Make `paths` (recursively) owned by the sandbox user, so a root runner's commands,
    running as that user, can change them. Links are changed themselves, never followed."""
    for top in paths:
        hostfs.chown_tree(top, uid, uid)  # iterative: any committed depth
