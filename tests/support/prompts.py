"""Golden files of the prompt and the small file helpers the prompt tests share."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support import golden_files, paths

GOLDEN = paths.GOLDEN / "prompt"


def check_golden(name: str, actual: str) -> None:
    golden_files.check_golden(GOLDEN / name, actual)


def git_init(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)
    return path


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path
