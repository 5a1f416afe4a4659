"""`runner report merge DIR... --out DIR`: the reports of `--shard K/N` runs made on
several machines, combined into the directory one unsharded `runner run` would have written.

Each shard's report names its batch (task file hash, run set, K and N): a missing, repeated
or foreign shard, or one cut short (a checkpoint with runs pending, or fewer runs than its
slice of the batch), stops the merge (`--partial` accepts missing and cut-short ones and
says so in every output: `partial`, and `pending` counts the runs the cut-short shards lack).
Runs are put back in the batch's own order (each run's `index`, task-file order), so the
result is the report one unsharded batch would have written, whatever the order the
directories are named in; totals, JUnit and the summary are recomputed from the runs.
Nothing is written until every shard has been read and checked: a bad input leaves the out
directory as it was.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from pydantic import ValidationError

from runner import hostfs, outdir
from runner.errors import ConfigError, Problem, UnsafeFileError
from runner.frozen import frozen
from runner.fsutil import atomic_write_chunks
from runner.redact import Redactor
from runner.reports.entries import repeated_runs
from runner.reports.files import write_reports
from runner.reports.model import READS, SCHEMA_VERSION, Report, RunReport
from runner.reports.named import (
    INPUTS_DIR,
    REPORT_BYTES,
    check_named,
    open_named,
    open_plain,
    read_named,
)
from runner.reports.totals import compute_totals
from runner.sizes import size

REPORT_FILE = "report.json"
COPIED_DIRS = ("threads", "patches", INPUTS_DIR)
"""Everything a report points to (`events_file`, `result.patch`, `inputs`) lives under
these."""


@frozen
class Shard:
    """One shard's report and where it was read from (for messages)."""

    source: str
    report: Report


def run_order_key(task: RunReport) -> tuple[str, str, str, int]:
    """The canonical order of runs in a merged report. The fingerprint is the same on every
    machine; the run name breaks ties in reports written before fingerprints existed."""
    return (task.fingerprint, task.run or task.id, task.model, task.repeat)


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(document)"


def load_shard(directory: Path) -> Shard:
    """Read and validate `DIR/report.json`; every problem names the file and the field.
    `report.json` is opened as the files it names are (no link followed, a regular file
    only, never blocking on a FIFO) and read up to a cap; every file the report names
    must be a plain file under its own folder (see `reports.named`). Merge, compare and
    branches all read reports through here."""
    path = directory / REPORT_FILE
    file = str(path)

    def fail(field: str, message: str, line: int | None = None) -> ConfigError:
        return ConfigError([Problem(file, line, field, message)])

    try:
        fd = open_plain(directory, REPORT_FILE)
        try:
            raw = hostfs.read_bytes(fd, REPORT_BYTES + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise fail(
            REPORT_FILE, "no such file: give directories written by `runner run --out`"
        ) from None
    except UnsafeFileError as exc:
        raise fail(REPORT_FILE, str(exc).removeprefix(f"{REPORT_FILE}: ")) from None
    except OSError as exc:
        raise fail(REPORT_FILE, f"cannot be read: {exc.strerror or exc}") from None
    if len(raw) > REPORT_BYTES:
        raise fail(
            REPORT_FILE,
            f"is larger than {size(REPORT_BYTES)}, more than any runner report; not read",
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(REPORT_FILE, f"is not UTF-8 text (byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise fail(
            "(JSON)", f"not valid JSON: {exc.msg} (column {exc.colno})", exc.lineno
        ) from None
    except RecursionError:
        raise fail("(JSON)", "nested too deeply to be a runner report") from None
    if not isinstance(data, dict):
        raise fail("(document)", "must be a JSON object (a runner report)")
    version = data.get("schema_version")
    if version not in READS:
        raise fail("schema_version", f"is {version!r}; this runner reads {SCHEMA_VERSION!r}")
    try:
        report = Report.model_validate({**data, "schema_version": SCHEMA_VERSION})
    except ValidationError as exc:
        raise ConfigError(
            [Problem(file, None, _loc(e["loc"]), e["msg"]) for e in exc.errors()]
        ) from None
    problems = repeated_runs(report, file) + check_named(directory, report, file)
    if problems:
        raise ConfigError(problems)
    return Shard(str(directory), report)


def _when(shard: Shard, field: str, value: str) -> dt.datetime:
    try:
        t = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            [
                Problem(
                    f"{shard.source}/{REPORT_FILE}",
                    None,
                    field,
                    f"{value!r} is not an ISO 8601 time",
                )
            ]
        ) from None
    return t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)


