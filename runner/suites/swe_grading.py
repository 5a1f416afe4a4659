"""A SWE-bench test log graded by the `swebench` package's own grading, so a run here is
resolved exactly when the official harness would call it resolved.

swebench is an optional dependency (`pip install 'headless-agent-runner[swebench]'`).
Its `swebench.harness` package imports docker, datasets, modal and dotenv when it is
imported, and `load_dotenv()` would read a `.env` of the current directory into runner's
environment. Grading needs none of that: `harness.grading` and `harness.log_parsers` import
only the standard library, `swebench.types`, `swebench.utils` (which needs `unidiff`) and
the harness's constants. So the harness package is entered without running its
`__init__`: a bare package module over the same folder stands in for it. The package's
top-level `swebench/__init__.py` is lazy since 5.0 and is imported as is.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, cast

from runner.errors import ConfigError, Problem
from runner.frozen import frozen
from runner.suites.model import SuiteTask

MIN_VERSION = (5, 0, 2)
"""The release whose grading this module calls (TestSpec.log_parser, a lazy top level);
4.x imported docker from `swebench/__init__.py`."""

Resolution = Literal["resolved", "partial", "not"]
_RESOLUTION: dict[str, Resolution] = {
    "RESOLVED_FULL": "resolved",
    "RESOLVED_PARTIAL": "partial",
    "RESOLVED_NO": "not",
}


@frozen
class SweGrade:
    resolution: Resolution
    """The official `get_resolution_status`: resolved when every FAIL_TO_PASS and
    PASS_TO_PASS test passes; partial when some but not all FAIL_TO_PASS tests pass and
    every PASS_TO_PASS does; otherwise not."""
    tests_ran: bool
    """The log had a readable test section (the harness's `patch_successfully_applied`):
    false when a patch did not apply, the markers are missing, or the exit status
    contradicts the log."""
    fail_to_pass: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    """(passed, failed) FAIL_TO_PASS ids."""
    pass_to_pass: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    infra_failure: str | None = None
    """The harness's reason when it reads the log as a broken environment, not a wrong
    patch (advisory there too: the instance is still not resolved)."""

    @property
    def reward(self) -> float:
        return 1.0 if self.resolution == "resolved" else 0.0


def swebench_problem() -> Problem | None:
    """Why SWE-bench grading cannot run here, for `validate` to say before any run."""
    try:
        _grading()
    except ConfigError as exc:
        return exc.problems[0]
    return None


def default_log_parser(repo: str) -> str | None:
    """The name of the parser the swebench package maps `repo` to, for an instance that
    does not name its own (the classic datasets do not); None when the package maps no
    parser to it. ConfigError when the package is missing.

    The package keeps one repo → parser map per language (`MAP_REPO_TO_PARSER_PY`, `_JS`...
    in `harness/log_parsers/*.py`), holding functions; the name is the one
    `PARSER_REGISTRY` files that same function under (aliases share one function, and so
    grade alike)."""
    _grading()
    parsers = importlib.import_module("swebench.harness.log_parsers")
    registry = cast(dict[str, Any], parsers.PARSER_REGISTRY)
    for found in _repo_maps(parsers):
        parser = found.get(repo)
        if parser is None:
            continue
        own = getattr(parser, "__name__", "")
        if registry.get(own) is parser:
            return str(own)
        for name, value in registry.items():
            if value is parser:
                return name
    return None


def _repo_maps(parsers: ModuleType) -> list[dict[str, Any]]:
    """Every `MAP_REPO_TO_PARSER*` of the package: a combined one first if the package
    has it, then each language's module."""
    maps = [v for k, v in vars(parsers).items() if k.startswith("MAP_REPO_TO_PARSER")]
    folder = Path(cast(str, parsers.__file__)).parent
    for source in sorted(folder.glob("*.py")):
        if source.stem.startswith("_"):
            continue
        module = importlib.import_module(f"swebench.harness.log_parsers.{source.stem}")
        maps += [v for k, v in vars(module).items() if k.startswith("MAP_REPO_TO_PARSER")]
    return [m for m in maps if isinstance(m, dict)]


def grade_swe_log(log: str, task: SuiteTask) -> SweGrade:
    """The graded result of `task` from its verifier's whole output (eval script log).

    Deterministic: a pure function of the log and the instance; the package reads the log
    from a file, so it is written to a private temporary one."""
    grading = _grading()
    verifier = task.verifier
    if verifier.grading != "swe-bench" or verifier.log_parser is None:
        raise ValueError(f"{task.id}: not a SWE-bench task")
    types = importlib.import_module("swebench.types")
    constants = importlib.import_module("swebench.harness.constants")
    eval_type = verifier.eval_type or (
        "fail_only" if verifier.repo in constants.FAIL_ONLY_REPOS else "pass_and_fail"
    )
    spec = types.TestSpec(
        instance_id=task.id,
        image=task.environment.image or "",
        eval_script_list=[],
        repo=verifier.repo or "",
        version=dict(task.metadata).get("version", ""),
        FAIL_TO_PASS=list(verifier.fail_to_pass),
        PASS_TO_PASS=list(verifier.pass_to_pass),
        log_parser=verifier.log_parser,
        eval_type=eval_type,
    )
    prediction = {"instance_id": task.id, "model_name_or_path": "runner", "model_patch": ""}
    with tempfile.TemporaryDirectory(prefix="runner-swe-grade-") as tmp:
        log_path = Path(tmp) / "test_output.txt"
        log_path.write_text(log, encoding="utf-8", errors="surrogateescape")
        report = cast(
            dict[str, Any],
            grading.get_eval_report(spec, prediction, str(log_path), include_tests_status=True),
        )[task.id]
    if not report["patch_successfully_applied"]:
        return SweGrade(
            resolution="not",
            tests_ran=False,
            infra_failure=report.get("infra_failure_reason"),
        )
    tests = report["tests_status"]
    status = cast(str, grading.get_resolution_status(tests))
    return SweGrade(
        resolution=_RESOLUTION[status],
        tests_ran=True,
        fail_to_pass=_split(tests["FAIL_TO_PASS"]),
        pass_to_pass=_split(tests["PASS_TO_PASS"]),
    )


def _split(part: dict[str, list[str]]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return tuple(part["success"]), tuple(part["failure"])


def _grading() -> ModuleType:
    try:
        swebench = importlib.import_module("swebench")
    except ImportError:
        raise _missing("is not installed") from None
    version = str(getattr(swebench, "__version__", "0"))
    if _version(version) < MIN_VERSION:
        raise _missing(f"{version} is installed; grading needs {_shown(MIN_VERSION)} or later")
    if "swebench.harness" not in sys.modules:
        harness = ModuleType("swebench.harness")
        harness.__path__ = [str(Path(cast(str, swebench.__file__)).parent / "harness")]
        harness.__package__ = "swebench.harness"
        sys.modules["swebench.harness"] = harness
    try:
        grading = importlib.import_module("swebench.harness.grading")
        importlib.import_module("swebench.harness.log_parsers")
    except ImportError as exc:
        raise _missing(f"{version} cannot load its grading ({exc})") from None
    return grading


def _version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split(".")[:3]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _shown(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _missing(why: str) -> ConfigError:
    return ConfigError(
        [
            Problem(
                "(swe-bench grading)",
                None,
                "swebench",
                f"the swebench package {why}: install it with "
                f"`pip install 'swebench>={_shown(MIN_VERSION)}'` (or runner's `swebench` "
                "extra)",
            )
        ]
    )
