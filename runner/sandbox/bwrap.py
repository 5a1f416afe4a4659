"""Commands inside bubblewrap (`read-only`, `workspace-write`), as Codex runs them on Linux.

Every command gets fresh namespaces (mount, pid, ipc, uts, cgroup, user unless the runner
is root, network unless the policy allows it) and this filesystem, mounted in order of
depth so the most specific rule wins:

    /                       an empty tmpfs, read-only once the mounts below are made
    the host's entries      bound read-only, one per top-level entry (links copied as
                            links), except the hidden places (see `host_view`)
    /dev, /proc, /dev/shm   private (a new /proc shows only the sandbox's processes)
    /tmp, /run              private tmpfs; /run holds host daemons' sockets (Docker's
                            among them), which a network namespace does not cut off
    workspace, roots        bound read-write (`workspace-write`) or read-only
    <root>/.git, .runner    read-only again
    toolchains              read-only inside hidden homes (PATH folders); credential
                            files in them masked
    the skills              read-only at fixed paths under /tmp, copied by the runner
                            (runner/skills.py), so no mount names where they came from
    the object store        read-only at a fixed path under /tmp, with the workspace's
                            `.git/objects/info/alternates` shown pointing there; it is the
                            runner's pack of what the base commit reaches, so no mount
                            names the user's repository and nothing newer or unrelated
                            is in it (see runner/workspace/prepare.py)

Hidden places (the runs' directory, every other batch's it finds (`run_dirs`), the out
dir, the user's repository and git dirs, every home) are not covered by an empty mount,
whose mount point would name them in `/proc/self/mountinfo`: they are left out. A
directory on the way to one is rebuilt from its other entries, so the hidden entry is
simply absent, and no mount point, mount source or argument names it. The argument list
itself reaches bubblewrap through a memfd (`--args`), since the sandbox's process 1 is
bubblewrap and anyone inside may read its `/proc/1/cmdline`.

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

Why one module: the mount table, the argv and the resource limits are one
security boundary, checked by reading them together.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import anyio
import anyio.to_thread

from runner import hostfs
from runner.errors import SandboxError
from runner.sandbox.env import sandbox_env
from runner.sandbox.policy import PROTECTED_NAMES, Policy
from runner.sandbox.process import run_process
from runner.sandbox.registry import RUN_DIRS, registered
from runner.tools import ExecResult

SANDBOX_UID = 65534
"""Who commands run as when the runner is root (`nobody` on Debian)."""
MAX_PROCESSES = 512
"""Processes and threads one command may have at once (RLIMIT_NPROC)."""
MAX_WRITTEN_FILE_BYTES = 1 << 30
"""Largest file a command may write (RLIMIT_FSIZE): a write past it gets SIGXFSZ."""
MAX_TMP_BYTES = 1 << 30
"""Size of the private /tmp, which lives in memory."""
MAX_WORKSPACE_GROWTH = 4 << 30
"""How much a run's commands may add to its workspace's disk use, all commands together.
Checked about every second while a command runs (more rarely in a huge tree); the
command that goes past it is stopped (exit 125), the run and the batch go on."""
WATCH_EVERY_S = 1.0
MAX_SHM_BYTES = 256 << 20
"""Size of the private /dev/shm (also memory): uncapped it would be half the machine's RAM.
A write past it fails with ENOSPC in that command only."""
TEMP_ROOTS = ("/var/tmp",)
"""Where temp dirs commonly live, besides /tmp and /dev/shm: those two are the sandbox's
own, so nothing of the host's shows there anyway."""
HOME = "/tmp/home"
"""HOME inside the sandbox: writable and private, so tools that keep caches work."""
OBJECTS_AT = "/tmp/.runner/objects"
CREDENTIALS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".gnupg",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".cargo/config",  # registry tokens may live in cargo's config too
    ".cargo/config.toml",
    ".local/share/keyrings",
    ".local/share/python_keyring",
    ".local/share/gh",
)
"""Under each hidden home: hidden again below the toolchain folders shown from it."""
PROBE_TIMEOUT_S = 10.0
FIX = (
    "install bubblewrap (`apt-get install bubblewrap`); where it is installed but "
    "cannot create namespaces, allow unprivileged user namespaces "
    "(`sysctl kernel.unprivileged_userns_clone=1`; on Ubuntu 24.04 "
    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`); or run the task with "
    "`sandbox: danger-full-access` to go without a sandbox on purpose"
)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    found = _probe(search_path if search_path is not None else os.environ.get("PATH", ""))
    if isinstance(found, str):
        raise SandboxError(found)
    return found


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


@dataclass(frozen=True)
class Layout:
    """What the disk holds that the mounts depend on, looked up before each command."""

    objects: tuple[Path, ...] = ()
    """Object stores the workspace's `.git` borrows through alternates."""
    protected: tuple[Path, ...] = ()
    """Existing `.git` / `.runner` in writable roots."""
    masked: tuple[tuple[Path, bool], ...] = ()
    """(path, is a directory) to hide."""
    resolv: Path | None = None
    """/etc/resolv.conf's target when it lies under /run (Ubuntu), kept for the network."""
    shown: tuple[Path, ...] = ()
    """Read-only again inside a hidden place: the PATH directories in a home."""
    mounted: tuple[tuple[Path, Path], ...] = ()
    """(source, where it shows) read-only: the skills' copies (`Policy.mounted`)."""
    host: tuple[Path, ...] = ()
    """The host's entries shown read-only (see `host_view`)."""
    links: tuple[tuple[Path, str], ...] = ()
    """The host's links shown as links: (path, what it says)."""
    folders: tuple[Path, ...] = ()
    """The host's folders rebuilt around a hidden place (see `host_view`)."""


@dataclass(frozen=True)
class _Mount:
    dest: Path
    rank: int
    """Order among mounts of the same depth: directories, binds, re-protections, masks."""
    args: tuple[str, ...]


PROVIDED = ("dev", "proc", "run", "tmp")
"""Top-level names the sandbox makes itself, never taken from the host."""


def mount_args(
    policy: Policy,
    layout: Layout,
    *,
    alternates_fd: int | None,
    tmp_bytes: int = MAX_TMP_BYTES,
    shm_bytes: int = MAX_SHM_BYTES,
) -> list[str]:
    """bubblewrap's filesystem arguments. Pure: the caller looked at the disk (`layout`);
    `alternates_fd` is a pipe holding the alternates text the workspace's git sees."""
    base = [
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--perms",
        "1777",
        "--size",
        str(shm_bytes),
        "--tmpfs",
        "/dev/shm",
        "--perms",
        "1777",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--perms",
        "0777",
        "--dir",
        HOME,
        "--tmpfs",
        "/run",
    ]
    sealed = ["/run"]
    """Empty tmpfs mounts made read-only last, once every mount point inside exists."""
    mounts = _host_mounts(layout)
    writable = policy.writable()
    for root in (policy.workspace, *writable):
        verb = "--bind" if root in writable else "--ro-bind"
        mounts.append(_Mount(root, 1, (verb, str(root), str(root))))
    for path in layout.shown:
        mounts.append(_Mount(path, 1, ("--ro-bind", str(path), str(path))))
    for src, at in layout.mounted:
        mounts.append(_Mount(at, 1, ("--ro-bind", str(src), str(at))))
    for path in layout.protected:
        mounts.append(_Mount(path, 2, ("--ro-bind", str(path), str(path))))
    for path, is_dir in layout.masked:
        if is_dir:
            sealed.append(str(path))
        args = ("--tmpfs", str(path)) if is_dir else ("--ro-bind", "/dev/null", str(path))
        mounts.append(_Mount(path, 3, args))
    for i, store in enumerate(layout.objects):
        mounts.append(
            _Mount(Path(OBJECTS_AT, str(i)), 1, ("--ro-bind", str(store), f"{OBJECTS_AT}/{i}"))
        )
    if alternates_fd is not None:
        target = policy.workspace / ".git" / "objects" / "info" / "alternates"
        mounts.append(
            _Mount(
                target, 4, ("--perms", "0444", "--ro-bind-data", str(alternates_fd), str(target))
            )
        )
    if layout.resolv is not None and policy.network:
        mounts.append(
            _Mount(layout.resolv, 1, ("--ro-bind", str(layout.resolv), str(layout.resolv)))
        )
    mounts += _mount_points(mounts)
    out = base
    seen: set[tuple[str, ...]] = set()
    for m in sorted(mounts, key=lambda m: (len(m.dest.parts), m.rank)):
        if m.args not in seen:
            seen.add(m.args)
            out += m.args
    for dest in (*sealed, "/"):
        out += ["--remount-ro", dest]
    return out


def _mount_points(mounts: Sequence[_Mount]) -> list[_Mount]:
    """Mount points bubblewrap would make on the fly get mode 0700 and root's owner when
    root runs it: made here instead, traversable by the command's user. Every folder
    that is not inside something bound lies on one of the sandbox's own tmpfs mounts."""
    bound = {m.dest for m in mounts if "--tmpfs" not in m.args and "--dir" not in m.args}
    made: set[Path] = set()
    out = []
    for m in mounts:
        for parent in m.dest.parents:
            if len(parent.parts) < 2 or parent in made:
                continue
            made.add(parent)
            if not any(p in bound for p in (parent, *parent.parents)):
                out.append(_Mount(parent, 0, ("--perms", "0755", "--dir", str(parent))))
    return out


def _host_mounts(layout: Layout) -> list[_Mount]:
    """The host's entries, read-only; `-try`, since one may vanish between the look at
    the host and the command."""
    mounts = [_Mount(p, 1, ("--ro-bind-try", str(p), str(p))) for p in layout.host]
    mounts += [_Mount(p, 1, ("--symlink", text, str(p))) for p, text in layout.links]
    mounts += [_Mount(p, 0, ("--perms", "0755", "--dir", str(p))) for p in layout.folders]
    return mounts


@dataclass(frozen=True)
class HostView:
    binds: list[Path]
    links: list[tuple[Path, str]]
    folders: list[Path]


def host_view(hidden: Sequence[Path]) -> HostView:
    """What of the host the sandbox shows: entries bound read-only, links copied, and
    folders rebuilt empty.

    Every entry of `/` is shown, except those the sandbox makes itself (`PROVIDED`) and
    the `hidden` places. A folder holding a hidden place is not bound: it is made anew
    and its other entries are shown the same way, so the hidden entry is absent and
    nothing in the mount table or the arguments names it. On the way to a hidden place
    only folders, files and links are kept: a socket there could reach a host service.
    A link that leads into a hidden place is left out, since what it says would name it."""
    binds: list[Path] = []
    links: list[tuple[Path, str]] = []
    folders: list[Path] = []
    todo = [Path("/")]
    while todo:
        folder = todo.pop()
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = folder / name
            if (folder == Path("/") and name in PROVIDED) or path in hidden:
                continue
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                real = Path(os.path.realpath(path))
                if not any(real.is_relative_to(h) for h in hidden):
                    links.append((path, os.readlink(path)))
            elif any(h.is_relative_to(path) for h in hidden):
                if stat.S_ISDIR(mode):
                    todo.append(path)
                    folders.append(path)
            elif stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                binds.append(path)
    return HostView(binds, links, folders)


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
            else tuple(_object_stores(policy.workspace))
        )
        homes = _homes(host)
        # A store given as a git dir's `objects` (not the runner's own pack): its git dir
        # (config, hooks) stays hidden.
        others = [*policy.hidden, *(s.parent for s in self._stores if s.name == "objects")]
        self._hidden = (*others, *homes)
        self._shown = tuple(_tools_in(homes, others))
        credentials = [Path(os.path.realpath(h / c)) for h in homes for c in CREDENTIALS]
        self._masked = tuple(
            _existing([c for c in credentials if any(c.is_relative_to(s) for s in self._shown)])
        )
        self._others = tuple(p for p in run_dirs() if p not in self._hidden)
        self._view = host_view((*self._hidden, *self._others))
        self._paths: dict[str, str] = {}
        self._resolv = _resolv_under_run()
        self.limit_notes: list[str] = []
        self._base_usage: int | None = None
        """The workspace's disk use before the first command: the cap counts growth."""

    def layout(self) -> Layout:
        """Looked up per command: a `.runner` made by one command is protected in the next,
        and a batch started since the last command has its run directories left out."""
        others = tuple(p for p in run_dirs() if p not in self._hidden)
        if others != self._others:
            self._others, self._view = others, host_view((*self._hidden, *others))
        protected = _existing(
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
        """`_visible_path` of this sandbox, kept: PATH is the same for every command."""
        if value not in self._paths:
            seen = (*self._shown, self.policy.workspace, *self.policy.writable())
            self._paths[value] = _visible_path(value, self._hidden, seen)
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
        self, argv: Sequence[str], *, cwd: Path, timeout_s: float, env: Mapping[str, str]
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
        # The options go through a memfd: process 1 inside is bubblewrap, whose
        # command line every command may read.
        options = self.options(cwd=cwd, layout=layout, alternates_fd=alternates_fd)
        args_fd = _memfd_with("".join(f"{o}\0" for o in options))
        full = [
            self.host.bwrap,
            "--args",
            str(args_fd),
            "--",
            *command_prefix(self.host, self.limits),
            *argv,
        ]
        inner = sandbox_env(env, home=HOME, user=self.host.user)
        inner["PATH"] = self._visible_path(inner["PATH"])
        try:
            return await run_process(
                full,
                cwd=Path("/"),
                timeout_s=timeout_s,
                env=inner,
                pass_fds=(args_fd,) if alternates_fd is None else (args_fd, alternates_fd),
                watch=watch,
            )
        finally:
            os.close(args_fd)
            if alternates_fd is not None:
                os.close(alternates_fd)


def run_dirs() -> tuple[Path, ...]:
    """Every batch's run directories (`runner-work`): those this uid's live batches
    registered, wherever they are (runner/sandbox/registry.py), and those found in the
    usual temp roots (`TEMP_ROOTS`, `$TMPDIR`, the runner's own temp dir, and the folders
    right below them), which also finds other users' and older runners' batches. The
    sandbox leaves them all out: a root runner's batches keep each other out by file
    modes too, but an unprivileged runner's batches share one uid, and only the mount
    tree can separate them."""
    tops = (*TEMP_ROOTS, os.environ.get("TMPDIR") or "", tempfile.gettempdir())
    roots = sorted({Path(os.path.realpath(t)) for t in tops if os.path.isabs(t)})
    found: list[Path] = []
    for root in roots:
        if root.parts[1:2] and root.parts[1] in PROVIDED:
            continue  # the sandbox's own /tmp, /dev/shm: the host's is not shown
        try:
            below = [e.path for e in os.scandir(root) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for folder in (str(root), *below):
            candidate = Path(folder, RUN_DIRS)
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(candidate).st_mode):
                    found.append(candidate)
    live = [Path(os.path.realpath(p)) for p in registered()]
    return tuple(dict.fromkeys([*found, *live]))


SYSTEM_TOPS = frozenset(
    {"usr", "etc", "var", "opt", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "nix"}
    | {"snap", "boot", "sys", *PROVIDED}
)
"""Top-level folders whose own folders hold the tools and their data (`/usr/share`,
`/var/lib`, `/opt/conda`): never hidden whole as a user's folder."""


def user_folder(path: Path) -> Path | None:
    """`path` resolved, when the sandbox may hide it whole as a folder of the user's (the
    one holding the task file, or the repository): two levels below `/` or deeper (three
    under `SYSTEM_TOPS`) and holding no PATH directory, so the tools a command needs stay.
    `/srv/bench` is such a folder; `/srv`, `/usr/local` and `/var/tmp` are not."""
    real = Path(os.path.realpath(path))
    depth = len(real.parts) - 1
    if depth < 2 or (real.parts[1] in SYSTEM_TOPS and depth < 3):
        return None
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if os.path.isabs(entry) and Path(os.path.realpath(entry)).is_relative_to(real):
            return None
    return real


def _homes(host: Host) -> list[Path]:
    """Every home the invoking user may keep credentials in (`~/.gitconfig`,
    `~/.cargo/credentials.toml`, ...): the runner's HOME, its uid's home, and under sudo
    the calling user's. Hidden whole, whatever the uid the sandbox runs as."""
    found = [host.home] if host.home else []
    for name in (None, os.environ.get("SUDO_USER")):
        try:
            entry = pwd.getpwuid(os.getuid()) if name is None else pwd.getpwnam(name)
        except KeyError:
            continue
        found.append(Path(entry.pw_dir))
    out: list[Path] = []
    for h in found:
        real = Path(os.path.realpath(h))
        if real != Path("/") and real not in out:
            out.append(real)
    return out


def _tools_in(homes: Sequence[Path], hidden: Sequence[Path]) -> list[Path]:
    """The home entries holding PATH directories (`~/.local`, `~/.cargo`, `~/.pyenv`):
    toolchains, shown again read-only so the commands the user installed still run; the
    credential files inside them stay hidden (`CREDENTIALS`). A PATH directory inside
    another hidden place (a virtualenv in the user's repository) is not shown, and a home
    entry holding such a place is narrowed to the PATH directory itself."""
    out: list[Path] = []
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(os.path.realpath(entry))
        if any(real.is_relative_to(h) for h in hidden):
            continue
        for h in homes:
            if real != h and real.is_relative_to(h) and real.is_dir():
                top = h / real.relative_to(h).parts[0]
                out.append(real if any(x.is_relative_to(top) for x in hidden) else top)
    return list(dict.fromkeys(out))


def _visible_path(value: str, hidden: Sequence[Path], shown: Sequence[Path]) -> str:
    """PATH without the directories the sandbox hides: they would not run there, and
    their names would tell where the user's repository or home is."""
    kept = []
    for entry in value.split(os.pathsep):
        real = Path(os.path.realpath(entry)) if os.path.isabs(entry) else None
        if real is not None and (
            any(real.is_relative_to(h) for h in hidden)
            and not any(real.is_relative_to(s) for s in shown)
        ):
            continue
        kept.append(entry)
    return os.pathsep.join(kept)


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


def _object_stores(workspace: Path) -> list[Path]:
    """The object stores the workspace's `.git` borrows through alternates."""
    info = workspace / ".git" / "objects" / "info" / "alternates"
    try:
        lines = info.read_text().splitlines()
    except OSError:
        return []
    base = info.parent.parent
    stores = [
        Path(os.path.realpath(base / line.strip()))
        for line in lines
        if line.strip() and not line.startswith("#")
    ]
    return [s for s in stores if s.is_dir()]


def _existing(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    """(path, is_dir) of the paths that exist; symlinks are skipped, since bubblewrap
    would follow them to a place the policy never named."""
    out = []
    for p in paths:
        if os.path.lexists(p) and not os.path.islink(p):
            out.append((p, os.path.isdir(p)))
    return out


def _resolv_under_run() -> Path | None:
    """Ubuntu's /etc/resolv.conf is a link into /run, which the sandbox replaces."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    return target if target.parts[1:2] == ("run",) and target.is_file() else None


def hand_over(paths: Sequence[Path], uid: int) -> None:
    """Make `paths` (recursively) owned by the sandbox user, so a root runner's commands,
    running as that user, can change them. Links are changed themselves, never followed."""
    for top in paths:
        hostfs.chown_tree(top, uid, uid)  # iterative: any committed depth
