"""The batch journal: what `--resume` needs to skip finished runs after a crash.

One small file per run under `DIR/journal/`, named by the run's fingerprint and replaced
atomically: after kill -9 each file is the old version or the new one, never half. A run
is written `started` (with the branch it will create) before its thread starts and
`finished` (with its whole report entry) after its result is kept, so a resumed batch
knows which runs are done and which branch a killed attempt may have left.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from runner import hostfs
from runner.errors import ConfigError, Problem, UnsafeFileError
from runner.frozen import frozen
from runner.fsutil import atomic_write_text, sync_written
from runner.vocabulary import NOT_WORKING, RunStatus, Verdict

if TYPE_CHECKING:  # loaded by `entries`, not at start-up
    from runner.reports.model import RedoneReport, RunReport

REDO_STATUSES = frozenset({RunStatus.INTERRUPTED})
"""Finished runs with these statuses are run again by `--resume`; a run skipped by the
batch budget has no `finished` record and is run again too."""


@frozen
class Entry:
    state: str
    run: str
    branch: str | None
    report: RunReport | None
    commit: str | None = None
    """The result commit, recorded before its branch is made: resume deletes the
    branch only while it still points there."""
    redone: RedoneReport | None = None
    """What attempts before this one spent (a `started` record carries it, so a redo
    killed in its turn does not lose it)."""


@frozen
class Pins:
    """What a batch's runs see besides their settings: the day and zone
    `<environment_context>` states when the task pins none, and the commit each
    repository's `git.base` named when the batch began. Kept in `batch.json`, so a resumed
    batch runs its remaining runs on what the finished ones ran on, not on the machine's
    new day, `$TZ` or a commit made since. `dates` and `zones` are the pinned values
    (`--date`, `--timezone`, the task file's), only to name them when they changed."""

    today: str
    tz: str
    dates: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    bases: tuple[tuple[str, str, str], ...] = ()
    """(repository, `git.base` as written, the commit it named)."""

    def base(self, repo: Path, base: str) -> str:
        """The commit to start a run from: the recorded one, else `base` as written."""
        for r, b, sha in self.bases:
            if r == str(repo) and b == base:
                return sha
        return base

    def as_json(self) -> dict[str, Any]:
        return {
            "today": self.today,
            "timezone": self.tz,
            "dates": list(self.dates),
            "zones": list(self.zones),
            "bases": [list(b) for b in self.bases],
        }

    @classmethod
    def read(cls, data: Any, now: Pins) -> Pins:
        """The recorded pins, each one missing (a journal before pins) taken from `now`."""
        if not isinstance(data, dict):
            return now
        today, tz = data.get("today"), data.get("timezone")
        bases = {(r, b): sha for r, b, sha in now.bases}
        recorded = data.get("bases")
        if isinstance(recorded, list) and all(_strs(b, 3) for b in recorded):
            bases.update({(r, b): sha for r, b, sha in recorded})
        return cls(
            today if isinstance(today, str) else now.today,
            tz if isinstance(tz, str) else now.tz,
            tuple(data["dates"]) if _strs(data.get("dates")) else now.dates,
            tuple(data["zones"]) if _strs(data.get("zones")) else now.zones,
            tuple((r, b, sha) for (r, b), sha in bases.items()),
        )


def _strs(value: Any, length: int | None = None) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(x, str) for x in value)
        and (length is None or len(value) == length)
    )


def pin_note(kept: Pins, now: Pins) -> str | None:
    """What `--resume` keeps of the batch's start that this machine now says otherwise."""
    said = []
    if kept.today != now.today:
        said.append(f"date {kept.today} (today here: {now.today})")
    if kept.tz != now.tz:
        said.append(f"zone {kept.tz} (here now: {now.tz})")
    heads = {(r, b): sha for r, b, sha in now.bases}
    for r, b, sha in kept.bases:
        if heads.get((r, b), sha) != sha:
            said.append(f"{r} at {sha[:12]} ({b} is now {heads[(r, b)][:12]})")
    if not said:
        return None
    return (
        "runner: the remaining runs use what the batch started with: "
        + "; ".join(said)
        + "; to run on what is here now, start a new batch with --force"
    )


def _batch_id(meta: Any) -> Any:
    """The batch id a journal's batch.json holds: `run_id` in journals written before
    the rename, so `--resume` still continues a batch an older runner started."""
    if not isinstance(meta, dict):
        return None
    return meta.get("batch_id", meta.get("run_id"))


