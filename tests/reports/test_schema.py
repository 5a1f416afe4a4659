"""The documented report schema is the one the code writes."""

from __future__ import annotations

from runner.reports.schema import schema_text
from tests.support import paths

ROOT = paths.ROOT


def test_schema_file_is_current() -> None:
    on_disk = (ROOT / "docs" / "report.schema.json").read_text()
    assert on_disk == schema_text(), "run: python -m runner.reports.schema"
