"""The build as pyproject.toml declares it, plus one step: the git commit being built is
written into the built package as `runner/_build.py`, so an installed runner (not a
checkout any more) still names its commit in every report. Nothing is written into the
source tree; an editable install reads the checkout at run time instead."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _head_commit() -> str | None:
    # runner/checkout.py by path: importing the package would need its dependencies.
    spec = importlib.util.spec_from_file_location("_runner_checkout", ROOT / "runner/checkout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    commit: str | None = module.head_commit(ROOT)
    return commit


class BuildPyWithCommit(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "runner" / "_build.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        # Written on every build, None included, so a stale build/ never names an old commit.
        target.write_text(
            f'"""Written by setup.py when this copy was built."""\n\nCOMMIT = {_head_commit()!r}\n'
        )


setup(cmdclass={"build_py": BuildPyWithCommit})
