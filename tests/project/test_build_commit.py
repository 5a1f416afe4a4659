"""An installed runner names the commit it was built from. `pip install --no-deps .` (the
README's and the Action's line) copies the package out of the checkout, so the report's
`runner.commit` cannot be read from `.git` at run time: the build writes it into the
package. Built and installed for real into a target folder, then run from there."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import KEY, write_tasks
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import per_conversation, reply_message

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "runner")


def _checkout(dest: Path) -> Path:
    """A git checkout of this project's build inputs, with a commit of its own."""
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    (dest / "runner/_build.py").unlink(missing_ok=True)
    return make_git_repo(dest)


def _install(checkout: Path, target: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--no-build-isolation", "--no-index", str(checkout), "--target",
         str(target)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PIP_CONFIG_FILE": os.devnull},
    )  # fmt: skip
    if "cannot build" in res.stderr or "bdist_wheel" in res.stderr:
        pytest.skip(f"this venv's setuptools cannot build offline: {res.stderr[-300:]}")
    assert res.returncode == 0, res.stderr


def test_an_installed_runner_names_its_build_commit(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    checkout = _checkout(tmp_path / "checkout")
    built = git(checkout, "rev-parse", "HEAD").strip()
    target = tmp_path / "target"
    _install(checkout, target)
    assert not (checkout / "runner/_build.py").exists()  # the source tree is left alone
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    work = tmp_path / "work"
    tasks = write_tasks(work, srv.base_url, "  - {id: a, prompt: fix it, repo: .}\n")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(target), "FAKE_API_KEY": KEY}
    where = subprocess.run(
        [sys.executable, "-c", "import runner; print(runner.__file__)"],
        cwd=work, env=env, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert where.startswith(str(target)), where
    res = subprocess.run(
        [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
        cwd=work, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["runner"] == {"version": "0.1.0", "commit": built}
    shown = f"Runner 0.1.0, commit {built}"
    assert shown in (out / "summary.md").read_text()
    assert shown in (out / "report.html").read_text()
