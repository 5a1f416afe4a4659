"""The task file's `environment:` section: where a run's commands happen (issue 26).

Each field is checked alone by the model; what depends on several fields (a backend and
the fields that apply to it) is checked by `setting_problems` on the merged value, since a
variant's section merges over the task's over the defaults' field by field and no single
layer has to be complete. Nothing here runs a program: the engines on this machine are
looked at by envcheck.py, for the config pass's preflight.
"""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from runner.config.base import Frozen, PathText, StrictFloat, StrictInt
from runner.config.text import esc, short
from runner.vocabulary import EnvironmentBackend

CONTAINER_BACKENDS = ("podman", "docker")
DOCKERFILES = ("Dockerfile", "Containerfile")
MAX_BUILD_ENTRIES = 100_000
"""Files a build folder may hold before validate stops looking for links out of it."""


def _image(v: str) -> str:
    # The engines' own grammar is looser than this (registry:port/path:tag@digest); what
    # matters here is no space or control character and no leading '-' (read as a flag).
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}", v):
        raise ValueError(
            "must be an image reference such as localhost/runner-base:bookworm or "
            "docker.io/library/python:3.12 (letters, digits and . _ / : @ + -), "
            f"got {esc(short(v))!r}"
        )
    return v


def _workdir(v: str) -> str:
    if not v.startswith("/") or "\0" in v or "\\" in v:
        raise ValueError(f"must be an absolute POSIX path such as /testbed, got {esc(short(v))!r}")
    if posixpath.normpath(v) != v or v.startswith("//"):
        raise ValueError(f"must be written plainly (no '..', '.', '//' or trailing '/'): {v!r}")
    if v == "/":
        raise ValueError("must be a folder of its own, not / (the diff would be the whole image)")
    return v


def _user(v: str) -> str:
    name = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}"
    if not re.fullmatch(rf"{name}(:{name})?", v):
        raise ValueError(f"must be a user name or uid, optionally :group or :gid, got {v!r}")
    return v


def _dns_label(v: str) -> str:
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", v):
        raise ValueError(
            "must be a Kubernetes name: up to 63 lowercase letters, digits and '-', "
            f"starting and ending with a letter or digit, got {esc(short(v))!r}"
        )
    return v


def _dns_subdomain(v: str) -> str:
    if len(v) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", v):
        raise ValueError(
            "must be a Kubernetes name: lowercase letters, digits, '-' and '.', starting "
            f"and ending with a letter or digit, got {esc(short(v))!r}"
        )
    return v


ENGINE_PROGRAMS = ("podman", "docker", "podman-remote", "nerdctl")
"""What `executable` may name. Only a name, found on the PATH of whoever starts runner:
`validate` and every run start the program, so a path in a task file (which a pull request
may change) would run any program its author put on the machine."""


def _executable(v: str) -> str:
    if v not in ENGINE_PROGRAMS:
        raise ValueError(
            f"must be one of {', '.join(ENGINE_PROGRAMS)} (a name found on PATH; to use a "
            f"program elsewhere, put its folder first on PATH), got {esc(short(v))!r}"
        )
    return v


def _artifact(v: str) -> str:
    if not v or v.startswith("/") or "\0" in v or "\\" in v:
        raise ValueError(
            f"must be a path relative to workdir, such as logs/out.txt, got {esc(short(v))!r}"
        )
    if ".." in v.split("/") or posixpath.normpath(v) in (".", ""):
        raise ValueError(f"must name something inside workdir (no '..'), got {v!r}")
    return v


MAX_ULIMITS: dict[str, int] = {
    "nofile": 1 << 20,
    "nproc": 1 << 22,
    "core": 1 << 36,
    "stack": 1 << 30,
}
"""The limits `--ulimit` may set, and the highest value of each (no `unlimited`)."""

_TMPFS_FLAGS = frozenset({"rw", "ro", "exec", "noexec", "nosuid", "nodev", "notmpcopyup"})
_TMPFS_VALUES = {
    "size": r"[0-9]{1,12}[kmgKMG%]?",
    "mode": r"[0-7]{3,4}",
    "uid": r"[0-9]{1,10}",
    "gid": r"[0-9]{1,10}",
    "nr_inodes": r"[0-9]{1,12}[kmgKMG]?",
}
_NAME = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST = rf"{_NAME}(\.{_NAME})*"

