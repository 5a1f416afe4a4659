"""One door to the format readers, so the config pass names a format, not a module: each
reader is imported only when a task file uses its format."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.suites.model import SuiteFormat, SuiteListing


def list_suite(
    fmt: SuiteFormat,
    path: Path,
    *,
    prompt_template: str | None = None,
    image_template: str | None = None,
    variables: Mapping[str, str] | None = None,
) -> SuiteListing:
    """The tasks of the suite at `path` by id, each read only when asked; ConfigError
    when `path` is no suite of the format at all (each problem named by file, line and
    field). A task's own faults are its `read`'s, so one that is not selected never
    stops a batch."""
    if fmt == "harbor":
        from runner.suites.harbor import list_harbor

        return list_harbor(path, variables)
    if fmt == "terminal-bench":
        from runner.suites.terminal_bench import list_terminal_bench

        return list_terminal_bench(path, variables)
    from runner.suites.swe_bench import list_swe_bench

    return list_swe_bench(path, prompt_template=prompt_template, image_template=image_template)
