"""What capturing a work tree full of files costs now that the runner walks the tree
itself (runner/workspace/finish.py `_worktree`) instead of `git add --all`.

Makes a workspace on a one-file repository, writes N small files across N/100
directories (plus a `.gitignore`d directory of N/10 files, a nested repository and a
few `.git` look-alike names), then times `finish` (walk, ignore check, redaction scan,
staging, commit, patch, branch). Prints wall time, the runner's own CPU, its git
children's CPU and the runner's peak RSS.

Measures the workspace capture directly (runner.workspace, runner.redact): no public API
gives it.

    .venv/bin/python bench/capture.py [--files 100000]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner import workspace  # noqa: E402
from runner.redact import Redactor  # noqa: E402


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument(
        "--plain",
        action="store_true",
        help="no nested repository or look-alikes (what `git add` also survives)",
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="runner-bench-capture-") as d:
        tmp = Path(d)
        repo = tmp / "repo"
        repo.mkdir()
        (repo / "README.md").write_text("# bench\n")
        (repo / ".gitignore").write_text("build/\n")
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
        for a in (
            ["init", "-q", "-b", "main"],
            ["add", "-A"],
            ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "b"],
        ):
            subprocess.run(["git", *a], cwd=repo, check=True, env=env)
        ws = workspace.prepare_sync(repo, root=tmp / "work", name="run")
        for i in range(args.files):
            sub = ws.path / f"d{i // 100}"
            if i % 100 == 0:
                sub.mkdir()
            (sub / f"f{i}.txt").write_text(f"file {i}\n")
        (ws.path / "build").mkdir()
        for i in range(args.files // 10):
            (ws.path / "build" / f"o{i}").write_text("o\n")
        if not args.plain:
            subprocess.run(["git", "init", "-q", str(ws.path / "nested")], check=True, env=env)
            (ws.path / "nested" / "kept.txt").write_text("kept\n")
            for name in (".git ", ".git.", "git~1"):
                (ws.path / name).write_text("x\n")
        left: list[str] = []
        c0, g0, t0 = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN), time.monotonic()
        res = workspace.finish_sync(
            ws,
            branch_template="bench/{run}",
            fields={"run": "r", "task": "t", "model": "m"},
            message="bench",
            patch_path=tmp / "p.patch",
            redact=Redactor(["sk-bench-secret-0123456789"]),
            on_left_out=left.extend,
        )
        took = time.monotonic() - t0
        assert res is not None
        extra = "" if args.plain else ", a nested repository, 3 `.git` look-alikes"
        print(
            f"{args.files} files (+{args.files // 10} ignored{extra}): "
            f"{res.files_changed} files committed, {len(left)} left out"
        )
        print(
            f"finish: {took:.2f} s wall, runner CPU {cpu(resource.RUSAGE_SELF) - c0:.2f} s, "
            f"git CPU {cpu(resource.RUSAGE_CHILDREN) - g0:.2f} s, runner peak RSS "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
        )
        workspace.cleanup_sync(ws)


if __name__ == "__main__":
    main()
