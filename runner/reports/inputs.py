"""Every run's exact input on record: the task prompt as sent (after the variant's
`prompt_template`) with its follow-up turns, the instructions, and the tool schemas.
Each value is stored once per batch directory, as `inputs/<sha256>.json` named by the
hash of its bytes (written atomically, 0600, secrets redacted first), and each run's
report entry names its files (`RunReport.inputs`). A thousand runs of one prompt under
three variants keep four files, not three thousand copies.

Also the runner's own identity for `report.json`: its version, and the git commit of
its checkout when it runs from one."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from importlib import metadata
from pathlib import Path
from typing import Any

from runner.fsutil import atomic_write_text
from runner.redact import Redactor
from runner.reports.named import INPUTS_DIR

KINDS = ("prompt", "instructions", "tools")
"""What each run's `inputs` names, in this order."""


def stored(out_dir: Path, value: Any, redact: Redactor) -> str:
    """`value` (redacted) as a file of `inputs/`, written unless it is there already;
    returns its path relative to the report directory."""
    text = redact(json.dumps(value, ensure_ascii=False, sort_keys=True, indent=1)) + "\n"
    rel = f"{INPUTS_DIR}/{hashlib.sha256(text.encode()).hexdigest()}.json"
    path = out_dir / rel
    if not path.is_file():
        atomic_write_text(path, text)
    return rel


def record_inputs(
    out_dir: Path,
    redact: Redactor,
    *,
    prompts: list[str],
    instructions: str,
    developer_instructions: str | None,
    tools: list[dict[str, Any]],
) -> dict[str, str]:
    """Stores a run's three inputs; returns `{kind: path}` for its report entry."""
    values = {
        "prompt": {"prompts": prompts},
        "instructions": {
            "instructions": instructions,
            "developer_instructions": developer_instructions,
        },
        "tools": {"tools": tools},
    }
    return {kind: stored(out_dir, values[kind], redact) for kind in KINDS}


@functools.cache
def runner_identity() -> dict[str, str | None]:
    """`{"version": ..., "commit": ...}`: the installed distribution's version, and the
    commit of the git checkout this package is imported from (None when it is installed
    from a wheel). Read from the checkout's files, never a path."""
    try:
        version: str | None = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        version = None
    return {"version": version, "commit": _commit(Path(__file__).resolve().parents[2])}


DISTRIBUTION = "headless-agent-runner"


_SHA = re.compile(r"[0-9a-f]{40}")


def _commit(root: Path) -> str | None:
    """HEAD of the checkout at `root` (a worktree's `.git` file is followed), or None."""
    try:
        git = root / ".git"
        if git.is_file():
            line = git.read_text().strip()
            if not line.startswith("gitdir: "):
                return None
            git = (root / line.removeprefix("gitdir: ")).resolve()
        common = git
        if (git / "commondir").is_file():
            common = (git / (git / "commondir").read_text().strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if _SHA.fullmatch(head):
            return head
        ref = head.removeprefix("ref: ")
        for place in (git, common):
            if (place / ref).is_file():
                sha = (place / ref).read_text().strip()
                return sha if _SHA.fullmatch(sha) else None
        packed = common / "packed-refs"
        if packed.is_file():
            for entry in packed.read_text().splitlines():
                sha, _, name = entry.partition(" ")
                if name == ref and _SHA.fullmatch(sha):
                    return sha
    except (OSError, UnicodeDecodeError):
        return None
    return None
