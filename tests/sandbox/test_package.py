"""`network_access` and `writable_roots` from the task file to the policy the sandbox
enforces and the prompt shows."""

from __future__ import annotations

from pathlib import Path

from runner.config import parse_task_file, resolve
from runner.sandbox import make_policy
from tests.support.fixtures import make_git_repo


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
