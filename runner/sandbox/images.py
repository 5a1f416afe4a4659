"""The images a container environment starts from: built here, once, and reused.

No registry is assumed. The base image (`localhost/runner-base:bookworm`: Debian minbase
with git, python3 and CA certificates) is made with mmdebstrap from the Debian mirror the
machine's apt already uses, then imported; it carries the hash of its recipe as a label, so
it is rebuilt only when the recipe changes. A task's own `build:` folder is built under a
tag named by the hash of its content, so a batch builds it once however many runs use it,
and a later batch finds it built. Builds have a timeout and a cap on how many run at once
(per-sample rebuilds cost the peers' users gigabytes and hours).

Every image carries `io.runner.owner=runner`, so what the runner made can be told from
anyone else's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

from runner.errors import EnvironmentFault, UnsafeFileError
from runner.sandbox.engine import OWNER, OWNER_LABEL, RECIPE_LABEL, Engine

BASE_IMAGE = "localhost/runner-base:bookworm"
BASE_SUITE = "bookworm"
BASE_PACKAGES = ("git", "python3", "ca-certificates")
BUILD_REPO = "localhost/runner-build"
BASE_TIMEOUT_S = 1200.0
BUILD_TIMEOUT_S = 600.0
MAX_PARALLEL_BUILDS = 2
MAX_CONTEXT_FILES = 20_000
MAX_CONTEXT_BYTES = 1 << 30
APT_DIR = Path("/etc/apt")
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
"""Where the `debian-archive-keyring` package puts Debian's keys, on Debian and Ubuntu."""


# -- the Debian mirror apt uses ---------------------------------------------------------


@dataclass(frozen=True)
class AptSource:
    uri: str
    suites: tuple[str, ...]


def parse_one_line(text: str) -> list[AptSource]:
    """`deb [options] URI SUITE COMPONENT...` lines of a sources.list."""
    found: list[AptSource] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        line = re.sub(r"\[[^\]]*\]", " ", line)
        words = line.split()
        if len(words) >= 3 and words[0] == "deb":
            found.append(AptSource(words[1], (words[2],)))
    return found


def parse_deb822(text: str) -> list[AptSource]:
    """The stanzas of a `.sources` file with `Types: deb` (and `Enabled` not `no`)."""
    found: list[AptSource] = []
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, _, value = line.partition(":")
            fields[key.strip().lower()] = value.strip()
        if "deb" not in fields.get("types", "").split():
            continue
        if fields.get("enabled", "yes").lower() == "no":
            continue
        suites = tuple(fields.get("suites", "").split())
        found.extend(AptSource(uri, suites) for uri in fields.get("uris", "").split())
    return found


def apt_mirror(suite: str = BASE_SUITE, apt_dir: Path = APT_DIR) -> str:
    """The URI of the first `deb` source of apt that serves `suite`: the mirror this
    machine can reach. EnvironmentFault naming the files read when there is none."""
    files = [apt_dir / "sources.list"]
    parts = apt_dir / "sources.list.d"
    if parts.is_dir():
        files += sorted(parts.iterdir())
    for path in files:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        sources = parse_deb822(text) if path.suffix == ".sources" else parse_one_line(text)
        for source in sources:
            if suite in source.suites and source.uri.startswith(("http://", "https://")):
                return source.uri
    raise EnvironmentFault(
        f"no apt source of {apt_dir} serves Debian {suite!r}: the base image is built "
        "from the mirror apt uses (add one, e.g. a `deb` line for it in sources.list)"
    )


# -- the base image ----------------------------------------------------------------------


def base_recipe(suite: str = BASE_SUITE, packages: tuple[str, ...] = BASE_PACKAGES) -> str:
    """The hash of what the base image is made of (not of the mirror: any mirror serves
    the same suite)."""
    text = json.dumps({"suite": suite, "variant": "minbase", "include": sorted(packages)})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def image_labels(engine: Engine, image: str) -> dict[str, str] | None:
    """The labels of a local image, or None when there is no such image."""
    done = await engine.call(["image", "inspect", image])
    if done.code != 0:
        return None
    try:
        data = json.loads(done.stdout)
        first = data[0] if isinstance(data, list) and data else {}
        labels = first.get("Labels") or (first.get("Config") or {}).get("Labels") or {}
    except (ValueError, AttributeError):
        return None
    return {str(k): str(v) for k, v in labels.items()}