RUN_ARGS_ALLOWED = (
    "--tmpfs=/PATH[:OPTS]",
    "--shm-size=SIZE",
    "--ulimit=nofile|nproc|core|stack=SOFT[:HARD]",
    "--add-host=NAME:IP",
    "--hostname=NAME",
    "--dns=IP",
    "--platform=OS/ARCH",
    "--pull=never|missing",
    "--read-only",
    "--read-only-tmpfs",
    "--cap-drop=CAP[,CAP]",
    "--security-opt=no-new-privileges",
    "--env=NAME=VALUE",
)
"""What `run_args` may hold: options that only shape the inside of the container. Every
other option is refused, since most reach the host some way (a mount, a hook, a file the
engine reads or writes as its own user, a host namespace or device)."""


def _path_in_container(v: str) -> str | None:
    if not v.startswith("/") or posixpath.normpath(v) != v or v.startswith("//"):
        return "must be an absolute path inside the container written plainly, such as /scratch"
    if v == "/" or not re.fullmatch(r"[A-Za-z0-9._/@+-]+", v):
        return "must be a folder below / named with letters, digits and . _ / @ + -"
    return None


def _tmpfs(v: str) -> str | None:
    path, _, opts = v.partition(":")
    wrong = _path_in_container(path)
    if wrong is not None:
        return wrong
    for opt in opts.split(",") if opts else ():
        key, eq, val = opt.partition("=")
        if not eq and key in _TMPFS_FLAGS:
            continue
        if eq and key in _TMPFS_VALUES and re.fullmatch(_TMPFS_VALUES[key], val):
            continue
        return (
            f"option {esc(short(opt))!r} is not one of "
            f"{', '.join(sorted(_TMPFS_FLAGS))}, {'=N, '.join(_TMPFS_VALUES)}=N"
        )
    return None


def _ulimit(v: str) -> str | None:
    m = re.fullmatch(r"([a-z]+)=([0-9]{1,20})(:([0-9]{1,20}))?", v)
    if m is None or m.group(1) not in MAX_ULIMITS:
        return f"must be NAME=SOFT[:HARD] with NAME one of {', '.join(MAX_ULIMITS)}"
    top = MAX_ULIMITS[m.group(1)]
    soft = int(m.group(2))
    hard = int(m.group(4)) if m.group(4) else soft
    lowest = 0 if m.group(1) == "core" else 1
    if not lowest <= soft <= hard <= top:
        return f"{m.group(1)} must be {lowest}..{top}, soft no more than hard"
    return None


def _ip(v: str) -> str | None:
    try:
        ipaddress.ip_address(v)
    except ValueError:
        return "must be an IPv4 or IPv6 address"
    return None


def _add_host(v: str) -> str | None:
    name, colon, ip = v.partition(":")
    if not colon or not re.fullmatch(_HOST, name) or len(name) > 253:
        return "must be NAME:IP, such as db.local:10.0.0.5"
    return _ip(ip)


def _hostname(v: str) -> str | None:
    return None if re.fullmatch(_HOST, v) and len(v) <= 253 else "must be a host name"


def _platform(v: str) -> str | None:
    ok = re.fullmatch(r"[a-z0-9]{1,16}/[a-z0-9_]{1,16}(/[a-z0-9]{1,16})?", v)
    return None if ok else "must be OS/ARCH[/VARIANT], such as linux/amd64"


def _cap_drop(v: str) -> str | None:
    caps = v.split(",")
    ok = all(re.fullmatch(r"(CAP_)?[A-Z_]{2,32}|ALL", c.upper()) for c in caps)
    return None if ok else "must be capability names, such as ALL or NET_RAW,MKNOD"


def _env(v: str) -> str | None:
    # --env=NAME alone (or NAME*) copies the runner's own variable, API keys included.
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}=[^\0\n]*", v, flags=re.DOTALL):
        return "must be NAME=VALUE (a name alone would copy the runner's own variable)"
    return None


