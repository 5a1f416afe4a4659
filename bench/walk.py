"""The walk of one run: every call between two runner modules while `runner.run.live`
runs, and how many of them climb back up to a higher layer.

Why: a run whose life is a sequence of steps returning values goes down the layers and
comes back by returning; each call from a lower layer into a higher one (a callback, a
back-reference to the run object) is a place where a reader must jump up the stack to
follow what happens. Issue 29 asks for at most 5.

A real batch of one run (in-process, loopback server in a thread, a check, a branch and a
push to a bare remote) is profiled with `sys.setprofile`. A *stop* is a distinct call edge
(caller function -> callee function) between two runner modules, the caller being the
nearest runner frame up the stack; a *climb* is such an edge whose callee sits in a
higher layer than its caller, by the import-linter layer order in pyproject.toml. Calls
made while a runner module is being imported (loaded on first use during the run) are
loading, not the run's flow, and are left out.

    .venv/bin/python bench/walk.py [--list]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import tomllib
from collections import Counter
from pathlib import Path
from types import FrameType

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import runner  # noqa: E402
from bench.gitrepo import make_git_repo  # noqa: E402
from bench.loopback import (  # noqa: E402
    Reply,
    Request,
    ThreadedServer,
    per_conversation,
    reply_function_call,
    reply_message,
)


def layers() -> list[list[str]]:
    """The layer contract's modules, highest layer first."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for c in conf["tool"]["importlinter"]["contracts"]:
        if c["type"] == "layers":
            return [
                [m.strip() for m in layer.replace("|", ":").split(":")] for layer in c["layers"]
            ]
    raise SystemExit("no layers contract in pyproject.toml")


def layer_of(module: str, table: list[list[str]]) -> int | None:
    best: tuple[int, int] | None = None
    for i, layer in enumerate(table):
        for m in layer:
            if (module == m or module.startswith(m + ".")) and (best is None or len(m) > best[1]):
                best = (i, len(m))
    return None if best is None else best[0]


def _script(req: Request, i: int) -> Reply:
    if i == 0:
        patch = "*** Begin Patch\n*** Add File: result.txt\n+made by the walk\n*** End Patch"
        return reply_function_call("apply_patch", {"input": patch}, call_id="p0")
    if i == 1:
        plan = [{"step": "add result.txt", "status": "completed"}]
        return reply_function_call("update_plan", {"plan": plan}, call_id="u1")
    return reply_message("done")


class Walk:
    def __init__(self) -> None:
        self.active = False
        self.edges: dict[tuple[str, str], tuple[str, str]] = {}
        """(caller, callee) function names -> their modules, in first-seen order."""
        self.calls: Counter[tuple[str, str]] = Counter()
        """How many times each edge was taken."""

    def profile(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        mod = frame.f_globals.get("__name__", "")
        if not mod.startswith("runner"):
            return
        name = f"{mod}:{frame.f_code.co_qualname}"
        if name == "runner.run:live":
            self.active = True
        if not self.active or _importing(frame):
            return
        up = frame.f_back
        while up is not None and not up.f_globals.get("__name__", "").startswith("runner"):
            up = up.f_back
        if up is None:
            return
        caller_mod = up.f_globals["__name__"]
        if caller_mod == "runner.batch" and name != "runner.run:live":
            # `live` has returned: the batch goes on
            self.active = False
            return
        if caller_mod != mod:
            caller = f"{caller_mod}:{up.f_code.co_qualname}"
            self.edges.setdefault((caller, name), (caller_mod, mod))
            self.calls[(caller, name)] += 1


def _importing(frame: FrameType | None) -> bool:
    """Whether a runner module is being imported at this point: a module loaded on first
    use during the run (the patch format at the first patch) runs its body and its class
    decorators then, which is loading code, not the run's flow."""
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__", "").startswith(
            "runner"
        ):
            return True
        frame = frame.f_back
    return False


def run_one(tmp: Path, walk: Walk) -> str:
    remote = tmp / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    repo = make_git_repo(tmp / "repo")
    subprocess.run(["git", "-C", str(repo), "remote", "add", "origin", str(remote)], check=True)
    with ThreadedServer(per_conversation(_script)) as srv:
        path = tmp / "tasks.yaml"
        path.write_text(
            "version: 1\n"
            f"providers:\n  fake: {{base_url: '{srv.base_url}'}}\n"
            "defaults:\n  model: fake/m\n  tools: [apply_patch, update_plan]\n"
            "  git: {push: {remote: origin}}\n"
            f"tasks:\n  - {{id: w, prompt: go, repo: '{repo}', check: 'test -f result.txt'}}\n"
        )
        runs = runner.load_runs(path)

        async def go() -> str:
            sys.setprofile(walk.profile)
            threading.setprofile(walk.profile)  # git and file work in worker threads
            try:
                result = await runner.run_batch(runs, tmp / "out")
            finally:
                sys.setprofile(None)
                threading.setprofile(None)  # type: ignore[arg-type]
            return str(result.runs[0].status)

        return anyio.run(go)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--list", action="store_true", help="print every stop")
    args = ap.parse_args()
    table = layers()
    walk = Walk()
    with tempfile.TemporaryDirectory() as d:
        os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
        status = run_one(Path(d), walk)
    climbs = []
    entered: Counter[str] = Counter()
    for (caller, callee), (cm, em) in walk.edges.items():
        entered[em] += 1
        lc, le = layer_of(cm, table), layer_of(em, table)
        up = lc is not None and le is not None and le < lc
        if up:
            climbs.append((caller, callee))
        if args.list:
            print(f"{'UP ' if up else '   '}{caller} -> {callee}")
    print(f"run status: {status}")
    print(f"stops (distinct calls between runner modules): {len(walk.edges)}")
    taken = sum(walk.calls[c] for c in climbs)
    print(f"climbs back up to a higher layer: {len(climbs)} (taken {taken} times)")
    for caller, callee in climbs:
        print(f"  {caller} -> {callee}  x{walk.calls[(caller, callee)]}")
    top = ", ".join(f"{m} {n}" for m, n in entered.most_common(6))
    print(f"modules entered most: {top}")


if __name__ == "__main__":
    main()