def slice_size(runs: int, k: int, n: int) -> int:
    """Runs in shard K of N of a batch of `runs`: `--shard` takes every N-th run from the
    K-th in fingerprint order (see cli._shard)."""
    return len(range(k - 1, runs, n))


def _check_set(shards: Sequence[Shard], partial: bool) -> tuple[list[Problem], list[int], int]:
    """Shards of one batch: same identity, each K of 1..N once, each with every run of its
    slice. Returns the problems, the missing K and the runs lacking from shards cut short
    (both allowed only with `partial`)."""
    problems: list[Problem] = []
    first = shards[0]
    ident = first.report.batch
    assert ident is not None
    key = ident.model_dump(exclude={"shard"})
    by_k: dict[int, Shard] = {}
    lacking = 0
    for s in shards:
        b = s.report.batch
        assert b is not None
        covered = (
            {k for k in range(1, b.shards + 1)} - set(s.report.missing_shards)
            if s.report.partial
            else {b.shard}
        )
        if b.model_dump(exclude={"shard"}) != key:
            what = (
                "task file"
                if b.task_file_sha256 != ident.task_file_sha256
                else "run set (--only, --tag, --model or matrix differ)"
                if b.run_set != ident.run_set
                else "shard count N"
            )
            problems.append(
                Problem(
                    f"{s.source}/{REPORT_FILE}",
                    None,
                    "batch",
                    f"is from another batch than {first.source}: its {what} "
                    "differs; merge only shards of one `runner run --shard K/N`"
                    " batch",
                )
            )
            continue
        twice = sorted(covered & set(by_k))
        if twice:
            problems.append(
                Problem(
                    f"{s.source}/{REPORT_FILE}",
                    None,
                    "batch.shard",
                    f"shard {twice[0]}/{b.shards} is also in "
                    f"{by_k[twice[0]].source}: the same shard twice",
                )
            )
            continue
        by_k.update(dict.fromkeys(covered, s))
        expected = sum(slice_size(b.runs, k, b.shards) for k in covered)
        have = len(s.report.runs)
        where = f"{s.source}/{REPORT_FILE}"
        if have > expected:
            problems.append(
                Problem(
                    where,
                    None,
                    "runs",
                    f"has {have} runs but its shard(s) of a {b.runs}-run batch "
                    f"hold {expected}: not a report `runner run --shard` wrote",
                )
            )
        elif have < expected or s.report.pending:
            lacking += expected - have
            why = (
                f"{s.report.pending} run(s) pending: a checkpoint of a batch that was "
                "killed or is still running"
                if s.report.pending
                else f"has {have} of the {expected} runs of its shard(s)"
            )
            if not partial:
                problems.append(
                    Problem(
                        where,
                        None,
                        "pending" if s.report.pending else "runs",
                        f"shard {b.shard}/{b.shards} is incomplete: {why}; "
                        "finish it (`runner run ... --resume` with its --out), "
                        "or --partial to merge what there is (marked partial "
                        "everywhere)",
                    )
                )
    missing = [k for k in range(1, ident.shards + 1) if k not in by_k]
    if missing and not partial and not problems:
        problems.append(
            Problem(
                "(command line)",
                None,
                "DIR",
                f"shard(s) {', '.join(map(str, missing))} of {ident.shards} "
                "missing: the merged numbers would not be the batch's; give "
                "every shard's directory, or --partial to merge what there is "
                "(marked partial everywhere)",
            )
        )
    return problems, missing, lacking


