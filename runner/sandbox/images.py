"""The images a container environment starts from: built here, once, and reused.

No registry is assumed. The base image (`localhost/runner-base:bookworm`: Debian minbase
with git, python3 and CA certificates) is made with mmdebstrap from the Debian mirror the
machine's apt already uses, then imported; it carries the hash of its recipe as a label, so
it is rebuilt only when the recipe changes. A task's own `build:` folder is built under a
tag named by the hash of what it is built from: the folder's content, the id of the local
image each `FROM` names (rebuilding the base image makes new tags for what is built on
it). So a batch builds it once however many runs use it, and a later batch finds it
built. Builds have a timeout and a cap on how many run at once (per-sample rebuilds cost
the peers' users gigabytes and hours), and run under a supervisor that ends them when
the batch dies, even by SIGKILL.

Every image carries `io.runner.owner=runner`, so what the runner made can be told from
anyone else's; a built one also names the uid, host and batch that built it, so `runner
images prune` removes only the user's own, and never one a live batch uses or will use
(the batch lists those in its live mark, `orphans.LiveBatch`). A batch at its start
removes the untagged images a dead batch's builds left.
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
from pathlib import Path

import anyio

from runner.errors import EnvironmentFault, UnsafeFileError
from runner.frozen import frozen
from runner.sandbox.engine import (
    BATCH_LABEL,
    HOST_LABEL,
    OWNER,
    OWNER_LABEL,
    RECIPE_LABEL,
    Engine,
)
from runner.sandbox.orphans import UID_LABEL, LiveBatch, batch_alive, images_in_use

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


@frozen
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
async def _build_lock(name: str, *, shared: bool = False) -> AsyncIterator[None]:
    """A lock between this user's processes (pytest workers, two batches), exclusive
    unless `shared`."""
    folder = Path(tempfile.gettempdir(), f"runner-images-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        raise EnvironmentFault(f"{folder}: not a folder of the runner's own")
    fd = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        await anyio.to_thread.run_sync(fcntl.flock, fd, op, abandon_on_cancel=True)
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
    for files, (rel, path, mode) in enumerate(walk_tree(folder), 1):
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


def walk_tree(top: Path) -> Iterator[tuple[str, Path, int]]:
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


_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-+]([^}]*))?\}|([A-Za-z_][A-Za-z0-9_]*))")


def from_refs(dockerfile: str) -> list[str]:
    """The images a Dockerfile's `FROM` lines name, in order: not `scratch`, not an
    earlier stage, `$VAR`s filled from the `ARG` defaults before the first `FROM` (runner
    passes no `--build-arg`). What cannot be filled stays as written, still a key."""
    lines: list[str] = []
    pending = ""
    for raw in dockerfile.splitlines():
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        lines.append(pending + stripped)
        pending = ""
    if pending:
        lines.append(pending)
    args: dict[str, str] = {}
    stages: set[str] = set()
    refs: list[str] = []
    for line in lines:
        words = line.split()
        instruction = words[0].upper() if words else ""
        if instruction == "ARG" and not refs and not stages:
            for word in words[1:]:
                name, _, default = word.partition("=")
                args[name] = default.strip("\"'")
        elif instruction == "FROM":
            rest = [w for w in words[1:] if not w.startswith("--")]
            if not rest:
                continue
            ref = _VAR.sub(lambda m: _fill(m, args), rest[0])
            if ref.lower() != "scratch" and ref.lower() not in stages:
                refs.append(ref)
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
    return refs


def _fill(m: re.Match[str], args: dict[str, str]) -> str:
    name = m.group(1) or m.group(3)
    value = args.get(name, "")
    if m.group(2) is not None and not value:
        return m.group(2)
    return value if name in args else m.group(0)


def build_key(context: str, bases: list[tuple[str, str | None]]) -> str:
    """The tag of a build: the folder's hash and each `FROM` with the id it had here
    (None: not here yet, the build pulls it). Not the build's network: a build that
    succeeds without one makes what it would with one."""
    text = json.dumps({"context": context, "from": bases})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


async def image_id(engine: Engine, image: str) -> str | None:
    """The id of a local image, or None when there is none by that name."""
    done = await engine.call(["image", "inspect", "--format", "{{.Id}}", image])
    return done.text or None if done.code == 0 else None


class Builder:
    """Builds folders with a Dockerfile for one batch: each content once, `max_parallel`
    at a time, each within `timeout_s`. `batch_id` labels what it builds; `mark` is the
    batch's live mark, where the tags it looks for are listed first."""

    def __init__(
        self,
        engine: Engine,
        *,
        max_parallel: int = MAX_PARALLEL_BUILDS,
        timeout_s: float = BUILD_TIMEOUT_S,
        network: str | None = None,
        batch_id: str = "",
        mark: LiveBatch | None = None,
    ) -> None:
        self.engine = engine
        self.timeout_s = timeout_s
        self.network = network
        self.batch_id = batch_id
        self.mark = mark
        self._slots = anyio.Semaphore(max_parallel)
        self._locks: dict[str, anyio.Lock] = {}
        self.built: list[str] = []
        """Tags this builder built (not found made)."""

    async def tag(self, folder: Path, ids: dict[str, str | None] | None = None) -> tuple[str, bool]:
        """The tag `folder`'s image has, and whether every `FROM` image is here (else the
        build pulls one, and its id is known only after). `ids`: the `FROM` images' ids
        already looked up, for many folders on one base."""
        if not (folder / "Dockerfile").is_file():
            raise EnvironmentFault(f"{folder}: no Dockerfile in the build folder")
        digest = await anyio.to_thread.run_sync(context_hash, folder)
        text = (folder / "Dockerfile").read_text(errors="replace")  # within context_hash's cap
        ids = {} if ids is None else ids
        bases: list[tuple[str, str | None]] = []
        for ref in from_refs(text):
            if ref not in ids:
                ids[ref] = await image_id(self.engine, ref)
            bases.append((ref, ids[ref]))
        key = build_key(digest, bases)
        return f"{BUILD_REPO}:{key}", all(found for _, found in bases)

    async def image(self, folder: Path, pinned: str | None = None) -> str:
        """The tag of `folder`'s image, built now unless an image of its content exists.
        `pinned`: the tag the batch decided on earlier; used as it is when that image
        exists, whatever the folder holds now (else the folder is hashed and built as it
        is, so a tag never names other content than its own)."""
        if pinned is not None and await image_labels(self.engine, pinned) is not None:
            if self.mark is not None:
                self.mark.uses([pinned])
            return pinned
        tag, complete = await self.tag(folder)
        lock = self._locks.setdefault(tag, anyio.Lock())
        async with lock:
            async with _build_lock("use", shared=True):  # not while a prune runs
                if self.mark is not None:
                    self.mark.uses([tag])
                if await image_labels(self.engine, tag) is not None:
                    return tag
            async with self._slots:
                await self._build(folder, tag)
        self.built.append(tag)
        if not complete:
            # A base was pulled: the next batch finds it here, so it computes the tag with
            # its id; the image gets that name too, lest that batch build it again.
            again, _ = await self.tag(folder)
            if again != tag:
                if self.mark is not None:
                    self.mark.uses([again])
                await self.engine.call(["tag", tag, again])
        return tag

    async def _build(self, folder: Path, tag: str) -> None:
        args = ["build", "-t", tag]
        for key, value in build_labels(tag.rpartition(":")[2], self.batch_id).items():
            args += ["--label", f"{key}={value}"]
        if self.network:
            args += ["--network", self.network]
        done = await self.engine.call(
            [*args, str(folder)],
            timeout_s=self.timeout_s,
            retry=False,
            cap=64 << 10,
            supervised=True,
        )
        if done.code != 0:
            raise EnvironmentFault(
                f"{folder}: the image build failed (exit {done.code}): {done.said()}"
            )


