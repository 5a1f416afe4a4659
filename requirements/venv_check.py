"""Is this interpreter's environment exactly the locks (requirements/dev.lock, model.lock
and swebench.lock)? `make setup` asks after every install and makes the venv anew when the
answer is no (a package uninstalled, added or changed by hand); `tests/project/test_locks.py`
asserts it.

    python requirements/venv_check.py             # exit 1 and say why when it is not
    python requirements/venv_check.py --snapshot  # after an install: remember each RECORD

The snapshot keeps the sha256 of every distribution's RECORD (the hashes of all its
installed files), so a package reinstalled later from another file, even at the locked
version, is seen too."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCKS = tuple(ROOT / "requirements" / f"{name}.lock" for name in ("dev", "model", "swebench"))
SNAPSHOT = Path(sys.prefix) / "install-records.json"
PROJECT = canonicalize_name(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"])


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
        if not m:
            raise ValueError(f"{name}: not a pinned, hashed requirement: {entry!r}")
        hashes = m[4].split()
        if not hashes or not all(re.fullmatch(r"--hash=sha256:[0-9a-f]{64}", h) for h in hashes):
            raise ValueError(f"{name}: {m[1]} has no sha256 hash")
        key = canonicalize_name(m[1])
        if key in lock:
            raise ValueError(f"{name}: {m[1]} is pinned twice")
        digests = frozenset(h.removeprefix("--hash=sha256:") for h in hashes)
        lock[key] = Pin(m[2], (m[3] or "").strip(), digests)
    return lock


def expected() -> dict[str, Pin]:
    """What the locks install on this machine (markers evaluated here)."""
    return {
        name: pin
        for lock in LOCKS
        for name, pin in read_lock(lock.read_text(), lock.name).items()
        if not pin.marker or Marker(pin.marker).evaluate({"extra": ""})
    }


def installed() -> dict[str, md.Distribution]:
    """Every distribution this interpreter sees, but runner itself."""
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        name = canonicalize_name(dist.metadata["Name"])
        if name != PROJECT:
            found.setdefault(name, dist)
    return found


def record_digest(dist: md.Distribution) -> str:
    return hashlib.sha256((dist.read_text("RECORD") or "").encode()).hexdigest()


def problems() -> list[str]:
    """How the environment differs from the locks, in words that say what to do."""
    want, have = expected(), installed()
    found = [
        f"{n} {d.version} is installed and not locked" for n, d in have.items() if n not in want
    ]
    found += [
        f"{n} {p.version} is locked and not installed" for n, p in want.items() if n not in have
    ]
    found += [
        f"{n} {d.version} is installed, the locks pin {want[n].version}"
        for n, d in have.items()
        if n in want and d.version != want[n].version
    ]
    if SNAPSHOT.is_file():
        records = json.loads(SNAPSHOT.read_text())
        found += [
            f"{n} was reinstalled after make setup (its files changed)"
            for n, d in have.items()
            if n in want and n in records and records[n] != record_digest(d)
        ]
    else:
        found.append(f"{SNAPSHOT.name} is missing: this venv was not made by make setup")
    return sorted(found)


def main(argv: list[str]) -> int:
    if argv == ["--snapshot"]:
        SNAPSHOT.write_text(json.dumps({n: record_digest(d) for n, d in installed().items()}))
        return 0
    found = problems()
    for line in found:
        print(f"venv_check: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
