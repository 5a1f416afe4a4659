"""The sandbox package's face: `network_access` and `writable_roots` from the task file to
the policy the sandbox enforces and the prompt shows; and `make_executor`, which, where
bubblewrap cannot run, fails with a message naming the fix and never runs the command
unsandboxed (`danger-full-access` needs no bubblewrap)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.config import parse_task_file, resolve
from runner.errors import SandboxError
from runner.sandbox import make_executor, make_policy
from runner.sandbox.bwrap import BwrapExecutor, Host
from runner.sandbox.local import LocalExecutor
from tests.support.fixtures import make_git_repo
from tests.support.sandbox import FIXES, Box, broken_bwrap


def test_fields_resolve_and_inherit(tmp_path: Path) -> None:
    make_git_repo(tmp_path / "repo")
    (tmp_path / "cache").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "cache")
    tf = parse_task_file(
        "version: 1\n"
        "defaults: {network_access: true, writable_roots: [cache]}\n"
        "tasks:\n"
        "  - {id: a, prompt: p, repo: repo}\n"
        "  - {id: b, prompt: p, repo: repo, network_access: false, writable_roots: [link]}\n"
        "  - {id: c, prompt: p, repo: repo, sandbox: read-only}\n",
        "t.yaml",
    )
    a, b, c = resolve(tf, tmp_path)
    assert (a.sandbox, a.network_access, a.writable_roots) == (
        "workspace-write",
        True,
        (tmp_path / "cache",),
    )
    assert (b.network_access, b.writable_roots) == (False, (tmp_path / "cache",))

    ws = tmp_path / "repo"
    pa = make_policy(
        a.sandbox, workspace=ws, writable_roots=a.writable_roots, network=a.network_access
    )
    assert pa.network and pa.prompt_roots() == (tmp_path / "cache",)
    assert pa.writable() == (ws, tmp_path / "cache")
    # read-only keeps nothing writable and lists no roots, whatever the task file says.
    pc = make_policy(
        c.sandbox, workspace=ws, writable_roots=c.writable_roots, network=c.network_access
    )
    assert pc.writable() == () and pc.prompt_roots() == () and pc.network
    # Without a sandbox nothing holds the network back, so the prompt must say it is on.
    pd = make_policy("danger-full-access", workspace=ws, network=False)
    assert pd.network and pd.notes() == ()


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