def merge_reports(shards: Sequence[Shard], *, partial: bool = False) -> Report:
    """One report from shard reports (pure). Shards of different task files or batches,
    the same shard twice, or (without `partial`) a missing shard are an error: the result
    would not be any one batch."""
    if not shards:
        raise ConfigError([Problem("(command line)", None, "DIR", "no report to merge")])
    problems = []
    first = shards[0]
    for s in shards[1:]:
        if s.report.task_file != first.report.task_file:
            problems.append(
                Problem(
                    f"{s.source}/{REPORT_FILE}",
                    None,
                    "task_file",
                    f"is {s.report.task_file!r} but {first.source} ran "
                    f"{first.report.task_file!r}; shards of one batch share their task file",
                )
            )
    identified = all(s.report.batch is not None for s in shards)
    missing: list[int] = []
    lacking = 0
    if identified and not problems:
        problems, missing, lacking = _check_set(shards, partial)
    if problems:
        raise ConfigError(problems)
    owner: dict[str, str] = {}
    clash: dict[tuple[str, str], int] = {}
    for s in shards:
        for t in s.report.runs:
            for key in (
                f"run {t.run or t.id!r} ({t.model}, repeat {t.repeat})",
                *([f"fingerprint {t.fingerprint}"] if t.fingerprint else []),
            ):
                if key in owner:
                    clash[(owner[key], s.source)] = clash.get((owner[key], s.source), 0) + 1
                    break
                owner[key] = s.source
    for (a, b), n in clash.items():  # one line per pair of shards, not one per run
        problems.append(
            Problem(
                f"{b}/{REPORT_FILE}",
                None,
                "runs",
                f"{n} run(s) are also in {a}: the shards overlap (the same "
                "directory twice, or shards of different --shard N?)",
            )
        )
    if problems:
        raise ConfigError(problems)
    runs = [t for s in shards for t in s.report.runs]
    if all(t.index is not None for t in runs):
        tasks = sorted(runs, key=lambda t: (t.index or 0, run_order_key(t)))
    else:
        tasks = sorted(runs, key=run_order_key)
    ids = sorted({i for s in shards for i in (s.report.shards or [s.report.batch_id])})
    started = min(
        (_when(s, "started_at", s.report.started_at), s.report.started_at) for s in shards
    )
    finished = max(
        (_when(s, "finished_at", s.report.finished_at), s.report.finished_at) for s in shards
    )
    digest = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:12]
    batch = first.report.batch
    if batch is not None and identified:
        batch = batch.model_copy(update={"shard": 1, "shards": batch.shards if missing else 1})
    return Report(
        batch_id=f"merged-{digest}",
        task_file=first.report.task_file,
        started_at=started[1],
        finished_at=finished[1],
        duration_s=round(max(0.0, (finished[0] - started[0]).total_seconds()), 3),
        totals=compute_totals(tasks),
        runs=tasks,
        shards=ids,
        batch=batch if identified else None,
        partial=bool(missing or lacking),
        missing_shards=missing,
        pending=lacking,
        runner=first.report.runner,
    )


def _plan_copies(shards: Sequence[Shard], out: Path) -> dict[Path, tuple[Path, str]]:
    """Destination -> (shard directory, path in it) for every file under the shards'
    `threads/` and `patches/`. Two shards with the same file, a symbolic link or a file
    with another hard link (either could make the merged artifact carry a file from the
    merging machine), or a FIFO, device or socket (nothing the runner writes; skipping it
    would hide an edited artifact) stop the merge before anything is written."""
    plan: dict[Path, tuple[Path, str]] = {}
    problems = []

    def refuse(path: Path, field: str, why: str) -> None:
        problems.append(
            Problem(str(path), None, field, f"{why}; report directories hold plain files")
        )

    for s in shards:
        root = Path(s.source)
        for sub in COPIED_DIRS:
            base = root / sub
            if base.is_symlink():
                refuse(base, sub, "is a symbolic link")
                continue
            if not base.is_dir():
                continue
            try:
                found = sorted(base.rglob("*"))
            except OSError as exc:  # the folder changed while it was listed
                refuse(base, sub, f"changed while it was read ({exc.strerror})")
                continue
            for path in found:
                rel = path.relative_to(root).as_posix()
                try:
                    st = path.lstat()
                except OSError as exc:
                    refuse(path, rel, f"changed while it was read ({exc.strerror})")
                    continue
                mode = st.st_mode
                if stat.S_ISLNK(mode):
                    refuse(path, rel, "is a symbolic link")
                elif not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
                    refuse(path, rel, f"is a {hostfs.kind(mode)}, not a regular file")
                elif stat.S_ISREG(mode):
                    dest = out / rel
                    if st.st_nlink != 1:
                        refuse(path, rel, "has another hard link")
                    elif dest in plan:
                        problems += _twice(plan[dest], root, rel, path)
                    else:
                        plan[dest] = (root, rel)
    if problems:
        raise ConfigError(problems)
    return plan


