"""Which branches `runner report branches` may delete.

The report directory is only a claim: it may come from an untrusted CI artifact or have
been edited. So a branch is deleted only when the repository itself agrees that the batch
made it: its name holds one of the batch's run ids as a path component (the default
template is `runner/{run}/{name}`), it still points at the commit the run recorded, that
commit was made by the runner on top of the run's base, and no worktree has it checked
out. The deletion itself is git's compare-and-delete (`update-ref -d ref old`), so a
branch moved in between is kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from runner import workspace
from runner.reports.model import Report
from runner.workspace import IDENTITY
from runner.workspace.names import component

RUN_ID = re.compile(r"[0-9a-f]{12}")
"""The run ids `runner run` makes; a forged `main` or `release` is not one."""
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


BranchState = Literal["present", "deleted", "gone", "moved", "checked-out", "foreign", "invalid"]


@dataclass(frozen=True)
class BranchCheck:
    """What the repository says of one branch a report claims."""

    branch: str
    commit: str
    state: BranchState
    reason: str = ""

    def line(self, deleting: bool) -> str:
        kept = deleting and self.state not in ("deleted", "gone")
        why = f" ({self.reason})" if self.reason else ""
        return f"{self.branch} {self.commit[:12]} {self.state}{why}{', kept' if kept else ''}"


def batch_ids(report: Report) -> set[str]:
    """The run ids of the batch (a merged report has its shards' ids)."""
    return {i for i in (report.run_id, *report.shards) if RUN_ID.fullmatch(i)}


def in_namespace(branch: str, ids: Iterable[str]) -> bool:
    """The name holds one of the batch's run ids as a whole path component."""
    parts = branch.split("/")
    return any(i in parts for i in ids)


def names_the_run(branch: str, names: Iterable[str]) -> bool:
    """The name holds the run's own name (or its task id) as a path component, as every
    template the runner fills does (`runner/{run}/{name}`; `-2` when the name was taken):
    a user's branch pointed at a runner commit (`keep/<run id>`) does not."""
    wanted = {component(n) for n in names}
    parts = branch.split("/")
    parts[-1] = re.sub(r"-\d+$", "", parts[-1])
    return any(p in wanted for p in parts) or branch.split("/")[-1] in wanted


def review(repo: Path, report: Report, *, delete: bool) -> list[BranchCheck]:
    ids = batch_ids(report)
    checked_out = workspace.checked_out_branches(repo)
    out: list[BranchCheck] = []
    for t in report.tasks:
        if t.result is None or t.result.branch is None:
            continue
        branch, commit = t.result.branch, t.result.commit
        base = t.workspace.base if t.workspace is not None else ""
        state, reason = _state(repo, branch, commit, base, ids, checked_out)
        if state == "present" and not names_the_run(branch, (t.run or t.id, t.id)):
            state, reason = "foreign", "its name does not name this run"
        if delete and state == "present":
            ok = workspace.delete_branch_at(repo, branch, commit)
            state, reason = ("deleted", "") if ok else ("moved", "changed meanwhile")
        out.append(BranchCheck(branch, commit, state, reason))
    return out


def _state(
    repo: Path, branch: str, commit: str, base: str, ids: set[str], checked_out: set[str] | None
) -> tuple[BranchState, str]:
    if not SHA.fullmatch(commit) or not workspace.is_branch_name(repo, branch):
        return "invalid", "not a branch name and commit"
    if not in_namespace(branch, ids):
        return "foreign", "its name holds none of this batch's run ids"
    tip = workspace.branch_tip(repo, branch)
    if tip is None:
        return "gone", ""
    if tip != commit:
        return "moved", ""
    if checked_out is None or f"refs/heads/{branch}" in checked_out:
        return "checked-out", "in a worktree" if checked_out else "worktrees unknown"
    if workspace.commit_identity(repo, commit) != [*IDENTITY, *IDENTITY, base]:
        return "foreign", "not a commit the runner made on the run's base"
    return "present", ""
