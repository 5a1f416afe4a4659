"""The runner's peak memory when an agent leaves huge files in its workspace.

Makes a workspace, writes N files of SIZE MiB into it through the real sandbox (as the
agent would, with `head -c` from /dev/urandom, so git can neither compress nor delta
them), then does what the batch does at the end of a run: redact secrets from the
changed files (streamed), commit, write the patch (streamed to disk), remove the
workspace. Prints the runner process's peak RSS (git's own memory is its children's,
printed apart) and the wall time of each step.

Measures the workspace's end-of-run steps directly (runner.workspace, runner.redact,
runner.sandbox): no public API gives it.

    .venv/bin/python bench/hostile.py [--size-mib 1024] [--files 1]

Budget: DESIGN.md's, the constant below (first set by issue 14).
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

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runner import workspace  # noqa: E402
from runner.redact import Redactor  # noqa: E402
from runner.sandbox import make_executor, make_policy  # noqa: E402

# DESIGN.md, "Performance budgets": the runner's peak RSS with a 1 GiB file written.
PEAK_RSS_BUDGET_MB = 200.0


def rss_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--files", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="runner-bench-hostile-", dir="/var/tmp") as d:
        tmp = Path(d)
        repo = tmp / "repo"
        repo.mkdir()
        (repo / "README.md").write_text("# bench\n")
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
        for a in (
            ["init", "-q", "-b", "main"],
            ["add", "-A"],
            ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "-m", "b"],
        ):
            subprocess.run(["git", *a], cwd=repo, check=True, env=env)
        print(f"start: runner peak RSS {rss_mb():.0f} MB")
        ws = workspace.prepare_sync(repo, root=tmp / "work", name="run")
        policy = make_policy("workspace-write", workspace=ws.path, hidden=[ws.path.parent])
        script = "; ".join(
            f"head -c {args.size_mib}M /dev/urandom > big{i}.bin" for i in range(args.files)
        )
        t0 = time.monotonic()
        res = anyio.run(
            lambda: make_executor(policy).run(
                ["bash", "-c", script], cwd=ws.path, timeout_s=600, env={"PATH": "/usr/bin:/bin"}
            )
        )
        assert res.exit_code == 0, res.output
        print(f"agent wrote {args.files} x {args.size_mib} MiB in {time.monotonic() - t0:.1f} s")
        t0 = time.monotonic()
        result = workspace.finish_sync(
            ws,
            branch_template="bench/{run}",
            fields={"run": "r"},
            message="bench\n",
            patch_path=tmp / "out" / "run.patch",
            redact=Redactor(["sk-bench-secret-0123456789abcdef"]),
        )
        assert result is not None
        took = time.monotonic() - t0
        size = (tmp / "out" / "run.patch").stat().st_size
        print(f"finish (redact scan + commit + patch of {size / 2**20:.0f} MiB): {took:.1f} s")
        t0 = time.monotonic()
        workspace.cleanup_sync(ws)
        print(f"cleanup: {time.monotonic() - t0:.1f} s")
        rss = rss_mb()
        print(
            f"runner peak RSS: {rss:.0f} MB (budget {PEAK_RSS_BUDGET_MB:.0f} MB, "
            f"ratio {rss / PEAK_RSS_BUDGET_MB:.2f}; "
            f"git children's peak: {rss_mb(resource.RUSAGE_CHILDREN):.0f} MB)"
        )


if __name__ == "__main__":
    main()
