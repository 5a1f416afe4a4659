"""Questions a container engine answers before any run starts: is its program here, and
is an image on this machine. Synchronous and bounded, for the config pass's preflight
(`runner validate`), which runs before the event loop."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from runner.sandbox.engine import Engine

INSPECT_TIMEOUT_S = 30.0
"""How long `image inspect` may take before the engine counts as not answering."""


def which(name: str, env: Mapping[str, str]) -> str | None:
    """The program `name` (a name looked up on env's PATH, or an absolute path)."""
    if "/" in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    return shutil.which(name, path=env.get("PATH", os.defpath))


def image_missing(program: str, image: str, env: Mapping[str, str]) -> str | None:
    """Why `image` is not usable on this machine, or None when `program image inspect`
    finds it. podman and docker both answer `image inspect` (exit 0: there). The engine
    sees what a run's calls would (engine.py): the same daemon, none of the secrets."""
    tool = os.path.basename(program)
    try:
        done = subprocess.run(
            [program, "image", "inspect", "--format", "{{.Id}}", image],
            env=Engine(program, base_env=env).env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=INSPECT_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"`{tool} image inspect` did not answer within {INSPECT_TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"cannot run {program}: {exc.strerror or exc}"
    if done.returncode == 0:
        return None
    said = done.stderr.decode("utf-8", "replace").strip().splitlines()
    last = said[-1][:160] if said else ""
    return f"`{tool} image inspect` exit {done.returncode}" + (f": {last}" if last else "")
