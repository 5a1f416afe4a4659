"""Golden-file comparison shared by the tests: `UPDATE_GOLDEN=1` rewrites, otherwise compare."""

from __future__ import annotations

import os
from pathlib import Path

UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"


def check_golden(path: Path, actual: str) -> None:
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as f:
            f.write(actual)
    assert path.exists(), f"missing golden {path}; run with UPDATE_GOLDEN=1"
    with path.open(encoding="utf-8", newline="") as f:
        expected = f.read()
    assert actual == expected, f"{path.name} differs from golden; rerun with UPDATE_GOLDEN=1"