def _one_of(*values: str) -> Callable[[str], str | None]:
    def check(v: str) -> str | None:
        return None if v in values else f"must be {' or '.join(values)}"

    return check


_RUN_ARG_VALUES: dict[str, Callable[[str], str | None] | None] = {
    "tmpfs": _tmpfs,
    "shm-size": lambda v: (
        None if re.fullmatch(r"[0-9]{1,12}[bkmgBKMG]?", v) else ("must be a size such as 256m")
    ),
    "ulimit": _ulimit,
    "add-host": _add_host,
    "hostname": _hostname,
    "dns": _ip,
    "platform": _platform,
    "pull": _one_of("never", "missing"),
    "read-only": None,
    "read-only-tmpfs": None,
    "cap-drop": _cap_drop,
    "security-opt": _one_of("no-new-privileges", "no-new-privileges:true"),
    "env": _env,
}
"""Each allowed option and the check of its value; None: a flag that takes no value."""


def _run_arg(v: str) -> str:
    m = re.fullmatch(r"--([a-z0-9][a-z0-9-]*)(=(.*))?", v, flags=re.DOTALL)
    if m is None:
        raise ValueError(
            f"{esc(short(v))!r}: each entry must be one long option, --name or --name=value "
            "(short options and separate values are refused: write --tmpfs=/scratch)"
        )
    name, value = m.group(1), m.group(3)
    allowed = "; allowed: " + ", ".join(RUN_ARGS_ALLOWED)
    if name not in _RUN_ARG_VALUES:
        raise ValueError(
            f"--{name} is refused: run_args takes only options that stay inside the "
            f"container{allowed}"
        )
    check = _RUN_ARG_VALUES[name]
    if check is None:
        if value is not None:
            raise ValueError(f"--{name} takes no value, got {esc(short(v))!r}{allowed}")
        return v
    wrong = "needs a value (--name=value)" if value is None else check(value)
    if wrong is not None:
        raise ValueError(f"{esc(short(v))!r} is refused: --{name} {wrong}{allowed}")
    return v


Image = Annotated[str, AfterValidator(_image)]
Workdir = Annotated[str, AfterValidator(_workdir)]


class EnvironmentSettings(Frozen):
    """Where a run's commands and file edits happen. Merged field by field like `limits`:
    a variant's over the task's over the defaults'. `image` and `build` are one choice: a
    layer that writes either replaces both."""

    ONE_OF: ClassVar[tuple[frozenset[str], ...]] = (frozenset({"image", "build"}),)

    backend: EnvironmentBackend = "local"
    """`local`: bubblewrap over the host (see Sandbox); `podman`, `docker`: a container of
    `image`; `kubernetes`: a Pod of `image` (pulled from a registry by the cluster)."""
    image: Image | None = None
    """An image on this machine (podman, docker) or one the cluster can pull."""
    build: PathText | None = None
    """A folder holding a Dockerfile (or Containerfile), relative to the task file, built
    once per batch and reused (podman, docker)."""
    workdir: Workdir | None = None
    """Where the work is inside the image, e.g. /testbed (default: the image's WORKDIR)."""
    network: Literal["none", "bridge"] = "none"
    """`none` (default): no network at all while the agent works, since the model client
    stays on the host. `bridge`: the engine's own NAT network. `host` is refused: it would
    reach the host's loopback services (local model servers, the push-token forwarder)."""
    cpus: Annotated[StrictFloat, Field(gt=0, le=1024)] | None = None
    memory_mb: Annotated[StrictInt, Field(ge=16, le=16 * 1024 * 1024)] | None = None
    timeout_s: Annotated[StrictFloat, Field(gt=0, le=24 * 3600)] = 600.0
    """For starting the environment, and for building `build`, each."""
    user: Annotated[str, AfterValidator(_user)] | None = None
    """Who runs the commands (default: the image's USER); numeric uid[:gid] for kubernetes."""
    run_args: tuple[Annotated[str, AfterValidator(_run_arg)], ...] = ()
    """Extra options of `podman run` / `docker run`, each one long option (`--name=value`),
    from the short list RUN_ARGS_ALLOWED; every other is refused (README)."""
    executable: Annotated[str, AfterValidator(_executable)] | None = None
    """The podman or docker program (default: the backend's name, found on PATH)."""
    namespace: Annotated[str, AfterValidator(_dns_label)] | None = None
    """kubernetes: the namespace of the run's Pods (default: kubectl's current one)."""
    service_account: Annotated[str, AfterValidator(_dns_subdomain)] | None = None
    """kubernetes: the service account the Pods run as."""
    artifacts: tuple[Annotated[str, AfterValidator(_artifact)], ...] = ()
    """Paths relative to workdir copied out at the end of the run, to `OUT/artifacts/<run>/`."""

    @model_validator(mode="after")
    def _image_or_build(self) -> EnvironmentSettings:
        if self.image is not None and self.build is not None:
            raise ValueError("give `image` or `build`, not both")
        return self


