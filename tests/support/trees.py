"""Directory trees deeper than Python's recursion limit, made without ever naming a path
longer than PATH_MAX: for the code that must walk or remove any depth."""

from __future__ import annotations

import os
from pathlib import Path

DEPTH = 1100
"""Past Python's recursion limit (1000), which `shutil.rmtree` hit. (Each rmdir costs
milliseconds on a disk, so deeper only makes the suite slower.)"""


def make_deep(top: Path, depth: int = DEPTH) -> None:
    """A chain `top/d/d/...` made fd by fd (no path grows past PATH_MAX)."""
    top.mkdir(parents=True)
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
