"""Helpers used across modules are public (issue 29): no module of `runner` imports an
underscore name from another module of `runner`."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import paths


def private_imports(root: Path) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("runner"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        rel = path.relative_to(root.parent)
                        found.append(f"{rel}:{node.lineno}: {node.module}.{alias.name}")
    return found


def test_no_module_imports_another_modules_private_name() -> None:
    assert private_imports(paths.ROOT / "runner") == []


def test_the_check_sees_one(tmp_path: Path) -> None:
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "a.py").write_text("from runner.b import _helper, public\n")
    assert private_imports(tmp_path / "runner") == ["runner/a.py:1: runner.b._helper"]
