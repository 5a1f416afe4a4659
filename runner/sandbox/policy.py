"""What a run's sandbox allows, as one value.

The executor enforces a `Policy` and the permissions message the model reads is built
from the same value, so what the model is told and what holds cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

from runner.frozen import frozen
from runner.vocabulary import SandboxMode

PROTECTED_NAMES = (".git", ".runner")
"""Inside a writable root these stay read-only: a writable `.git` lets a command plant
hooks or config that run later outside the sandbox (Codex protects `.git` the same way)."""

TMP_NOTE = (
    "`/tmp` is writable but private to each command: it starts empty and is "
    "discarded when the command ends."
)
PROTECTED_NOTE = (
    "`.git` and `.runner` inside the writable roots are read-only: git "
    "commands that only read (status, diff, log, show) work; add, commit "
    "and checkout do not."
)
LIFETIME_NOTE = (
    "A command ends together with every process it started: nothing keeps "
    "running in the background after it returns."
)


@frozen
class Policy:
    """Paths are absolute and resolved (symlinks followed), as bubblewrap sees them."""

    mode: SandboxMode
    workspace: Path
    writable_roots: tuple[Path, ...] = ()
    """Beyond the workspace; only used in `workspace-write`."""
    network_access: bool = False
    hidden: tuple[Path, ...] = ()
    """Absent inside the sandbox (the runs' directory, the out dir, the user's
    repository...), except for the workspace and the writable roots within."""
    mounted: tuple[tuple[Path, Path], ...] = ()
    """(a folder on the host, where the sandbox shows it) read-only: the skills, copied
    by the runner (runner/skills.py `stage`)."""

    @property
    def sandboxed(self) -> bool:
        return self.mode != "danger-full-access"

    @property
    def network(self) -> bool:
        """Whether commands reach the network: without a sandbox nothing holds them."""
        return self.network_access or not self.sandboxed

    def writable(self) -> tuple[Path, ...]:
        """Every place a command may change, besides its private /tmp."""
        if self.mode == "read-only":
            return ()
        roots: list[Path] = []
        for root in (self.workspace, *self.writable_roots):
            if root not in roots:
                roots.append(root)
        return tuple(roots)

    def prompt_roots(self) -> tuple[Path, ...]:
        """The roots the permissions message lists after cwd (the workspace)."""
        if self.mode != "workspace-write":
            return ()
        return tuple(r for r in self.writable() if r != self.workspace)

    def notes(self) -> tuple[str, ...]:
        """Lines for the permissions message about what the sandbox adds to the mode."""
        if not self.sandboxed:
            return ()
        if self.mode == "workspace-write":
            return (TMP_NOTE, PROTECTED_NOTE, LIFETIME_NOTE)
        return (TMP_NOTE, LIFETIME_NOTE)
