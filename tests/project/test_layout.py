"""Tests you can find (tests/README.md): a test file named after a module sits where that
module sits, `runner/<package>/<module>.py` in `tests/<package>/test_<module>.py`, and
every module has that file (a new module comes with it)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tests.support import paths

CROSSING = {"e2e", "security", "project", "support", "fixtures", "golden", "config_corpus"}
"""Folders of tests that cross modules on purpose, or hold no tests of a module."""


def misplaced(root: Path, tests: Path) -> list[str]:
    """Test files named after one runner module (a unique module name) but not beside
    the mirror of its package."""
    where: dict[str, list[Path]] = defaultdict(list)
    for module in root.rglob("*.py"):
        if not module.name.startswith("_"):
            where[module.stem].append(module.parent.relative_to(root))
    found = []
    for test in sorted(tests.rglob("test_*.py")):
        folder = test.parent.relative_to(tests)
        if folder.parts[:1] and folder.parts[0] in CROSSING:
            continue
        homes = where.get(test.stem.removeprefix("test_"), [])
        if len(homes) == 1 and homes[0] != folder:
            want = Path("tests", homes[0], test.name)
            found.append(f"{Path('tests', folder, test.name)} belongs in {want}")
    return found


def test_a_modules_tests_sit_in_its_mirror() -> None:
    assert misplaced(paths.ROOT / "runner", paths.TESTS) == []


def unmirrored(root: Path, tests: Path) -> list[str]:
    """Modules (not packages' faces, not private ones) with no test file of their own."""
    found = []
    for module in sorted(root.rglob("*.py")):
        if module.name.startswith("_"):
            continue
        rel = module.relative_to(root)
        if not (tests / rel.parent / f"test_{rel.name}").exists():
            found.append(str(Path(root.name, rel)))
    return found


def test_every_module_has_its_mirror() -> None:
    missing = unmirrored(paths.ROOT / "runner", paths.TESTS)
    assert missing == [], f"give these a tests/<package>/test_<module>.py: {missing}"


def test_the_gap_check_sees_a_module_without_its_file(tmp_path: Path) -> None:
    (tmp_path / "runner/config").mkdir(parents=True)
    for name in ("config/load.py", "config/__init__.py", "config/_private.py", "run.py"):
        (tmp_path / "runner" / name).write_text("")
    (tmp_path / "tests/config").mkdir(parents=True)
    (tmp_path / "tests/config/test_load.py").write_text("")
    assert unmirrored(tmp_path / "runner", tmp_path / "tests") == ["runner/run.py"]


def test_the_check_sees_a_misplaced_file(tmp_path: Path) -> None:
    (tmp_path / "runner/config").mkdir(parents=True)
    (tmp_path / "runner/config/preflight.py").write_text("")
    (tmp_path / "runner/batch.py").write_text("")
    (tmp_path / "tests/e2e").mkdir(parents=True)
    for name in ("test_preflight.py", "test_batch.py", "e2e/test_preflight.py"):
        (tmp_path / "tests" / name).write_text("")
    assert misplaced(tmp_path / "runner", tmp_path / "tests") == [
        "tests/test_preflight.py belongs in tests/config/test_preflight.py"
    ]
