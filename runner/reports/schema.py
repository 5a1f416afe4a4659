"""Writes `docs/report.schema.json` from the report models: `python -m runner.reports.schema`.

A field's description is the docstring written under it in `runner/reports/model.py`. The
models do not ask pydantic for those (`use_attribute_docstrings`): pydantic finds them by
reading and parsing the module's source once per class, at every import, and every batch
imports the report model to write report.json (about 40% of that model's build time).
The schema, the one place they show, reads them here instead."""

from __future__ import annotations

import ast
import inspect
import json
import sys
from functools import cache
from pathlib import Path
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from runner.reports.model import Report


@cache
def _tree(module: str) -> ast.Module:
    """A module's source parsed once, for all of its classes."""
    return ast.parse(inspect.getsource(sys.modules[module]))


@cache
def field_docs(cls: type) -> dict[str, str]:
    """The string statement right after each annotated field of `cls`'s own body."""
    found: dict[str, str] = {}
    for node in ast.walk(_tree(cls.__module__)):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            body = node.body
            for field, after in zip(body, body[1:], strict=False):
                if (
                    isinstance(field, ast.AnnAssign)
                    and isinstance(field.target, ast.Name)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    found[field.target.id] = inspect.cleandoc(after.value.value)
    return found


class _Documented(GenerateJsonSchema):
    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        out = super().model_schema(schema)
        cls = schema["cls"]
        fields = getattr(cls, "model_fields", {})
        properties = out.get("properties", {})
        for klass in reversed(cls.__mro__):
            if not klass.__module__.startswith("runner."):
                continue
            for name, doc in field_docs(klass).items():
                info = fields.get(name)
                key = info.alias if info and info.alias else name
                if key in properties and "description" not in properties[key]:
                    properties[key]["description"] = doc
        return out


def schema_text() -> str:
    schema: dict[str, Any] = Report.model_json_schema(schema_generator=_Documented)
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/report.schema.json")
    target.write_text(schema_text())
