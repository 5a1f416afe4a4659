"""Classes 5 and 7 of issue 14: any depth of directories (and permissions taken away) is
removed without recursion, a leftover from a killed batch never stops the next one, and
the sandbox's in-memory /dev/shm has a cap that ends only the command reaching it."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import anyio
import pytest

from runner import workspace
from runner.hostfs import remove_tree
from runner.sandbox import make_executor, make_policy
from runner.sandbox.env import child_env
from runner.sandbox.mounts import MAX_SHM_BYTES
from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import per_conversation, reply_message
from tests.support.security import runs, sh, tasks
from tests.support.trees import DEPTH, make_deep


@pytest.mark.slow
def test_deep_trees_and_leftovers_never_break_a_batch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    tmpdir = tmp_path / "tmpdir"
    try:
        _deep_batches(loopback_thread, tmp_path, tmpdir)
    finally:
        remove_tree(tmpdir)  # pytest's own cleanup of tmp_path would recurse


def _deep_batches(loopback_thread: ThreadFactory, tmp_path: Path, tmpdir: Path) -> None:
    # What a batch killed with kill -9 left in the free slot: deeper than Python's
    # recursion limit, with permissions taken away.
    make_deep(tmpdir / "runner-work" / "0" / "junk", DEPTH)
    (tmpdir / "runner-work" / "0" / "junk").chmod(0)
    repo = make_git_repo(tmp_path / "repo")
    deep = "/".join(["d"] * DEPTH)

    def script(req: object, i: int) -> object:
        if i == 0 and "deep" in str(getattr(req, "raw", b"")):
            return sh(f"mkdir -p {deep} && echo bottom > {deep}/f && chmod 0 d/d/d", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))  # type: ignore[arg-type]
    out = tmp_path / "o"
    env = {"TMPDIR": str(tmpdir)}
    res = run_cli(
        "run", tasks(tmp_path, srv.base_url, repo, ["deep", "healthy"]), "--out", out, env=env
    )
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stderr
    found = runs(out)
    assert found["deep"]["status"] == found["healthy"]["status"] == "completed"
    assert found["deep"]["result"]["files_changed"] == 1
    assert list((tmpdir / "runner-work").glob("*/*")) == []  # nothing left behind
    # The next batch in the same place starts as usual.
    res = run_cli(
        "run", tasks(tmp_path, srv.base_url, repo, ["healthy"]), "--out", tmp_path / "o2", env=env
    )
    assert res.returncode == 0, res.stderr


def test_dev_shm_is_capped_per_command(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    try:
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        executor = make_executor(policy)

        def go(script: str) -> str:
            res = anyio.run(
                partial(
                    executor.run,
                    ["bash", "-c", script],
                    cwd=ws.path,
                    timeout_s=30,
                    env=child_env(os.environ),
                )
            )
            return f"{res.exit_code}:{res.output.decode()}"

        over = (MAX_SHM_BYTES >> 20) + 64
        text = go(
            f"head -c {over}M /dev/zero > /dev/shm/fill; echo rc=$?; df -m /dev/shm | tail -1"
        )
        assert "No space left on device" in text and "rc=1" in text, text
        assert f" {MAX_SHM_BYTES >> 20} " in text  # the tmpfs's size, in MiB
        assert go("ls /dev/shm; echo next").startswith("0:next")  # a fresh one next time
    finally:
        workspace.cleanup_sync(ws)


def _loose(objects: Path) -> int:
    return sum(1 for d in objects.glob("[0-9a-f][0-9a-f]") for _ in d.iterdir())


def test_many_files_and_a_huge_one_reach_the_users_store_as_packs(tmp_path: Path) -> None:
    """5,000 small files and a 40 MiB one written by the agent add no loose object to the
    user's repository; the huge file is committed but left out of the patch."""
    repo = make_git_repo(tmp_path / "repo")
    objects = repo / ".git" / "objects"
    loose_before = _loose(objects)
    packs_before = set((objects / "pack").glob("*.pack"))
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    try:
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        res = anyio.run(
            partial(
                make_executor(policy).run,
                [
                    "bash",
                    "-c",
                    "mkdir many && cd many && seq 5000 | xargs touch && "
                    "for i in 1 2 3; do echo $i > $i; done && "
                    "head -c 40M /dev/urandom > ../big.bin",
                ],
                cwd=ws.path,
                timeout_s=60,
                env=child_env(os.environ),
            )
        )
        assert res.exit_code == 0, res.output
        result = workspace.finish_sync(
            ws,
            branch_template="r/{run}",
            fields={"run": "x"},
            message="m\n",
            patch_path=tmp_path / "p.patch",
        )
        assert result is not None and result.files_changed == 5001
        assert _loose(objects) == loose_before
        assert len(set((objects / "pack").glob("*.pack")) - packs_before) >= 1
        from tests.support.fixtures import git

        assert git(repo, "cat-file", "-s", "r/x:big.bin").strip() == str(40 << 20)
        patch = (tmp_path / "p.patch").read_text()
        assert "many/4999" in patch and "big.bin" not in patch
    finally:
        workspace.cleanup_sync(ws)