def _twice(first: tuple[Path, str], root: Path, rel: str, path: Path) -> list[Problem]:
    """A file two shards both hold: refused, unless it is a file of `inputs/` with the
    same bytes in both (one input shared by runs of several shards, kept once; its
    content-addressed name says so, but an edited artifact's may not)."""
    if rel.startswith(f"{INPUTS_DIR}/"):
        a = read_named(first[0], first[1], INPUTS_DIR, INPUT_BYTES)
        b = read_named(root, rel, INPUTS_DIR, INPUT_BYTES)
        if a is not None and a == b and a[1] <= INPUT_BYTES:
            return []
    why = f"also in {Path(*first)}: two shards wrote the same file"
    return [Problem(str(path), None, rel, why)]


INPUT_BYTES = 64 << 20
"""The largest input file compared: instructions and tool schemas are kilobytes."""


def _copy(shard: Path, rel: str, dest: Path) -> None:
    """One file of a shard's `threads/` or `patches/`, read without following a link
    (one swapped in since `_plan_copies` looked is refused, not followed) and streamed:
    no size cap, since memory stays at one chunk and the copy is no bigger than the
    file already on disk."""
    try:
        fd = open_named(shard, rel, rel.split("/", 1)[0])
    except (UnsafeFileError, OSError) as exc:
        raise ConfigError(
            [Problem(str(shard / rel), None, rel, f"{exc}; report directories hold plain files")]
        ) from None
    if fd is None:
        raise ConfigError([Problem(str(shard / rel), None, rel, "vanished while being merged")])
    try:
        atomic_write_chunks(dest, _chunks(fd, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def _chunks(fd: int, length: int) -> Iterator[bytes]:
    """The file's bytes in chunks, no more than the `length` it had when opened: the copy
    holds one chunk in memory and writes no more than the shard held."""
    left = length
    while left > 0 and (chunk := os.read(fd, min(hostfs.CHUNK, left))):
        left -= len(chunk)
        yield chunk


def merge_dirs(
    dirs: Sequence[Path],
    out: Path,
    *,
    redact: Redactor | None = None,
    step_summary: str | None = None,
    partial: bool = False,
    force: bool = False,
) -> Report:
    """Read every shard directory, check them, then write the merged directory: copies of
    `threads/` and `patches/` (so every path in the report stays valid) and the three
    reports. Raises ConfigError (exit 2) before writing anything if an input is wrong."""
    out_real = out.resolve()
    problems = [
        Problem(str(d), None, "DIR", "is the --out directory; merge into a new one")
        for d in dirs
        if d.resolve() == out_real
    ]
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
    merged = merge_reports(shards, partial=partial)
    plan = _plan_copies(shards, out)
    # The merged dir is one batch's out dir like any other: no live writer beside it, and
    # an earlier batch there replaced only with --force (`outdir.claim`).
    with outdir.claim(out, resume=False, force=force):
        for dest, (shard, rel) in plan.items():
            _copy(shard, rel, dest)
        write_reports(merged, out, redact=redact or Redactor(), step_summary=step_summary)
    return merged


def merge_command(
    dirs: Sequence[Path],
    out: Path,
    env: Mapping[str, str] | None = None,
    *,
    partial: bool = False,
    force: bool = False,
) -> Report:
    """`runner report merge` as the CLI runs it: secrets of this environment are masked in
    what is written (the shards masked theirs), and the summary goes to GitHub's step
    summary under Actions."""
    from runner.config.secrets import secrets_from_env

    env = os.environ if env is None else env
    redact = Redactor(secrets_from_env(env))
    return merge_dirs(
        dirs,
        out,
        redact=redact,
        step_summary=env.get("GITHUB_STEP_SUMMARY"),
        partial=partial,
        force=force,
    )
