"""The sandbox tests' helpers: a broken bubblewrap, and a box that runs commands in a mode."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runner import workspace
from runner.sandbox import Policy, SandboxMode, make_policy
from runner.sandbox.bwrap import Limits
from runner.tools import ExecResult

FIXES = (
    "apt-get install bubblewrap",
    "sysctl kernel.unprivileged_userns_clone=1",
    "sysctl kernel.apparmor_restrict_unprivileged_userns=0",
    "danger-full-access",
)


def broken_bwrap(dir_: Path) -> Path:
    """A `bwrap` that fails as bubblewrap does on a kernel without user namespaces, and
    counts its starts."""
    dir_.mkdir()
    script = dir_ / "bwrap"
    script.write_text(
        "#!/bin/sh\n"
        f"echo started >> {dir_}/starts\n"
        "echo 'bwrap: No permissions to creating new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\n"
        "exit 1\n"
    )
    script.chmod(0o755)
    return dir_


@dataclass(frozen=True)
class Box:
    ws: workspace.Workspace
    outside: Path
    """A host directory anyone may write (mode 0777, under /var/tmp): writes there fail
    only because of the sandbox."""

    @property
    def path(self) -> Path:
        return self.ws.path

    def policy(
        self, mode: SandboxMode, *, network: bool = False, roots: Sequence[Path] = ()
    ) -> Policy:
        """The policy the batch builds for this workspace."""
        return make_policy(
            mode,
            workspace=self.path,
            writable_roots=roots,
            network=network,
            hidden=[self.path.parent],
        )


class Runner(Protocol):
    def __call__(
        self,
        policy: Policy,
        script: str,
        *,
        timeout_s: float = 20,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
    ) -> ExecResult: ...


@dataclass
class HostService:
    port: int
    accepted: int = 0


def out(res: ExecResult) -> str:
    return res.output.decode(errors="replace")
