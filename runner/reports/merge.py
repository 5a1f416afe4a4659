"""`runner report merge DIR... --out DIR`: the reports of `--shard K/N` runs made on
several machines, combined into the directory one unsharded `runner run` would have written.

Runs are put in one canonical order (fingerprint, then run name), so the result does not
depend on which shard ran what or on the order the directories are named; totals, JUnit and
the summary are recomputed from the runs. Nothing is written until every shard has been read
and checked: a bad input leaves the out directory as it was.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from runner.errors import ConfigError, Problem
from runner.fsutil import atomic_write_bytes
from runner.redact import Redactor
from runner.reports.files import write_reports
from runner.reports.model import SCHEMA_VERSION, Report, TaskReport
from runner.reports.totals import compute_totals

REPORT_FILE = "report.json"
COPIED_DIRS = ("threads", "patches")
"""Everything a report points to (`events_file`, `result.patch`) lives under these."""


@dataclass(frozen=True)
class Shard:
    """One shard's report and where it was read from (for messages)."""

    source: str
    report: Report


def run_order_key(task: TaskReport) -> tuple[str, str, str, int]:
    """The canonical order of runs in a merged report. The fingerprint is the same on every
    machine; the run name breaks ties in reports written before fingerprints existed."""
    return (task.fingerprint, task.run or task.id, task.model, task.repeat)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(document)"


def load_shard(directory: Path) -> Shard:
    """Read and validate `DIR/report.json`; every problem names the file and the field."""
    path = directory / REPORT_FILE
    file = str(path)

    def fail(field: str, message: str, line: int | None = None) -> ConfigError:
        return ConfigError([Problem(file, line, field, message)])

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise fail(REPORT_FILE, "no such file: give directories written by `runner run "
                                "--out`") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise fail(REPORT_FILE, f"cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail("(JSON)", f"not valid JSON: {exc.msg} (column {exc.colno})",
                   exc.lineno) from None
    if not isinstance(data, dict):
        raise fail("(document)", "must be a JSON object (a runner report)")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise fail("schema_version", f"is {version!r}; this runner reads {SCHEMA_VERSION!r}")
    try:
        report = Report.model_validate(data)
    except ValidationError as exc:
        raise ConfigError([Problem(file, None, _loc(e["loc"]), e["msg"])
                           for e in exc.errors()]) from None
    return Shard(str(directory), report)


def _when(shard: Shard, field: str, value: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError([Problem(f"{shard.source}/{REPORT_FILE}", None, field,
                                   f"{value!r} is not an ISO 8601 time")]) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def merge_reports(shards: Sequence[Shard]) -> Report:
    """One report from shard reports (pure). Shards of different task files, or two shards
    holding the same run, are an error: the result would not be any one batch."""
    if not shards:
        raise ConfigError([Problem("(command line)", None, "DIR", "no report to merge")])
    problems = []
    first = shards[0]
    for s in shards[1:]:
        if s.report.task_file != first.report.task_file:
            problems.append(Problem(
                f"{s.source}/{REPORT_FILE}", None, "task_file",
                f"is {s.report.task_file!r} but {first.source} ran "
                f"{first.report.task_file!r}; shards of one batch share their task file"))
    owner: dict[str, str] = {}
    for s in shards:
        for t in s.report.tasks:
            for key in (f"run {t.run or t.id!r} ({t.model}, repeat {t.repeat})",
                        *([f"fingerprint {t.fingerprint}"] if t.fingerprint else [])):
                if key in owner:
                    problems.append(Problem(
                        f"{s.source}/{REPORT_FILE}", None, "tasks",
                        f"{key} is also in {owner[key]}: the shards overlap (the same "
                        "directory twice, or shards of different --shard N?)"))
                    break
                owner[key] = s.source
    if problems:
        raise ConfigError(problems)
    tasks = sorted((t for s in shards for t in s.report.tasks), key=run_order_key)
    ids = sorted({i for s in shards for i in (s.report.shards or [s.report.run_id])})
    started = min((_when(s, "started_at", s.report.started_at), s.report.started_at)
                  for s in shards)
    finished = max((_when(s, "finished_at", s.report.finished_at), s.report.finished_at)
                   for s in shards)
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:12]
    return Report(run_id=f"merged-{digest}", task_file=first.report.task_file,
                  started_at=started[1], finished_at=finished[1],
                  duration_s=round(max(0.0, (finished[0] - started[0]).total_seconds()), 3),
                  totals=compute_totals(tasks), tasks=tasks, shards=ids)


def _plan_copies(shards: Sequence[Shard], out: Path) -> dict[Path, Path]:
    """Destination -> source for every file under the shards' `threads/` and `patches/`.
    Two shards with the same file, or a symbolic link (which could make the merged artifact
    carry a file from the merging machine), stop the merge."""
    plan: dict[Path, Path] = {}
    problems = []
    for s in shards:
        root = Path(s.source)
        for sub in COPIED_DIRS:
            base = root / sub
            if base.is_symlink():
                problems.append(Problem(str(base), None, sub, "is a symbolic link; report "
                                        "directories hold plain files"))
                continue
            if not base.is_dir():
                continue
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(root)
                if path.is_symlink():
                    problems.append(Problem(str(path), None, str(rel), "is a symbolic link; "
                                            "report directories hold plain files"))
                elif path.is_file():
                    dest = out / rel
                    if dest in plan:
                        problems.append(Problem(str(path), None, str(rel),
                                                f"also in {plan[dest]}: two shards wrote the "
                                                "same file"))
                    else:
                        plan[dest] = path
    if problems:
        raise ConfigError(problems)
    return plan


def merge_dirs(dirs: Sequence[Path], out: Path, *, redact: Redactor | None = None,
               step_summary: str | None = None) -> Report:
    """Read every shard directory, check them, then write the merged directory: copies of
    `threads/` and `patches/` (so every path in the report stays valid) and the three
    reports. Raises ConfigError (exit 2) before writing anything if an input is wrong."""
    out_real = out.resolve()
    problems = [Problem(str(d), None, "DIR", "is the --out directory; merge into a new one")
                for d in dirs if d.resolve() == out_real]
    if problems:
        raise ConfigError(problems)
    shards, errors = [], []
    for d in dirs:
        try:
            shards.append(load_shard(d))
        except ConfigError as exc:
            errors += exc.problems
    if errors:
        raise ConfigError(errors)
    merged = merge_reports(shards)
    plan = _plan_copies(shards, out)
    for dest, src in plan.items():
        atomic_write_bytes(dest, src.read_bytes())
    write_reports(merged, out, redact=redact or Redactor(), step_summary=step_summary)
    return merged


def merge_command(dirs: Sequence[Path], out: Path, env: Mapping[str, str] | None = None
                  ) -> Report:
    """`runner report merge` as the CLI runs it: secrets of this environment are masked in
    what is written (the shards masked theirs), and the summary goes to GitHub's step
    summary under Actions."""
    from runner.sandbox.env import SECRET_NAME

    env = os.environ if env is None else env
    redact = Redactor([v for k, v in env.items() if SECRET_NAME.search(k)])
    return merge_dirs(dirs, out, redact=redact, step_summary=env.get("GITHUB_STEP_SUMMARY"))
