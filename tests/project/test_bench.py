"""bench/ holds to issue 29: a benchmark of what a user runs goes through the public API
(`runner.__all__`), and one that times a single component names, in its docstring, the
private modules it imports ("measures X directly (runner.sse): no public API gives it").
No benchmark imports `tests`: the test suite's support code is not bench's to lean on."""

from __future__ import annotations

import ast
import re

import pytest

import runner
from tests.support import paths

BENCH = paths.ROOT / "bench"
DECLARED = "no public API gives it"


def _imported(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, dotted module) of every import, `from runner import x` giving `runner.x`
    unless `x` is a public name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "runner":
                found += [
                    (node.lineno, "runner" if a.name in runner.__all__ else f"runner.{a.name}")
                    for a in node.names
                ]
            else:
                found.append((node.lineno, node.module))
    return found


def problems(name: str, source: str) -> list[str]:
    """What `source` (a bench file) imports against the rules, each with its line."""
    tree = ast.parse(source)
    doc = " ".join((ast.get_docstring(tree) or "").split())  # as wrapped, one line
    out = []
    for line, module in _imported(tree):
        where = f"bench/{name}:{line}"
        if module == "tests" or module.startswith("tests."):
            out.append(f"{where}: imports {module} (bench must not lean on tests)")
        elif module.startswith("runner.") and module != "runner.version":
            if DECLARED not in doc:
                out.append(
                    f"{where}: imports {module}, but its docstring does not say {DECLARED!r}"
                )
            elif not re.search(rf"(?<![\w.]){re.escape(module)}(?!\w|\.\w)", doc):
                out.append(f"{where}: imports {module}, not named in its docstring")
    return out


def test_every_bench_file_keeps_to_the_public_api_or_names_what_it_measures() -> None:
    found = []
    for path in sorted(BENCH.glob("*.py")):
        found += problems(path.name, path.read_text())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"""A batch."""\nimport runner\nfrom runner import load_runs, run_batch\n', []),
        (
            '"""A batch."""\nfrom runner.batch import run_batch\n',
            ["bench/x.py:2: imports runner.batch"],
        ),
        ('"""A batch."""\nfrom runner import batch\n', ["bench/x.py:2: imports runner.batch"]),
        (
            '"""X."""\nfrom tests.support.loopback import Reply\n',
            ["bench/x.py:2: imports tests.support"],
        ),
        ('"""X."""\nimport tests\n', ["bench/x.py:2: imports tests "]),
        (
            f'"""Measures SSE directly (runner.sse): {DECLARED}."""\nfrom runner import sse\n',
            [],
        ),
        (
            f'"""Measures SSE directly (runner.sse): {DECLARED}."""\n'
            "from runner.sse import parse\nfrom runner.agent import Thread\n",
            ["bench/x.py:3: imports runner.agent, not named"],
        ),
        (
            f'"""Measures SSE directly (runner.sse): {DECLARED}."""\n'
            "def f():\n    from tests.support.chromium import Browser\n",
            ["bench/x.py:3: imports tests.support.chromium"],
        ),
    ],
)
def test_the_rule_catches_each_kind_of_import(source: str, expected: list[str]) -> None:
    found = problems("x.py", source)
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want), (got, want)