async def ensure_base_image(
    engine: Engine,
    *,
    image: str = BASE_IMAGE,
    timeout_s: float = BASE_TIMEOUT_S,
    apt_dir: Path = APT_DIR,
    mirror: str | None = None,
) -> bool:
    """Make `image` unless it is there with the current recipe. True when it was built.
    One process builds at a time; the others wait for it and then find it made. `mirror`
    is a Debian mirror for a machine whose apt has none (an Ubuntu CI runner); by default
    the one apt uses."""
    recipe = base_recipe()
    labels = await image_labels(engine, image)
    if labels is not None and labels.get(RECIPE_LABEL) == recipe:
        return False
    async with _build_lock("base"):
        labels = await image_labels(engine, image)
        if labels is not None and labels.get(RECIPE_LABEL) == recipe:
            return False
        mirror = mirror or apt_mirror(BASE_SUITE, apt_dir)
        with tempfile.TemporaryDirectory(prefix="runner-base-") as tmp:
            tar = Path(tmp, "base.tar")
            await _mmdebstrap(tar, mirror, timeout_s)
            await engine.check(
                [
                    "import",
                    "--change",
                    f"LABEL {OWNER_LABEL}={OWNER}",
                    "--change",
                    f"LABEL {RECIPE_LABEL}={recipe}",
                    str(tar),
                    image,
                ],
                timeout_s=timeout_s,
                retry=False,
            )
    return True


def mmdebstrap_argv(tar: Path, mirror: str, *, keyring: bool) -> list[str]:
    """`keyring`: Debian's keys are named, since off Debian (Ubuntu) apt does not trust
    them by default."""
    argv = ["mmdebstrap", "--quiet"]
    if keyring:
        argv.append(f"--keyring={DEBIAN_KEYRING}")
    return [
        *argv,
        "--variant=minbase",
        f"--include={','.join(BASE_PACKAGES)}",
        BASE_SUITE,
        str(tar),
        mirror,
    ]


async def _mmdebstrap(tar: Path, mirror: str, timeout_s: float) -> None:
    keyring = await anyio.Path(DEBIAN_KEYRING).is_file()
    argv = mmdebstrap_argv(tar, mirror, keyring=keyring)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
    try:
        with anyio.fail_after(timeout_s):
            done = await anyio.run_process(argv, env=env, check=False)
    except TimeoutError:
        raise EnvironmentFault(
            f"mmdebstrap did not make the base image within {timeout_s:g} s"
        ) from None
    except OSError as exc:
        raise EnvironmentFault(
            f"cannot run mmdebstrap ({exc.strerror or exc}): `make containers` installs it"
        ) from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip()[-2000:]
        raise EnvironmentFault(f"mmdebstrap failed (exit {done.returncode}): {said}")


@contextlib.asynccontextmanager
async def _build_lock(name: str) -> AsyncIterator[None]:
    """An exclusive lock between this user's processes (pytest workers, two batches)."""
    folder = Path(tempfile.gettempdir(), f"runner-images-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise EnvironmentFault(f"{folder}: not a folder of the runner's own")
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        await anyio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=True)
        yield
    finally:
        os.close(fd)


# -- images built from a task's folder ---------------------------------------------------


def context_hash(
    folder: Path, *, max_files: int = MAX_CONTEXT_FILES, max_bytes: int = MAX_CONTEXT_BYTES
) -> str:
    """The hash of a build folder: every path, executable bit and content, in order. A
    link, FIFO or device is refused (a link could name anything on the host), as is a
    folder past `max_files` or `max_bytes`."""
    digest = hashlib.sha256()
    size = 0
    for files, (rel, path, mode) in enumerate(_walk(folder), 1):
        if files > max_files:
            raise UnsafeFileError(f"{folder}: more than {max_files} files in a build folder")
        digest.update(f"{rel}\0{'d' if stat.S_ISDIR(mode) else oct(mode & 0o111)}\0".encode())
        if stat.S_ISREG(mode):
            with open(path, "rb", buffering=0) as f:
                while chunk := f.read(1 << 20):
                    size += len(chunk)
                    if size > max_bytes:
                        raise UnsafeFileError(f"{folder}: a build folder over {max_bytes} bytes")
                    digest.update(chunk)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _walk(top: Path) -> Iterator[tuple[str, Path, int]]:
    """(relative path, path, mode) of everything under `top`, sorted, never following a
    link; iterative, so no depth exhausts the stack."""
    todo = [""]
    while todo:
        rel_dir = todo.pop()
        with os.scandir(top / rel_dir if rel_dir else top) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                todo.append(rel)
            elif not stat.S_ISREG(mode):
                kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise UnsafeFileError(
                    f"{top / rel}: {kind}; a build folder holds files and folders only"
                )
            yield rel, Path(entry.path), mode


