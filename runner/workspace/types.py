"""What a workspace and its result are."""

from __future__ import annotations

from pathlib import Path

from runner.frozen import frozen


@frozen
class Workspace:
    """One run's checkout of `base`. Give the agent `path` (and read-only access to
    `sandbox_objects`, which `path/.git` borrows through alternates); never
    `private_dir`, nor any of `user_paths`."""

    path: Path
    """The work tree the agent works in."""
    repo: Path
    """The user's repository (resolved)."""
    git_dir: Path
    """The user's git dir (absolute); refs are created here."""
    objects: Path
    """The user's object store: result objects are written here; bind it read-only."""
    base: str
    """The commit the task's `git.base` resolved to when the workspace was made."""
    base_tree: str
    base_dirty: bool
    """The user's tree had uncommitted or untracked changes; they are not in the workspace."""
    setup_s: float
    """Wall time `prepare` took, for the report."""
    private_dir: Path
    """Runner-private git dir and index (outside `path`, so the agent cannot doctor them)."""
    sandbox_objects: tuple[Path, ...] = ()
    """What `path/.git` borrows through alternates: one store holding only what `base`
    reaches, shared by the runs on the same repository and base (see
    `prepare.base_objects`). The sandbox binds it, so no mount source names the user's
    repository."""
    user_paths: tuple[Path, ...] = ()
    """The user's repository as the sandbox must hide it: `repo`, its work tree's top
    (and a superproject's), its git dirs and every object store it reads."""

    @property
    def _private_git(self) -> Path:
        return self.private_dir / "git"

    @property
    def _index(self) -> Path:
        return self.private_dir / "index"


@frozen
class FileChange:
    """One path in a result, as `git diff-tree -M` sees it."""

    path: str
    status: str
    """`A`dded, `M`odified, `D`eleted, `R`enamed, `T`ype changed (e.g. file to symlink)."""
    old_path: str | None
    insertions: int
    deletions: int
    binary: bool


@frozen
class Result:
    """What a run produced: a commit on top of `base`, its patch, and maybe a branch."""

    commit: str
    base: str
    branch: str | None
    """The branch created in the user's repository, or None (not asked for, or scope
    violations). The final name may carry a `-2`, `-3`, ... suffix."""
    files: tuple[FileChange, ...]
    insertions: int
    deletions: int
    patch_path: Path
    violations: tuple[str, ...] = ()

    @property
    def files_changed(self) -> int:
        return len(self.files)

    @property
    def changed_paths(self) -> list[str]:
        """Every path touched, both sides of a rename included."""
        out: list[str] = []
        for f in self.files:
            if f.old_path is not None:
                out.append(f.old_path)
            out.append(f.path)
        return out


@frozen
class Scope:
    """Which paths a run may change and how much. `allowed=None` allows everything."""

    allowed: list[str] | None = None
    forbidden: list[str] | None = None
    max_diff_lines: int | None = None


@frozen
class PushResult:
    remote: str
    branch: str
    ref: str
