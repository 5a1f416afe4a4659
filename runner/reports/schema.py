"""Writes `docs/report.schema.json` from the report models: `python -m runner.reports.schema`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runner.reports.model import Report


def schema_text() -> str:
    return json.dumps(Report.model_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/report.schema.json")
    target.write_text(schema_text())