APPLIES: dict[str, frozenset[str]] = {
    "local": frozenset({"backend", "artifacts"}),
    "podman": frozenset(EnvironmentSettings.model_fields) - {"namespace", "service_account"},
    "kubernetes": frozenset(EnvironmentSettings.model_fields) - {"build", "run_args", "executable"},
}
APPLIES["docker"] = APPLIES["podman"]
"""The fields each backend uses; any other written in a run's merged section is refused."""

_WHY_NOT = {
    ("kubernetes", "build"): "the cluster pulls images from a registry: build and push the "
    "image, then name it in `image`",
    ("local", "network"): "local commands reach the network as `network_access` says",
    ("local", "workdir"): "a local run works in its own checkout of `repo`",
}


def _is_set(env: EnvironmentSettings, name: str) -> bool:
    return name in env.model_fields_set and getattr(env, name) not in (None, ())


def setting_problems(env: EnvironmentSettings) -> list[tuple[str, str]]:
    """(field, what is wrong) of a run's merged `environment:` section."""
    backend = env.backend
    found: list[tuple[str, str]] = []
    for name in EnvironmentSettings.model_fields:
        if _is_set(env, name) and name not in APPLIES[backend]:
            users = [b for b in ("local", "podman", "docker", "kubernetes") if name in APPLIES[b]]
            named = ", ".join(users[:-1]) + f" and {users[-1]}" if len(users) > 1 else users[0]
            why = _WHY_NOT.get((backend, name), f"it is for {named}")
            found.append(
                (name, f"does not apply to backend {backend}: {why}; remove it (or write null)")
            )
    if backend in CONTAINER_BACKENDS and env.image is None and env.build is None:
        found.append(
            (
                "backend",
                f"backend {backend} needs `image` (an image on this machine) or `build` "
                "(a folder with a Dockerfile, relative to the task file)",
            )
        )
    if backend == "kubernetes":
        if env.image is None:
            found.append(("backend", "backend kubernetes needs `image`, pullable by the cluster"))
        if env.user is not None and not re.fullmatch(r"\d+(:\d+)?", env.user):
            found.append(("user", f"must be a numeric uid[:gid] for kubernetes, got {env.user!r}"))
    return found


def build_problem(folder: Path) -> str | None:
    """What keeps `folder` from being a build context, or None: it must be a folder with
    a Dockerfile (or Containerfile), and no link in it may lead out of it (the engine
    would copy what it points at into the image)."""
    try:
        top = folder.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{esc(str(folder))} is not a directory"
    if not top.is_dir():
        return f"{esc(str(folder))} is not a directory"
    if not any(_regular(top / name) for name in DOCKERFILES):
        return f"{esc(str(top))} holds no Dockerfile (or Containerfile) as a regular file"
    seen = 0
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            seen += 1
            if seen > MAX_BUILD_ENTRIES:
                return f"{esc(str(top))} holds more than {MAX_BUILD_ENTRIES:,} files"
            path = Path(root, name)
            if not path.is_symlink():
                continue
            target = Path(os.path.realpath(path))
            if target != top and top not in target.parents:
                return (
                    f"{esc(str(path.relative_to(top)))} in {esc(str(top))} is a link out of the "
                    f"build folder (to {esc(str(target))}); copy what it points at into the folder"
                )
    return None


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()
