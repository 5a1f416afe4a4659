"""Where the checkout's files are, for tests in any folder: a test that moves keeps its paths."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
FIXTURES = TESTS / "fixtures"
