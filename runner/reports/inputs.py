"""Every run's exact input on record: the task prompt as sent (after the variant's
`prompt_template`) with its follow-up turns, the instructions, the tool schemas, and the
AGENTS.md text the model was given.
Each value is stored once per batch directory, as `inputs/<sha256>.json` named by the
hash of its bytes (written atomically, 0600, secrets redacted first; not synced to the
disk, so written again when a crash left it holding other bytes), and each run's report
entry names its files (`RunReport.inputs`). A thousand runs of one prompt under three
variants keep four files, not three thousand copies.

Also the runner's own identity for `report.json`: its version, and the git commit of
its checkout when it runs from one."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from runner import hostfs
from runner.checkout import runner_commit
from runner.fsutil import atomic_write_text
from runner.redact import Redactor
from runner.reports.named import INPUTS_DIR
from runner.version import VERSION

KINDS = ("prompt", "instructions", "tools", "agents_md")
"""What each run's `inputs` names, in this order."""


def stored(out_dir: Path, value: Any, redact: Redactor) -> str:
    """`value` (redacted) as a file of `inputs/`, written unless it is there already;
    returns its path relative to the report directory."""
    text = redact(json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)) + "\n"
    rel = f"{INPUTS_DIR}/{hashlib.sha256(text.encode()).hexdigest()}.json"
    path = out_dir / rel
    if not _holds(path, text):
        _clear(path.parent, folder=True)
        _clear(path, folder=False)
        # Not synced: before a run's first request (8 syncs of 1-3 ms each for 4 files),
        # and a file a crash left empty or cut holds other bytes, so it is written again.
        atomic_write_text(path, text, durable=False)
    return rel


def _clear(path: Path, *, folder: bool) -> None:
    """What stands at `path` in the out dir and is not ours to write through: a link is
    removed, not followed; a folder where a file belongs, or a file where the folder
    belongs, goes."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode) or stat.S_ISDIR(mode) != folder:
        if stat.S_ISDIR(mode):
            hostfs.remove_tree(path)
        else:
            path.unlink()


def _holds(path: Path, text: str) -> bool:
    """`path` is a regular file of ours (not a link, mode 0600, one name) with exactly
    `text`, in a folder that is no link."""
    data = text.encode()
    try:
        if stat.S_ISLNK(os.lstat(path.parent).st_mode):
            return False
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        if stat.S_IMODE(st.st_mode) != 0o600 or st.st_nlink != 1:
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return hostfs.read_bytes(fd, len(data) + 1) == data
    except OSError:
        return False
    finally:
        os.close(fd)


def record_inputs(
    out_dir: Path,
    redact: Redactor,
    *,
    prompts: list[str],
    instructions: str,
    developer_instructions: str | None,
    tools: list[dict[str, Any]],
    agents_md: str | None = None,
) -> dict[str, str]:
    """Stores a run's inputs; returns `{kind: path}` for its report entry. `agents_md`:
    the AGENTS.md text of the contextual user message, without its wrapper (which names
    the workspace's path on this machine); null when there was none."""
    values = {
        "prompt": {"prompts": prompts},
        "instructions": {
            "instructions": instructions,
            "developer_instructions": developer_instructions,
        },
        "tools": {"tools": tools},
        "agents_md": {"agents_md": agents_md},
    }
    return {kind: stored(out_dir, values[kind], redact) for kind in KINDS}


@functools.cache
def runner_identity() -> dict[str, str | None]:
    """`{"version": ..., "commit": ...}`: the package's version (pyproject.toml takes the
    distribution's from it, so they agree; not looked up in the installed metadata, which
    scans site-packages: 7 ms of every start), and the commit it was built from or the
    checkout it is imported from (`checkout`)."""
    return {"version": VERSION, "commit": runner_commit()}