def build_labels(key: str, batch_id: str) -> dict[str, str]:
    """What a built image says of itself: the runner's, whose, from where and which batch."""
    return {
        OWNER_LABEL: OWNER,
        RECIPE_LABEL: key,
        UID_LABEL: str(os.geteuid()),
        HOST_LABEL: os.uname().nodename,
        BATCH_LABEL: batch_id,
    }


# -- what runner built, kept or removed ------------------------------------------------------


@frozen
class Built:
    """An image labelled as the runner's."""

    id: str
    names: tuple[str, ...]
    labels: dict[str, str]

    @property
    def short_id(self) -> str:
        return self.id.removeprefix("sha256:")[:12]

    @property
    def shown(self) -> str:
        return ", ".join(self.names) or self.short_id


async def runner_images(engine: Engine, *, dangling: bool = False) -> list[Built]:
    """Every image labelled `io.runner.owner=runner` (only the untagged with `dangling`)."""
    args = ["images", "-q", "--no-trunc", "--filter", f"label={OWNER_LABEL}={OWNER}"]
    if dangling:
        args += ["--filter", "dangling=true"]
    done = await engine.call(args)
    if done.code != 0:
        raise EnvironmentFault(f"cannot list images ({engine.executable} said: {done.said()})")
    ids = list(dict.fromkeys(done.text.split()))
    if not ids:
        return []
    shown = await engine.call(["image", "inspect", *ids])
    try:
        data = json.loads(shown.stdout)
    except ValueError:
        data = []  # one went away between the two calls: found again next time
    found: list[Built] = []
    for item in data if isinstance(data, list) else []:
        got = item.get("Labels") or (item.get("Config") or {}).get("Labels") or {}
        tags = item.get("RepoTags") or []
        names = tuple(sorted(str(t) for t in tags if not str(t).startswith("<none>")))
        labels = {str(k): str(v) for k, v in got.items()}
        if labels.get(OWNER_LABEL) == OWNER:
            found.append(Built(str(item.get("Id", "")), names, labels))
    return sorted(found, key=lambda b: (b.names, b.id))