class Builder:
    """Builds folders with a Dockerfile for one batch: each content once, `max_parallel`
    at a time, each within `timeout_s`."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_parallel: int = MAX_PARALLEL_BUILDS,
        timeout_s: float = BUILD_TIMEOUT_S,
        network: str | None = None,
    ) -> None:
        self.engine = engine
        self.timeout_s = timeout_s
        self.network = network
        self._slots = anyio.Semaphore(max_parallel)
        self._locks: dict[str, anyio.Lock] = {}
        self.built: list[str] = []
        """Tags this builder built (not found made)."""

    async def image(self, folder: Path) -> str:
        """The tag of `folder`'s image, built now unless an image of its content exists."""
        if not (folder / "Dockerfile").is_file():
            raise EnvironmentFault(f"{folder}: no Dockerfile in the build folder")
        digest = await anyio.to_thread.run_sync(context_hash, folder)
        tag = f"{BUILD_REPO}:{digest}"
        lock = self._locks.setdefault(tag, anyio.Lock())
        async with lock:
            if await image_labels(self.engine, tag) is not None:
                return tag
            async with self._slots:
                await self._build(folder, tag, digest)
        self.built.append(tag)
        return tag

    async def _build(self, folder: Path, tag: str, digest: str) -> None:
        args = ["build", "-t", tag, "--label", f"{OWNER_LABEL}={OWNER}"]
        args += ["--label", f"{RECIPE_LABEL}={digest}"]
        if self.network:
            args += ["--network", self.network]
        done = await self.engine.call(
            [*args, str(folder)], timeout_s=self.timeout_s, retry=False, cap=64 << 10
        )
        if done.code != 0:
            raise EnvironmentFault(
                f"{folder}: the image build failed (exit {done.code}): {done.said()}"
            )


# -- pruning ---------------------------------------------------------------------------------


async def prune_built(
    engine: Engine, dry_run: bool = False, keep_base: bool = True
) -> tuple[list[str], list[str]]:
    """Remove the images runner built (labelled `io.runner.owner=runner`), never another
    image; the base image is kept unless `keep_base` is false (it takes minutes to make).
    Returns what was (or, with `dry_run`, would be) removed, and what the engine refused
    to remove (an image a container still uses), each with the engine's reason."""
    done = await engine.call(
        [
            "images",
            "--filter",
            f"label={OWNER_LABEL}={OWNER}",
            "--format",
            "{{.ID}} {{.Repository}}:{{.Tag}}",
        ]
    )
    if done.code != 0:
        raise EnvironmentFault(f"cannot list images ({engine.executable} said: {done.said()})")
    found: dict[str, list[str]] = {}
    for line in done.text.splitlines():
        image_id, _, name = line.strip().partition(" ")
        if image_id:
            found.setdefault(image_id, []).append(name)
    gone: list[str] = []
    refused: list[str] = []
    for image_id, names in sorted(found.items(), key=lambda kv: sorted(kv[1])):
        if keep_base and BASE_IMAGE in names:
            continue
        shown = ", ".join(sorted(n for n in names if not n.startswith("<none>"))) or image_id
        if not dry_run:
            rm = await engine.call(["rmi", image_id], retry=False)
            if rm.code != 0:
                refused.append(f"{shown}: {rm.said()}")
                continue
        gone.append(shown)
    return gone, refused


def main() -> None:
    """`python -m runner.sandbox.images` (`make base-image`): the base image made unless
    it is there with the current recipe, so a Dockerfile can say `FROM` it. The engine is
    `RUNNER_ENGINE` (podman by default); `RUNNER_DEBIAN_MIRROR` names a mirror for a
    machine whose apt serves no Debian."""
    engine = Engine(os.environ.get("RUNNER_ENGINE") or "podman")
    mirror = os.environ.get("RUNNER_DEBIAN_MIRROR") or None
    try:
        built = anyio.run(lambda: ensure_base_image(engine, mirror=mirror))
    except EnvironmentFault as exc:
        print(f"{BASE_IMAGE}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"{BASE_IMAGE}: {'built' if built else 'present, current recipe'}")


if __name__ == "__main__":
    main()