class Journal:
    def __init__(self, out_dir: Path) -> None:
        self.dir = out_dir / "journal"
        self.runs = self.dir / "runs"
        self._redone: dict[str, dict[str, Any]] = {}
        """The earlier attempts' spend of each redone run, repeated in its records."""
        self._synced = False
        """Whether batch.json is on the disk. It and the `started` records are written
        without a sync (four fsyncs, 2-30 ms before a batch's first request): a crash of
        the machine that loses them loses nothing a resume needs, since no branch exists
        yet. The first durable record (`branching`, `finished`) syncs batch.json first."""

    def start_batch(
        self,
        *,
        batch_id: str,
        task_file: str,
        resume: bool,
        batch: dict[str, Any] | None = None,
        pins: Pins | None = None,
    ) -> str:
        """The batch's id: a resumed batch keeps the one it started with, so branch
        names of redone runs are the names their killed attempts would have used.

        `batch` is the batch identity (task file hash, run set, K and N). `--resume` of a
        directory holding another batch or another shard is refused: its finished runs
        would silently drop out of the report. A fresh batch in a directory an earlier
        batch wrote clears that batch's `threads/` and `patches/` too, so the directory
        holds one batch only. `pins` are recorded by a fresh batch (see `Pins`); a resumed
        batch reads them back with `pins`."""
        meta = self.dir / "batch.json"
        old: Any = None
        with contextlib.suppress(OSError, ValueError, RecursionError):
            old = json.loads(meta.read_text(encoding="utf-8"))
        if resume and isinstance(_batch_id(old), str):
            theirs, their_pins = old.get("batch"), old.get("pins")
            if batch is not None and isinstance(theirs, dict) and theirs != batch:
                raise ConfigError(
                    [
                        Problem(
                            str(meta),
                            None,
                            "--resume",
                            f"{self.dir.parent} holds {_other(theirs, batch, their_pins, pins)}; "
                            "resume it with its own flags, or give this batch "
                            "a new --out",
                        )
                    ]
                )
            return str(_batch_id(old))
        if (
            resume
            and meta.is_file()
            and any(e.state == "finished" for e in self.entries().values())
        ):
            # Starting afresh would drop those runs' results and leave their branches.
            raise ConfigError(
                [
                    Problem(
                        str(meta),
                        None,
                        "--resume",
                        "cannot be read as this batch's record, yet the journal holds "
                        "finished runs; restore the file, or run without --resume (or with "
                        "a new --out) to start a new batch",
                    )
                ]
            )
        if meta.is_file():  # an earlier batch's out directory: its files go with it
            for sub in ("threads", "patches", "inputs"):
                shutil.rmtree(self.dir.parent / sub, ignore_errors=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        started = dt.datetime.now(dt.UTC).isoformat()
        atomic_write_text(
            meta,
            json.dumps(
                {
                    "batch_id": batch_id,
                    "task_file": task_file,
                    "batch": batch,
                    "started_at": started,
                    "pins": None if pins is None else pins.as_json(),
                }
            )
            + "\n",
            durable=False,
        )
        self._synced = False
        return batch_id

    def pins(self, now: Pins) -> Pins:
        """The pins this journal's batch recorded, filled in from `now` where it has none."""
        data: Any = None
        with contextlib.suppress(OSError, ValueError, RecursionError):
            data = json.loads((self.dir / "batch.json").read_text(encoding="utf-8"))
        return Pins.read(data.get("pins") if isinstance(data, dict) else None, now)

    def first_start(self, batch_id: str) -> str | None:
        """When batch `batch_id` began its first session, as this journal recorded it; a
        resumed batch's report starts at its last session. Read without following links
        (the directory may be an artifact); None when unknown."""
        try:
            with hostfs.open_parent(self.dir, "batch.json") as (dir_fd, name):
                fd = hostfs.open_regular(name, dir_fd, str(self.dir / "batch.json"))
            try:
                data = json.loads(hostfs.read_bytes(fd, 1 << 16))
            finally:
                os.close(fd)
        except (OSError, ValueError, RecursionError, UnsafeFileError):
            return None
        if _batch_id(data) != batch_id:
            return None
        started = data.get("started_at")
        return started if isinstance(started, str) else None

    def entries(self) -> dict[str, Entry]:
        """Every readable record by fingerprint; an unreadable one counts as absent."""
        from runner.reports.model import RedoneReport, RunReport

        out: dict[str, Entry] = {}
        if not self.runs.is_dir():
            return out
        for path in sorted(self.runs.glob("*.json")):
            try:
                data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
                report = (
                    RunReport.model_validate(data["report"])
                    if data.get("report") is not None
                    else None
                )
                commit = data.get("commit") or (
                    report.result.commit if report is not None and report.result else None
                )
                out[path.stem] = Entry(
                    str(data["state"]),
                    str(data["run"]),
                    data.get("branch"),
                    report,
                    commit if isinstance(commit, str) else None,
                    RedoneReport.model_validate(data["redone"]) if data.get("redone") else None,
                )
            except (OSError, ValueError, RecursionError, KeyError, TypeError, ValidationError):
                continue
        return out

    def started(
        self, fingerprint: str, run: str, branch: str | None, redone: RedoneReport | None = None
    ) -> None:
        """`redone`: what the run's earlier attempts spent, kept until its report has it."""
        if redone is not None:
            self._redone[fingerprint] = redone.model_dump(mode="json")
        self._write(
            fingerprint,
            {"state": "started", "run": run, "branch": branch, "report": None},
            durable=False,
        )

    def branching(self, fingerprint: str, run: str, branch: str, commit: str) -> None:
        """Written just before the result branch is created."""
        self._write(
            fingerprint,
            {"state": "started", "run": run, "branch": branch, "commit": commit, "report": None},
        )

    def finished(self, fingerprint: str, report: RunReport) -> None:
        branch = report.result.branch if report.result else None
        self._write(
            fingerprint,
            {
                "state": "finished",
                "run": report.run,
                "branch": branch,
                "report": report.model_dump(mode="json"),
            },
        )

    def _write(self, fingerprint: str, data: dict[str, Any], *, durable: bool = True) -> None:
        if data["report"] is None and fingerprint in self._redone:
            data = {**data, "redone": self._redone[fingerprint]}
        if durable and not self._synced:
            with contextlib.suppress(OSError):  # gone or replaced: nothing of ours to sync
                sync_written(self.dir / "batch.json", self.dir)
            self._synced = True
        path = self.runs / f"{fingerprint}.json"
        atomic_write_text(path, json.dumps(data) + "\n", durable=durable)


def done(entry: Entry | None, *, retry_errored: bool = False) -> RunReport | None:
    """The report of a run that needs no redo, else None. `retry_errored`
    (`--retry-errored`) redoes the runs the provider or the runner failed too."""
    if entry is None or entry.state != "finished" or entry.report is None:
        return None
    redo = REDO_STATUSES | NOT_WORKING if retry_errored else REDO_STATUSES
    return None if entry.report.status in redo else entry.report


def earlier_spend(entry: Entry | None) -> RedoneReport | None:
    """What a run's attempts before this one spent, for `--resume` to run it again
    without losing it: a finished attempt's usage and cost, plus what it carried. A
    killed attempt (no report) carries only what came before it: its own spend is not
    known."""
    if entry is None:
        return None
    if entry.report is None:
        return entry.redone
    from runner.reports.model import RedoneReport
    from runner.reports.totals import sum_redone

    r = entry.report
    this = RedoneReport(
        attempts=1,
        usage=r.usage,
        cost_usd=r.cost_usd,
        retries=r.retries,
        retry_wait_s=r.retry_wait_s,
    )
    return sum_redone([r.redone, this])


def resume_note(batch_id: str, kept: Sequence[RunReport], runs: int) -> str:
    """What `--resume` keeps, in the report's words: a kept errored run is not finished."""
    verdicts = Counter(r.status.verdict for r in kept)
    finished = verdicts[Verdict.PASSED] + verdicts[Verdict.FAILED]
    errored = verdicts[Verdict.ERRORED]
    text = (
        f"resuming batch {batch_id}: keeping {len(kept)} of {runs} runs ({finished} finished: "
        f"{verdicts[Verdict.PASSED]} passed, {verdicts[Verdict.FAILED]} failed; {errored} "
        f"errored), running {runs - len(kept)}"
    )
    if errored:
        text += "; --retry-errored reruns the errored ones"
    return text


def _other(
    theirs: dict[str, Any], ours: dict[str, Any], their_pins: Any, our_pins: Pins | None
) -> str:
    """What the directory's batch is, said against this one."""
    if theirs.get("task_file_sha256") != ours.get("task_file_sha256"):
        return "a batch of another task file (or of this one before it changed)"
    if theirs.get("run_set") != ours.get("run_set"):
        if our_pins is not None and isinstance(their_pins, dict):
            for key, flag, what in (("dates", "--date", "day"), ("zones", "--timezone", "zone")):
                was, now = their_pins.get(key), list(getattr(our_pins, key))
                if isinstance(was, list) and _strs(was) and was != now:
                    return _pinned(what, flag, was, now)
        return "a batch of another run set (--only, --tag, --model or the matrix differ)"
    return (
        f"shard {theirs.get('shard')}/{theirs.get('shards')} of this batch, not "
        f"{ours.get('shard')}/{ours.get('shards')}"
    )


def _pinned(what: str, flag: str, was: list[str], now: list[str]) -> str:
    """A batch whose pinned day or zone differs from this command's, named as such."""
    if not was:
        return f"a batch that pinned no {what}, not {', '.join(now)}: resume it without {flag}"
    said = f"{flag} {was[0]}" if len(was) == 1 else f"the {what}s it was started with"
    theirs = ", ".join(was)
    return (
        f"a batch pinned to the {what} {theirs}, not {', '.join(now) or 'none'}: resume it "
        f"with {said}"
    )


def retry_hint(statuses: Sequence[RunStatus], command: str) -> str | None:
    """The line that tells how to redo a batch's errored runs, when it has some."""
    errored = sum(s in NOT_WORKING for s in statuses)
    if not errored:
        return None
    return (
        f"runner: {errored} run(s) errored; run them again with: {command} --resume "
        "--retry-errored (the other runs are kept)"
    )
