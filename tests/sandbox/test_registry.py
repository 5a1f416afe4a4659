"""Where bubblewrap cannot run, a sandboxed mode fails with a message naming the fix; it
never runs the command unsandboxed. `danger-full-access` needs no bubblewrap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import SandboxError
from runner.sandbox import make_executor
from runner.sandbox.bwrap import BwrapExecutor, Host
from runner.sandbox.local import LocalExecutor
from tests.support.sandbox import FIXES, Box, broken_bwrap


def test_missing_bubblewrap(box: Box, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    with pytest.raises(SandboxError) as err:
        make_executor(box.policy("workspace-write"), search_path=str(empty))
    assert "not installed" in str(err.value)
    for fix in FIXES:
        assert fix in str(err.value)


def test_no_user_namespaces(box: Box, tmp_path: Path) -> None:
    fake = broken_bwrap(tmp_path / "fake")
    path = f"{fake}:{os.environ['PATH']}"
    for mode in ("read-only", "workspace-write", "read-only"):
        with pytest.raises(SandboxError) as err:
            make_executor(box.policy(mode), search_path=path)  # type: ignore[arg-type]
        assert "No permissions to creating new namespace" in str(err.value)
        for fix in FIXES:
            assert fix in str(err.value)
    assert (fake / "starts").read_text() == "started\n"  # probed once, then remembered


def test_full_access_needs_no_bubblewrap(box: Box, tmp_path: Path) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    executor = make_executor(box.policy("danger-full-access"), search_path=str(empty))
    assert isinstance(executor, LocalExecutor)
    # Nor may it be given one: bubblewrap would sandbox what the mode says is not.
    host = Host("bwrap", "prlimit", None, None, None, None)
    with pytest.raises(SandboxError, match="runs without bubblewrap"):
        BwrapExecutor(box.policy("danger-full-access"), host)