async def reap_builds(engine: Engine, folder: Path | None = None) -> list[str]:
    """Remove the untagged images of this uid's and host's dead batches' builds (a build
    killed with its batch may still have finished, then lost its tag to the next batch's
    build of the same folder); what was removed."""
    gone: list[str] = []
    for image in await runner_images(engine, dangling=True):
        why = _removable(image, images_in_use(folder), folder)
        if why is not None and why[0]:
            done = await engine.call(["rmi", image.id], retry=False)
            if done.code == 0:
                gone.append(f"image {image.short_id}")
    return gone


def _removable(image: Built, in_use: set[str], folder: Path | None) -> tuple[bool, str] | None:
    """(whether prune may remove it, why), or None for the base image."""
    got = image.labels
    if BASE_IMAGE in image.names:
        return None
    if UID_LABEL not in got or BATCH_LABEL not in got:
        return False, (
            "built by an older runner, whose images name no user or batch; remove it by hand "
            f"(rmi {image.short_id}) if no batch of yours uses it"
        )
    if got[UID_LABEL] != str(os.geteuid()):
        return False, f"built by another user (uid {got[UID_LABEL]})"
    if got.get(HOST_LABEL) != os.uname().nodename:
        return False, f"built on {got.get(HOST_LABEL)!r}, whose live batches are not seen here"
    if in_use & {image.id, *image.names}:
        return False, "a live batch uses it"
    if batch_alive(got[BATCH_LABEL], folder):
        return False, f"built by batch {got[BATCH_LABEL]}, which is running"
    if not image.names:
        return True, f"left untagged by batch {got[BATCH_LABEL]}'s build, which is over"
    return True, "yours, and no live batch uses it"


@frozen
class Pruned:
    gone: list[str]
    """`name: why`, removed (or, dry run, to be)."""
    kept: list[str]
    """`name: why` of every other image labelled as the runner's, the base image aside."""
    refused: list[str]
    """`name: the engine's reason` (a container still uses it)."""


async def prune_built(
    engine: Engine, dry_run: bool = False, keep_base: bool = True, folder: Path | None = None
) -> Pruned:
    """Remove the images runner built for this user on this host, labelled so, that no
    live batch of theirs uses or listed as one it will use; never another image. The base
    image is kept unless `keep_base` is false (it takes minutes to make). `folder`: where
    the live batches' marks are (`orphans.batch_folder()`)."""
    gone: list[str] = []
    kept: list[str] = []
    refused: list[str] = []
    # Exclusive: a batch lists a tag and looks it up under the shared lock, so none finds
    # an image here that is then removed under it.
    async with _build_lock("use"):
        in_use = images_in_use(folder)
        for image in await runner_images(engine):
            why = _removable(image, in_use, folder)
            if why is None:
                if keep_base:
                    continue
                why = (True, "the base image (asked for)")
            removable, reason = why
            if not removable:
                kept.append(f"{image.shown}: {reason}")
                continue
            if not dry_run:
                rm = await engine.call(["rmi", image.id], retry=False)
                if rm.code != 0:
                    refused.append(f"{image.shown}: {rm.said()}")
                    continue
            gone.append(f"{image.shown}: {reason}")
    return Pruned(gone, kept, refused)


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
