"""Few tests start the `runner` command as a process of its own.

Why: starting Python and importing the runner again for each call was most of the suite's
time. A test calls the command in-process (`tests.support.cli.run_cli`) unless only a
process shows what it proves: its exit status or `--json` stream on a real pipe, a closed
pipe, a signal or kill -9, a second live batch naming the first's pid, or, in
tests/security/, a runner of another user, its /proc/<pid>/environ, or its peak memory.
A new one must be worth raising the pin below.

The test reads the sources, not a run: a test function counts when it, or a helper it
calls (in its own module, or imported from another test module), holds a `python -m
runner` argument list, or a child Python's code that runs the command. The GitHub Action
harness (tests/support/gha.py) runs the Action's own shell steps and is not counted.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import paths

MAX_PROCESS_TESTS = 48
"""When pinned: 26 outside tests/security/ (4 exit statuses and --json, 5 closed pipes, 8
signals or kill -9 (three mid-build), 2 second live batches naming the first's pid, 3 fresh
interpreters' imports (what a plain batch leaves unloaded: httpx's CLI, pydantic's plugin
loader, the modules only other batches need), an installed runner's build commit, the
README's container quickstart as written, 2 files watched while a live batch writes them)
and 22 inside (runners as another user, /proc/<pid>/environ, peak memory, kill -9 and
resume). There were 76 before the in-process `run_cli`."""

Func = ast.FunctionDef | ast.AsyncFunctionDef
CHILD_CODE = ("'-m', 'runner'", "from runner.cli import main")
"""Code handed to `python -c` that runs the command."""


def _module(path: Path, tests: Path) -> str:
    return ".".join(path.relative_to(tests.parent).with_suffix("").parts)


def _starts_the_command(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.List | ast.Tuple):
            values = [e.value if isinstance(e, ast.Constant) else None for e in n.elts]
            if any(a == "-m" and b == "runner" for a, b in zip(values, values[1:], strict=False)):
                return True
        text = n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else ""
        if any(code in text for code in CHILD_CODE):
            return True
    return False


@dataclass
class Uses:
    """What one function's body does that the count follows."""

    direct: bool
    """Holds the argument list or child code itself."""
    names: set[tuple[str, str]] = field(default_factory=set)
    """Module-level names it reads or calls, resolved through its module's imports."""
    methods: set[str] = field(default_factory=set)
    """Method names it calls on some object."""


class Sources:
    """Every function and method of the test tree, read once."""

    def __init__(self, root: Path) -> None:
        self.uses: dict[tuple[str, ...], Uses] = {}
        self.owners: dict[str, dict[str, tuple[str, str]]] = {}
        """Per module, the names it imports (`from m import n`): the class of a method."""
        self.child_code: set[tuple[str, ...]] = set()
        """Module-level strings of code that runs the command, e.g. `PROBE = "..."`."""
        for path in sorted(root.rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # names what it looks for
            self._read(_module(path, root), ast.parse(path.read_text(encoding="utf-8")))

    def _read(self, mod: str, tree: ast.Module) -> None:
        names = self.owners.setdefault(mod, {})
        for n in ast.walk(tree):
            if isinstance(n, ast.ImportFrom) and n.module:
                for alias in n.names:
                    names.setdefault(alias.asname or alias.name, (n.module, alias.name))
        for st in tree.body:
            if isinstance(st, ast.Assign) and _starts_the_command(st.value):
                self.child_code.update((mod, t.id) for t in st.targets if isinstance(t, ast.Name))
            if isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef):
                self.uses[(mod, st.name)] = self._uses(mod, st)
            elif isinstance(st, ast.ClassDef):
                for m in st.body:
                    if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef):
                        self.uses[(mod, st.name, m.name)] = self._uses(mod, m)

    def _uses(self, mod: str, node: Func) -> Uses:
        names = self.owners[mod]
        uses = Uses(_starts_the_command(node))
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                uses.names.add(names.get(n.id, (mod, n.id)))
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
                uses.methods.add(n.func.attr)
        return uses

    def starters(self) -> set[tuple[str, ...]]:
        """Functions and methods that start the command, directly or through another."""
        found: set[tuple[str, ...]] = {k for k, u in self.uses.items() if u.direct}
        grew = True
        while grew:
            grew = False
            for key, uses in self.uses.items():
                if key not in found and self._reaches(key[0], uses, found):
                    found.add(key)
                    grew = True
        return found

    def _reaches(self, mod: str, uses: Uses, found: set[tuple[str, ...]]) -> bool:
        if any(name in found or name in self.child_code for name in uses.names):
            return True
        own = self.owners[mod]
        return any(  # a method of a class its module defines or imports
            len(key) == 3
            and key[2] in uses.methods
            and (key[0] == mod or own.get(key[1]) == (key[0], key[1]))
            for key in found
        )


def process_tests(tests: Path = paths.TESTS) -> list[str]:
    sources = Sources(tests)
    starters = sources.starters()

    def ids() -> Iterator[str]:
        for key in sorted(starters):
            if key[-1].startswith("test_"):
                yield key[0].replace(".", "/") + ".py::" + "::".join(key[1:])

    return list(ids())


def test_few_tests_start_the_command_as_a_process() -> None:
    found = process_tests()
    listing = "\n".join(found)
    assert len(found) <= MAX_PROCESS_TESTS, (
        f"{len(found)} tests start `runner` as a process (at most {MAX_PROCESS_TESTS}); "
        f"call it in-process with tests.support.cli.run_cli where a process proves "
        f"nothing more:\n{listing}"
    )


def test_the_count_sees_each_way_of_starting_the_command() -> None:
    """The scan finds the command through a support helper, a module's own helper, a method
    of a support class and a child's code; a test that only calls run_cli is not counted."""
    found = set(process_tests())
    for seen in (
        "tests/test_cli.py::test_json_stream_on_stdout",  # run_cli_process
        "tests/test_batch.py::test_kill_9_at_ten_points_then_resume_gives_one_result_per_run",
        "tests/security/test_signals.py::test_sigterm_ends_every_state_within_seconds",
        "tests/security/test_isolation.py::test_a_command_cannot_find_or_read_the_users_repository",
        "tests/security/test_hostile.py::test_huge_event_and_huge_output_in_bounded_memory",
    ):
        assert seen in found, seen
    assert "tests/test_cli.py::test_only_and_bad_flags" not in found
