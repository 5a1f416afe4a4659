"""One door to the format readers, so the config pass names a format, not a module: each
reader is imported only when a task file uses its format."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from runner.suites.model import SuiteFormat, SuiteTask


def read_suite(
    fmt: SuiteFormat,
    path: Path,
    *,
    prompt_template: str | None = None,
    image_template: str | None = None,
    variables: Mapping[str, str] | None = None,
) -> list[SuiteTask]:
    """Every task of the suite at `path`; ConfigError listing every problem found in the
    suite's own files (each named by file, line and field)."""
    if fmt == "harbor":
        from runner.suites.harbor import read_harbor

        return read_harbor(path, variables)
    if fmt == "terminal-bench":
        from runner.suites.terminal_bench import read_terminal_bench

        return read_terminal_bench(path, variables)
    from runner.suites.swe_bench import read_swe_bench

    return read_swe_bench(path, prompt_template=prompt_template, image_template=image_template)
