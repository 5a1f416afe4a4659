"""The documented report schema is the one the code writes."""

from __future__ import annotations

import json

from runner.reports.model import Report, RunReport
from runner.reports.schema import field_docs, schema_text
from tests.support import paths

ROOT = paths.ROOT


def test_schema_file_is_current() -> None:
    on_disk = (ROOT / "docs" / "report.schema.json").read_text()
    assert on_disk == schema_text(), "run: python -m runner.reports.schema"


def test_a_fields_docstring_is_its_description_and_an_alias_keys_it() -> None:
    schema = json.loads(schema_text())
    runs = schema["$defs"]["RunReport"]["properties"]
    assert runs["status"]["description"].startswith(field_docs(RunReport)["status"][:20])
    assert "\n    " not in json.dumps(schema)  # docstrings are dedented (inspect.cleandoc)
    for name, info in RunReport.model_fields.items():
        key = info.alias or name
        assert key in runs, key
        if name in field_docs(RunReport):
            assert runs[key]["description"] == field_docs(RunReport)[name]


def test_field_docs_reads_only_the_string_right_below_a_field() -> None:
    docs = field_docs(Report)
    assert docs and all(isinstance(v, str) and v == v.strip() for v in docs.values())
    assert set(docs) <= set(Report.model_fields)
