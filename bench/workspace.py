"""Workspace setup and result cost on a generated repository of 5,000 files.

Compares ways to give one run its own checkout of a commit, then times what
`runner.workspace` does at the end of a run (commit, patch, branch) and its cleanup.
Each number is the median (and 90th percentile) of RUNS fresh workspaces; "cpu" is this
process's plus its git children's CPU time, the quantity the batch budget counts.

Measures workspace preparation directly (runner.workspace, runner.workspace.prepare): no
public API gives it.

    .venv/bin/python bench/workspace.py [--files 5000] [--runs 10]

Strategies (all with hooks and fsmonitor disabled, all checking out the same commit):
- worktree:      `git worktree add --detach` (writes .git/worktrees/<name> in the user's repo)
- clone-shared:  `git clone --shared --no-checkout` + `git checkout --detach`
- clone-local:   `git clone --local --no-checkout` (hardlinked objects) + `git checkout`
- runner:        `runner.workspace.prepare` (init + alternates + read-tree -u, private index;
                 the pack of the base's objects its runs share is made by the first, and
                 timed on its own line)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner import workspace as wsmod  # noqa: E402
from runner.workspace.prepare import base_objects, is_dirty  # noqa: E402

SAFE = ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"]


def git(*args: str, cwd: Path | None = None) -> str:
    env = wsmod.git_env()
    return subprocess.run(
        ["git", *SAFE, *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def make_repo(path: Path, files: int) -> str:
    """`files` text files of ~1 KiB in 100-file directories, one commit, packed (as a real
    clone would be)."""
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", str(path))
    for i in range(files):
        d = path / f"pkg{i // 100:03d}"
        d.mkdir(exist_ok=True)
        body = "".join(f"line {j} of file {i}: {'x' * 40}\n" for j in range(20))
        (d / f"mod{i:05d}.py").write_text(body)
    git("add", "-A", cwd=path)
    git(
        "-c",
        "user.name=bench",
        "-c",
        "user.email=bench@localhost",
        "commit",
        "-qm",
        "init",
        cwd=path,
    )
    git("repack", "-adq", cwd=path)
    git("prune", cwd=path)
    return git("rev-parse", "HEAD", cwd=path)


def cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def measure(
    runs: int, setup: Callable[[int], None], teardown: Callable[[int], None]
) -> tuple[list[float], list[float]]:
    walls: list[float] = []
    cpus: list[float] = []
    for i in range(runs):
        c0, t0 = cpu(), time.perf_counter()
        setup(i)
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
        teardown(i)
    return walls, cpus


def line(label: str, walls: list[float], cpus: list[float]) -> str:
    p90 = sorted(walls)[max(0, round(0.9 * len(walls)) - 1)]
    return (
        f"  {label:<34} median {statistics.median(walls) * 1000:7.1f} ms   "
        f"p90 {p90 * 1000:7.1f} ms   cpu {statistics.median(cpus) * 1000:7.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="where to build (default: the system temp dir; try /dev/shm)",
    )
    args = ap.parse_args()
    runs: int = args.runs

    with tempfile.TemporaryDirectory(prefix="bench-ws-", dir=args.dir) as tmp:
        base = Path(tmp)
        repo = base / "repo"
        t0 = time.perf_counter()
        sha = make_repo(repo, args.files)
        print(
            f"repository: {args.files} files in {tmp}, packed, generated in "
            f"{time.perf_counter() - t0:.1f} s; git {git('--version').split()[-1]}, "
            f"{os.cpu_count()} CPUs, {runs} runs each"
        )
        print("setup (one workspace checked out at the base commit):")
        dst = base / "dst"

        def worktree(i: int) -> None:
            git("worktree", "add", "-q", "--detach", str(dst / f"w{i}"), sha, cwd=repo)

        def worktree_down(i: int) -> None:
            git("worktree", "remove", "--force", str(dst / f"w{i}"), cwd=repo)

        def clone(kind: str) -> Callable[[int], None]:
            def run(i: int) -> None:
                target = dst / f"{kind}{i}"
                git("clone", "-q", f"--{kind}", "--no-checkout", str(repo), str(target))
                git("checkout", "-q", "--detach", sha, cwd=target)

            return run

        def rm(i: int) -> None:
            # Only the clones: the runs' shared object store in `dst` lives as long as
            # the batch would.
            for kind in ("shared", "local"):
                shutil.rmtree(dst / f"{kind}{i}", ignore_errors=True)

        workspaces: list[wsmod.Workspace] = []

        def prep(i: int) -> None:
            workspaces.append(wsmod.prepare_sync(repo, root=dst, name=f"r{i}"))

        def prep_down(i: int) -> None:
            wsmod.cleanup_sync(workspaces[-1])

        strategies: dict[str, tuple[Callable[[int], None], Callable[[int], None]]] = {
            "worktree add --detach": (worktree, worktree_down),
            "clone --shared + checkout": (clone("shared"), rm),
            "clone --local + checkout": (clone("local"), rm),
            "runner prepare (init+alternates)": (prep, prep_down),
        }
        # Round-robin, rotating the order each round: on a real disk the cost of creating
        # 5,000 files drifts with what was just deleted, and no strategy should always
        # come first.
        results: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in strategies}
        names = list(strategies)
        for i in range(runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                up, down = strategies[name]
                w, c = measure(1, partial(_nth, up, i), partial(_nth, down, i))
                results[name][0].extend(w)
                results[name][1].extend(c)
        for label, (walls, cpus) in results.items():
            print(line(label, walls, cpus))
        setup_s = [w.setup_s for w in workspaces]
        print(f"  (Workspace.setup_s median {statistics.median(setup_s) * 1000:.1f} ms)")

        def dirty(i: int) -> None:
            is_dirty(repo)

        walls, cpus = measure(runs, dirty, lambda i: None)
        print(line("  of which the dirty check", walls, cpus))

        def pack(i: int) -> None:
            base_objects(repo, repo / ".git" / "objects", base / "stores" / str(i), sha)

        walls, cpus = measure(runs, pack, lambda i: None)
        print(line("pack of the base's objects (once)", walls, cpus))

        print("result (10 files edited, 2 added, 1 deleted; commit + patch + branch):")
        ready: list[wsmod.Workspace] = []
        for i in range(runs):
            ws = wsmod.prepare_sync(repo, root=dst, name=f"f{i}")
            for k in range(10):
                f = ws.path / f"pkg{k:03d}" / f"mod{k * 100:05d}.py"
                f.write_text(f.read_text() + f"edited {i}\n")
            (ws.path / "new_a.py").write_text(f"a = {i}\n")
            (ws.path / "pkg001" / "new_b.py").write_text(f"b = {i}\n")
            (ws.path / "pkg020" / "mod02000.py").unlink()
            ready.append(ws)
        patches = base / "patches"

        def fin(i: int) -> None:
            r = wsmod.finish_sync(
                ready[i],
                branch_template="bench/{run}",
                fields={"run": "x"},
                message="bench",
                patch_path=patches / f"{i}.patch",
            )
            assert r is not None and r.files_changed == 13, r

        walls, cpus = measure(runs, fin, lambda i: None)
        print(line("finish (commit+patch+branch)", walls, cpus))

        clean = []
        for i in range(runs):
            clean.append(wsmod.prepare_sync(repo, root=dst, name=f"e{i}"))
        walls, cpus = measure(runs, lambda i: _no_change(clean[i], patches), lambda i: None)
        print(line("finish, nothing changed", walls, cpus))
        walls, cpus = measure(runs, lambda i: wsmod.cleanup_sync(ready[i]), lambda i: None)
        print(line("cleanup", walls, cpus))


def _nth(fn: Callable[[int], None], i: int, _: int) -> None:
    fn(i)


def _no_change(ws: wsmod.Workspace, patches: Path) -> None:
    r = wsmod.finish_sync(
        ws,
        branch_template="bench/none",
        fields={},
        message="none",
        patch_path=patches / "none.patch",
    )
    assert r is None


if __name__ == "__main__":
    main()
