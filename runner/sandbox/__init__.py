"""Where commands run: `make_executor` turns a run's sandbox settings into an `Executor`
(runner/sandbox/environment.py) — bubblewrap for `read-only` and `workspace-write`, the
host itself only for `danger-full-access`, and never the host as a quiet fallback;
`make_environment` wraps it, with the workspace, into the run's `local` Environment."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.sandbox.bwrap import BwrapExecutor, Limits, hand_over, probe
from runner.sandbox.environment import Environment, Executor
from runner.sandbox.hostview import user_folder
from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.sandbox.policy import PROTECTED_NAMES, Policy
from runner.sandbox.registry import RUN_DIRS
from runner.vocabulary import SandboxMode

__all__ = [
    "RUN_DIRS",
    "Policy",
    "SandboxMode",
    "make_environment",
    "make_executor",
    "make_policy",
    "user_folder",
]


def make_policy(
    mode: SandboxMode,
    *,
    workspace: Path,
    writable_roots: Sequence[Path] = (),
    network: bool = False,
    hidden: Sequence[Path] = (),
    mounted: Sequence[tuple[Path, Path]] = (),
) -> Policy:
    """A policy with every path resolved, as the sandbox will see it."""

    def real(p: Path) -> Path:
        return Path(os.path.realpath(p))

    roots = tuple(real(r) for r in writable_roots)
    return Policy(
        mode=mode,
        workspace=real(workspace),
        writable_roots=roots if mode == "workspace-write" else (),
        network_access=network,
        hidden=tuple(dict.fromkeys(real(h) for h in hidden)),
        mounted=tuple(dict.fromkeys((real(src), at) for src, at in mounted)),
    )


def make_executor(
    policy: Policy,
    *,
    limits: Limits | None = None,
    search_path: str | None = None,
    objects: Sequence[Path] | None = None,
) -> Executor:
    """The executor enforcing `policy`. Raises SandboxError where bubblewrap cannot run.

    When the runner is root, commands run as an unprivileged user, who is given the
    workspace and writable roots here (see runner/sandbox/bwrap.py).
    """
    if not policy.sandboxed:
        return LocalExecutor()
    host = probe(search_path)
    if host.uid is not None:
        hand_over([policy.workspace, *policy.writable()], host.uid)
    return BwrapExecutor(policy, host, limits, objects=objects)


def make_environment(
    policy: Policy,
    *,
    workdir: Path | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    search_path: str | None = None,
    objects: Sequence[Path] | None = None,
) -> Environment:
    """The `local` environment over `policy`'s workspace, its commands run by
    `make_executor` (so SandboxError where bubblewrap cannot run). Its file methods keep
    the sandbox's rules: nothing written when read-only, `.git` and `.runner` untouched
    when sandboxed. `workdir` is the workspace as the run names it (default: the policy's,
    every link resolved); `env` is what a command gets unless `exec` is given one."""
    executor = make_executor(policy, limits=limits, search_path=search_path, objects=objects)
    return LocalEnvironment(
        executor,
        policy.workspace if workdir is None else workdir,
        env=env,
        read_only=policy.mode == "read-only",
        protected=PROTECTED_NAMES if policy.sandboxed else (),
    )
