"""Chromium for the tests of report.html: bench/browser.py's driver, and a skip where the
machine has no Chromium (`make test` installs it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.browser import Browser as _Driver
from bench.browser import find_chromium


def chromium() -> str:
    found = find_chromium()
    if found is None:
        pytest.skip("no Chromium: `make chromium` installs Debian's package")
    return found


class Browser(_Driver):
    def __init__(self, profile: Path, downloads: Path | None = None) -> None:
        super().__init__(profile, downloads, exe=chromium())
