"""Which branches `runner report branches` may delete.

The report directory is only a claim: it may come from an untrusted CI artifact or have
been edited, down to copying an older batch's batch id and entries. So a branch is deleted
only when the repository itself says that this batch made it:
- its name holds one of the batch's batch ids and the run's own name as path components
  (the default template is `runner/{batch}/{name}`);
- it still points at the commit the run recorded, made by the runner (author and
  committer `runner`) on the run's base, whose `Runner-Run` trailer is that batch id;
- its reflog has one entry: the runner creating it ("runner: result", by `runner`) at that
  commit, at a time inside the batch's own time (from the report's start, or the first
  session's start that the journal recorded for a resumed batch, to its end); an older
  batch's branch was made before, whatever batch id the report copies;
- no worktree has it checked out;
- its batch id is one the user vouched for. A report of one batch speaks for its own id;
  a report that holds several (a merged report's shards, or an edited report that added
  an older batch's id to `shards`) deletes only the branches of ids named with
  `--batch-id`. The time window comes from the report and the journal, both editable, so
  it only ever narrows: an edited report can swap one batch for another, never add one.
The deletion itself is git's compare-and-delete (`update-ref -d ref old`), so a branch
moved in between is kept.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from runner import workspace
from runner.errors import ConfigError, Problem
from runner.frozen import frozen
from runner.reports.model import Report
from runner.workspace import IDENTITY
from runner.workspace.names import component

RUN_ID = re.compile(r"[0-9a-f]{12}")
"""The batch ids `runner run` makes; a forged `main` or `release` is not one."""
SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


BranchState = Literal["present", "deleted", "gone", "moved", "checked-out", "foreign", "invalid"]


@frozen
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
    """The batch ids of the batch (a merged report has its shards' ids)."""
    return {i for i in (report.batch_id, *report.shards) if RUN_ID.fullmatch(i)}


def in_namespace(branch: str, ids: Iterable[str]) -> bool:
    """The name holds one of the batch's batch ids as a whole path component."""
    parts = branch.split("/")
    return any(i in parts for i in ids)


def names_the_run(branch: str, names: Iterable[str]) -> bool:
    """The name holds the run's own name (or its task id) as a path component, as every
    template the runner fills does (`runner/{batch}/{name}`; `-2` when the name was taken):
    a user's branch pointed at a runner commit (`keep/<batch id>`) does not."""
    wanted = {component(n) for n in names}
    parts = branch.split("/")
    parts[-1] = re.sub(r"-\d+$", "", parts[-1])
    return any(p in wanted for p in parts) or branch.split("/")[-1] in wanted


REFLOG_MESSAGE = "runner: result"
"""What the runner's reflog entry for a result branch says (workspace.finish)."""


def batch_window(report: Report, first_start: str | None = None) -> tuple[float, float] | None:
    """The batch's time as epoch seconds, from its (first session's) start to its end;
    None when the report's times are not ISO 8601."""
    try:
        times = [_epoch(t) for t in (report.started_at, report.finished_at)]
        if first_start is not None:
            times[0] = min(times[0], _epoch(first_start))
    except ValueError:
        return None
    # git writes whole seconds, rounded down: a branch made in the batch's first second
    # has the start's second.
    return math.floor(times[0]), times[1]


def _epoch(text: str) -> float:
    t = dt.datetime.fromisoformat(text)
    return (t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)).timestamp()


def chosen_ids(report: Report, named: Iterable[str], *, delete: bool) -> set[str]:
    """The batch ids whose branches may be deleted: the report's only id, or those of its
    ids the user named (`--batch-id`). Raises ConfigError for a named id the report does not
    hold, and for `--delete` on a report of several ids with none named: the report alone
    cannot add a batch."""
    ids, wanted = batch_ids(report), set(named)
    listed = ", ".join(sorted(ids)) or "none"
    unknown = sorted(wanted - ids)
    if unknown:
        raise ConfigError(
            [
                Problem(
                    "(command line)",
                    None,
                    "--batch-id",
                    f"{unknown[0]} is not a batch id of this report (it holds {listed})",
                )
            ]
        )
    if delete and len(ids) > 1 and not wanted:
        raise ConfigError(
            [
                Problem(
                    "(command line)",
                    None,
                    "--delete",
                    f"the report holds {len(ids)} batch ids ({listed}); an edited report "
                    "can add an older batch's id, so name each batch whose branches should "
                    "go with --batch-id ID (a merged report: each shard's id)",
                )
            ]
        )
    return wanted or ids


def made_by_batch(
    repo: Path,
    branch: str,
    commit: str,
    ids: set[str],
    window: tuple[float, float] | None,
    chosen: set[str] | None = None,
) -> str | None:
    """Why the repository does not say that this batch made `branch` at `commit`; None
    when it does (its commit's trailer and its reflog, see the module's docstring).
    `chosen`: the ids whose branches may go (all of `ids` when None)."""
    trailers = workspace.run_trailers(repo, commit) or []
    if len(trailers) != 1 or trailers[0] not in ids or trailers[0] not in branch.split("/"):
        return "its commit's Runner-Run trailer does not name this batch's run in its name"
    if chosen is not None and trailers[0] not in chosen:
        return f"its batch id {trailers[0]} was not named with --batch-id"
    log = workspace.reflog(repo, branch)
    if not log:
        return "it has no reflog to show who made it"
    first = log[0]
    if (first.commit, first.message, (first.name, first.email)) != (
        commit,
        REFLOG_MESSAGE,
        IDENTITY,
    ):
        return "its reflog does not show the runner creating it at this commit"
    if len(log) > 1:
        return "its reflog shows changes since the runner made it"
    if window is None:
        return "the report's started_at and finished_at are not times"
    if not window[0] <= first.time <= window[1]:
        made = dt.datetime.fromtimestamp(first.time, dt.UTC).isoformat()
        return f"made at {made}, outside this batch's time"
    return None


def review(
    repo: Path,
    report: Report,
    *,
    delete: bool,
    first_start: str | None = None,
    chosen: set[str] | None = None,
) -> list[BranchCheck]:
    """`first_start`: when a resumed batch's first session started (its journal says);
    `chosen`: the batch ids whose branches may be deleted (`chosen_ids`)."""
    ids = batch_ids(report)
    window = batch_window(report, first_start)
    checked_out = workspace.checked_out_branches(repo)
    out: list[BranchCheck] = []
    for t in report.runs:
        if t.result is None or t.result.branch is None:
            continue
        branch, commit = t.result.branch, t.result.commit
        base = t.workspace.base if t.workspace is not None else ""
        state, reason = _state(repo, branch, commit, base, ids, checked_out)
        if state == "present" and not names_the_run(branch, (t.run or t.id, t.id)):
            state, reason = "foreign", "its name does not name this run"
        if state == "present":
            why = made_by_batch(repo, branch, commit, ids, window, chosen)
            if why is not None:
                state, reason = "foreign", why
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
        return "foreign", "its name holds none of this batch's ids"
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
