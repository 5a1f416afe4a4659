"""Start-up: `runner run` from its start to its first model request, this checkout against
another (`--against`, a checkout with its own `.venv`, e.g. a worktree of an older commit).

Two measures, because wall time on a shared machine moves by more than the differences
that matter:
- wall time to the first request, over alternating pairs (median and minimum);
- with valgrind installed, the instructions the runner's own process executes until it
  connects (its children, git and bubblewrap, are not counted): the same to 0.1% from run
  to run, whatever else the machine does. Waiting (on git, the disk, the sandbox probe) is
  not in it; the wall pairs show that.

Runs the CLI as a user does: no private import.

    .venv/bin/python bench/startup.py --against ../old-checkout [--pairs 30]

Before measuring, byte-compile both checkouts (`python -m compileall -q runner`): with
PYTHONDONTWRITEBYTECODE set, every edited module is compiled again at each start.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.gitrepo import make_git_repo  # noqa: E402
from bench.loopback import ThreadedServer, reply_message  # noqa: E402

BUDGET_S = 0.25
"""DESIGN.md: start to first request."""

EXIT_AT_CONNECT = """\
import os, runpy, sys
def hook(event, args):
    if event == "socket.connect" and isinstance(args[1], tuple) and args[1][0] == "127.0.0.1":
        os._exit(0)
sys.addaudithook(hook)
sys.argv = ["runner"] + sys.argv[1:]
runpy.run_module("runner", run_name="__main__", alter_sys=True)
"""
"""Run as the runner's main script: the process ends the moment it first connects."""


@contextmanager
def one_task() -> Iterator[tuple[ThreadedServer, Path, Path]]:
    """A loopback model that answers at once, a repository and a one-run task file for it
    (the server, a temp folder, the task file): the start-up benches' fixture."""
    with (
        ThreadedServer(lambda req, i: reply_message("done")) as srv,
        tempfile.TemporaryDirectory() as tmp,
    ):
        make_git_repo(Path(tmp) / "repo")
        tasks = Path(tmp) / "tasks.yaml"
        tasks.write_text(
            "version: 1\n"
            f"providers:\n  fake: {{base_url: '{srv.base_url}'}}\n"
            "tasks:\n  - {id: a, prompt: hi, model: fake/m, repo: repo}\n"
        )
        yield srv, Path(tmp), tasks


def first_request_s(
    srv: ThreadedServer, python: Path | str, tasks: Path, out: Path, *, cwd: Path | None = None
) -> float:
    """Seconds from starting `python -m runner run` to the server's receiving its first
    request (`out` must be a new folder)."""
    before, t0 = len(srv.requests), time.monotonic()
    argv = [str(python), "-m", "runner", "run", str(tasks), "--out", str(out)]
    env = {**os.environ, "FAKE_API_KEY": "k" * 20}
    subprocess.run(argv, check=True, capture_output=True, cwd=cwd, env=env)
    return srv.requests[before].received_at - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--against", type=Path, required=True, help="another checkout")
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--no-valgrind", action="store_true")
    args = ap.parse_args()
    roots = [args.against.resolve(), ROOT]
    for r in roots:
        if not (r / ".venv" / "bin" / "python").exists():
            sys.exit(f"{r} has no .venv (run make setup there)")
    with one_task() as (srv, tmp, tasks):
        env = {**os.environ, "FAKE_API_KEY": "k" * 20}
        walls: dict[Path, list[float]] = {r: [] for r in roots}
        for i in range(args.pairs):
            for k, r in enumerate(roots):
                out = tmp / f"out-{i}-{k}"
                walls[r].append(first_request_s(srv, r / ".venv/bin/python", tasks, out, cwd=r))
        print(f"wall time to the first request, {args.pairs} alternating pairs:")
        for r in roots:
            mid, low = 1000 * statistics.median(walls[r]), 1000 * min(walls[r])
            print(f"  {r.name:24} median {mid:6.1f} ms  min {low:6.1f} ms")
        ratio = statistics.median(walls[ROOT]) / statistics.median(walls[roots[0]])
        print(
            f"  ratio (this / against): {ratio:.3f}; budget {BUDGET_S * 1000:.0f} ms: "
            f"{statistics.median(walls[ROOT]) / BUDGET_S:.2f}x"
        )
        if args.no_valgrind or shutil.which("valgrind") is None:
            print("instructions: skipped (--no-valgrind, or valgrind is not installed)")
            return
        hook = tmp / "exit_at_connect.py"
        hook.write_text(EXIT_AT_CONNECT)
        counts = {}
        for k, r in enumerate(roots):
            out = tmp / f"vg-{k}"
            argv = [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                str(r / ".venv/bin/python"),
                str(hook),
                "run",
                str(tasks),
                "--out",
                str(out),
            ]
            done = subprocess.run(argv, capture_output=True, text=True, cwd=r, env=env)
            found = re.search(r"Collected : (\d+)", done.stderr)
            if found is None:
                sys.exit(f"valgrind gave no count for {r}:\n{done.stderr[-2000:]}")
            counts[r] = int(found[1])
        print("instructions of the runner's process to its first request:")
        for r in roots:
            print(f"  {r.name:24} {counts[r] / 1e6:8.1f} M")
        print(f"  ratio (this / against): {counts[ROOT] / counts[roots[0]]:.3f}")


if __name__ == "__main__":
    main()
