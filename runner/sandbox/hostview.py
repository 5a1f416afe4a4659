"""What of the host a sandbox shows and what it hides, looked up on the disk.

Hidden places (the runs' directory, every other batch's it finds (`run_dirs`), the out
dir, the user's repository and git dirs, every home) are not covered by an empty mount,
whose mount point would name them in `/proc/self/mountinfo`: they are left out. A
directory on the way to one is rebuilt from its other entries, so the hidden entry is
simply absent, and no mount point, mount source or argument names it.

Kept apart from the mount table (runner/sandbox/mounts.py, pure) and from launching
(runner/sandbox/bwrap.py): this is the part that reads the host, so each answer here is a
plain value the other two take as given.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pwd
import stat
import tempfile
from collections.abc import Container, Iterable, Sequence
from pathlib import Path

from runner.frozen import frozen
from runner.sandbox.mounts import PROVIDED
from runner.sandbox.registry import RUN_DIRS, registered, version

TEMP_ROOTS = ("/var/tmp",)
"""Where temp dirs commonly live, besides /tmp and /dev/shm: those two are the sandbox's
own, so nothing of the host's shows there anyway."""
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


@frozen
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
    # Strings and set lookups, not Paths and a scan of `hidden` per entry: a uid's
    # registry can name hundreds of kept folders, and this runs for every run.
    hidden_set = {str(h) for h in hidden}
    holders = _ancestors(hidden_set)
    todo = ["/"]
    while todo:
        folder = todo.pop()
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if (folder == "/" and name in PROVIDED) or path in hidden_set:
                continue
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISLNK(mode):
                if not _within(os.path.realpath(path), hidden_set):
                    links.append((Path(path), os.readlink(path)))
            elif path in holders:
                if stat.S_ISDIR(mode):
                    todo.append(path)
                    folders.append(Path(path))
            elif stat.S_ISDIR(mode) or stat.S_ISREG(mode):
                binds.append(Path(path))
    return HostView(binds, links, folders)


def _ancestors(paths: Iterable[str]) -> set[str]:
    """Every folder above one of `paths` (absolute), each visited once: hundreds of kept
    folders share a few ancestors."""
    out: set[str] = set()
    for path in paths:
        up = os.path.dirname(path)
        while up != path and up not in out:
            out.add(up)
            path, up = up, os.path.dirname(up)
    return out


def _within(path: str, places: Container[str]) -> bool:
    """`path` is one of `places` or below one (as `Path.is_relative_to`, for absolute
    normalized paths), by set lookups of its ancestors rather than a scan of `places`."""
    while path not in places:
        path, prev = os.path.dirname(path), path
        if path == prev:
            return False
    return True


def run_dirs() -> tuple[Path, ...]:
    """Every batch's folders a sandbox leaves out: those this uid's batches registered,
    live or not, wherever they are (their run directories, out dirs, repositories and
    task folders: runner/sandbox/registry.py), and the run directories (`runner-work`,
    `runner-work-<uid>`) found in the usual temp roots (`TEMP_ROOTS`, `$TMPDIR`, the
    runner's own temp dir, and `runner-work` in the folders right below them), which
    also finds other users' and older runners' batches. A root runner's batches keep
    each other out by file modes too, but an unprivileged runner's batches share one
    uid, and only the mount tree can separate them."""
    tops = (*TEMP_ROOTS, os.environ.get("TMPDIR") or "", tempfile.gettempdir())
    roots = sorted({Path(os.path.realpath(t)) for t in tops if os.path.isabs(t)})
    found: list[Path] = []
    for root in roots:
        if root.parts[1:2] and root.parts[1] in PROVIDED:
            continue  # the sandbox's own /tmp, /dev/shm: the host's is not shown
        try:
            entries = list(os.scandir(root))
        except OSError:
            continue
        below = [e.path for e in entries if e.is_dir(follow_symlinks=False)]
        names = [e.path for e in entries if _is_run_dirs(e.name)]
        for candidate in (*names, *(os.path.join(b, RUN_DIRS) for b in below)):
            with contextlib.suppress(OSError):
                if stat.S_ISDIR(os.lstat(candidate).st_mode):
                    found.append(Path(candidate))
    return tuple(dict.fromkeys([*found, *_registered(version())]))


@functools.lru_cache(maxsize=1)
def _registered(version: frozenset[tuple[str, int]]) -> tuple[Path, ...]:
    """`registered()` resolved, read again only when the registry changed (`version`):
    this runs before every command, and a registry of 540 kept out dirs cost 12 ms to
    read and resolve."""
    del version  # the cache's key
    return tuple(_real(registered()))


def _real(folders: Sequence[Path]) -> list[Path]:
    """Each folder's real path, as `os.path.realpath` gives it, resolving each distinct
    ancestor once. Looked up before every command, and a uid's registry can hold
    thousands of kept out dirs under a few shared ancestors: a realpath each cost 16 ms
    for 540 of them."""
    known: dict[str, str] = {"/": "/"}
    real: list[Path] = []
    for folder in folders:
        todo: list[str] = []
        here = str(folder)
        while here not in known:
            todo.append(here)
            here = os.path.dirname(here)
        for path in reversed(todo):
            joined = os.path.join(known[os.path.dirname(path)], os.path.basename(path))
            known[path] = os.path.realpath(joined) if os.path.islink(joined) else joined
        real.append(Path(known[str(folder)]))
    return real


def _is_run_dirs(name: str) -> bool:
    return name == RUN_DIRS or (name.startswith(RUN_DIRS + "-") and name[12:].isdigit())


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


def homes(home: Path | None) -> list[Path]:
    """Every home the invoking user may keep credentials in (`~/.gitconfig`,
    `~/.cargo/credentials.toml`, ...): the runner's HOME, its uid's home, and under sudo
    the calling user's. Hidden whole, whatever the uid the sandbox runs as."""
    found = [home] if home else []
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


def tools_in(homes: Sequence[Path], hidden: Sequence[Path]) -> list[Path]:
    """The home entries holding PATH directories (`~/.local`, `~/.cargo`, `~/.pyenv`):
    toolchains, shown again read-only so the commands the user installed still run; the
    credential files inside them stay hidden (`CREDENTIALS`). A PATH directory inside
    another hidden place (a virtualenv in the user's repository) is not shown, and a home
    entry holding such a place is narrowed to the PATH directory itself."""
    out: list[Path] = []
    places = {str(h) for h in hidden}
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(os.path.realpath(entry))
        if _within(str(real), places):
            continue
        for h in homes:
            if real != h and real.is_relative_to(h) and real.is_dir():
                top = h / real.relative_to(h).parts[0]
                out.append(real if any(x.is_relative_to(top) for x in hidden) else top)
    return list(dict.fromkeys(out))


def visible_path(value: str, hidden: Sequence[Path], shown: Sequence[Path]) -> str:
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


def object_stores(workspace: Path) -> list[Path]:
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


def existing(paths: Sequence[Path]) -> list[tuple[Path, bool]]:
    """(path, is_dir) of the paths that exist; symlinks are skipped, since bubblewrap
    would follow them to a place the policy never named."""
    out = []
    for p in paths:
        if os.path.lexists(p) and not os.path.islink(p):
            out.append((p, os.path.isdir(p)))
    return out


def resolv_under_run() -> Path | None:
    """Ubuntu's /etc/resolv.conf is a link into /run, which the sandbox replaces."""
    target = Path(os.path.realpath("/etc/resolv.conf"))
    return target if target.parts[1:2] == ("run",) and target.is_file() else None