def test_workspace_growth_is_capped_per_run(tmp_path: Path) -> None:
    """Many files each under the per-file limit: the command that takes the workspace past
    its cap is stopped with the reason; the next command runs, and after the agent
    deletes files it may write again."""
    from runner.sandbox.bwrap import Limits
    from runner.sandbox.process import STOPPED_EXIT

    repo = make_git_repo(tmp_path / "repo")
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    try:
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        executor = make_executor(policy, limits=Limits(workspace_growth_bytes=64 << 20))

        def go(script: str) -> tuple[int, str]:
            res = anyio.run(
                partial(
                    executor.run,
                    ["bash", "-c", script],
                    cwd=ws.path,
                    timeout_s=60,
                    env=child_env(os.environ),
                )
            )
            return res.exit_code, res.output.decode()

        code, text = go(
            "for i in $(seq 1000); do head -c 8M /dev/zero > f$i; sleep 0.05; done; echo finished"
        )
        assert code == STOPPED_EXIT and "finished" not in text, text
        assert "past its cap of 64 MiB for this run" in text
        # Kept for the run's report (its `error` names it, the events file has a note).
        assert len(executor.limit_notes) == 1 and "past its cap" in executor.limit_notes[0]
        assert go("echo still here") == (0, "still here\n")
        assert go("rm f*; head -c 8M /dev/zero > g; sleep 1.5; echo ok")[0] == 0
    finally:
        workspace.cleanup_sync(ws)


def test_a_committed_deep_tree_is_handed_to_the_sandbox_user(tmp_path: Path) -> None:
    """A repository from a pull request may commit a tree deeper than Python's recursion
    limit (and than the fd limit); a root runner hands the whole checkout over to the
    sandbox's user, then removes it, without recursion."""
    repo = make_git_repo(tmp_path / "repo")
    make_deep(repo / "deep", DEPTH)
    fd = os.open(repo / "deep", os.O_RDONLY)
    for _ in range(DEPTH):
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
        f.write("leaf\n")
    os.close(fd)
    from tests.support.fixtures import git

    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "deep")
    ws = workspace.prepare_sync(repo, root=tmp_path / "work", name="run")
    try:
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        executor = make_executor(policy)  # as root: chowns the checkout
        res = anyio.run(
            partial(
                executor.run,
                ["bash", "-c", "find deep -name leaf | wc -l; touch deep/d/new && echo wrote"],
                cwd=ws.path,
                timeout_s=60,
                env=child_env(os.environ),
            )
        )
        assert res.output.decode().split() == ["1", "wrote"], res.output
    finally:
        workspace.cleanup_sync(ws)
        remove_tree(repo / "deep")  # pytest's own cleanup of tmp_path would recurse
    assert not ws.path.exists()
