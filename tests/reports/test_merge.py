"""`runner report merge`: shard directories built from report builders, merged for real on
disk, compared with the unsharded report run for run; bad inputs give exit 2, never a
traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from runner.cli import main
from runner.reports.junit import render_junit
from runner.reports.markdown import render_markdown
from runner.reports.merge import merge_dirs
from runner.reports.model import BatchIdentity, Report, RunReport
from tests.support.cli import run_cli
from tests.support.reports import benchmark_report, report, result, task

SHARDS = 3


def write_dir(directory: Path, r: Report) -> Path:
    """What `runner run --out` leaves: report.json, a thread log per run, patches."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "report.json").write_text(r.model_dump_json(indent=2) + "\n")
    for t in r.runs:
        log = directory / t.events_file
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(json.dumps({"type": "thread.started", "task": t.run}) + "\n")
        if t.result is not None:
            patch = directory / t.result.patch
            patch.parent.mkdir(parents=True, exist_ok=True)
            patch.write_text(f"From {t.run}\n")
    return directory


IDENTITY = BatchIdentity(task_file_sha256="f" * 64, run_set="a" * 64, runs=24)


def with_patches(r: Report) -> Report:
    """The unsharded batch: runs in task-file order, each with its index."""
    tasks = [
        t.model_copy(
            update={
                "index": i,
                **(
                    {
                        "result": result(f"runner/{t.run}").model_copy(
                            update={"patch": f"patches/{t.run}.patch"}
                        )
                    }
                    if i % 2
                    else {}
                ),
            }
        )
        for i, t in enumerate(r.runs)
    ]
    return report(tasks, batch_id=r.batch_id, duration_s=r.duration_s).model_copy(
        update={"batch": IDENTITY}
    )


def shard_reports(full: Report) -> list[Report]:
    """Slices as `--shard K/N` makes them: by fingerprint, every N-th; each shard its own
    batch with its own id and times."""
    ordered = sorted(full.runs, key=lambda t: (t.fingerprint, t.run))
    out = []
    for k in range(SHARDS):
        r = report(
            [t for i, t in enumerate(ordered) if i % SHARDS == k],
            batch_id=f"shard{k + 1}",
            duration_s=60.0 + k,
        )
        out.append(
            r.model_copy(
                update={
                    "batch": IDENTITY.model_copy(update={"shard": k + 1, "shards": SHARDS}),
                    "started_at": f"2026-03-14T09:0{k}:00+00:00",
                    "finished_at": f"2026-03-14T09:1{k}:30+00:00",
                }
            )
        )
    return out


def unsharded(full: Report, merged: Report) -> Report:
    """The unsharded report, with the fields that only say when and where it ran taken from
    the merged one; the runs in the batch's (task-file) order."""
    return full.model_copy(
        update={
            "runs": full.runs,
            "batch_id": merged.batch_id,
            "started_at": merged.started_at,
            "finished_at": merged.finished_at,
            "duration_s": merged.duration_s,
            "shards": merged.shards,
        }
    )


@pytest.fixture
def shard_dirs(tmp_path: Path) -> tuple[Report, list[Path]]:
    full = with_patches(benchmark_report())
    dirs = [write_dir(tmp_path / f"shard{k + 1}", r) for k, r in enumerate(shard_reports(full))]
    return full, dirs


def test_merged_shards_equal_the_unsharded_report(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    full, dirs = shard_dirs
    out = tmp_path / "merged"
    merged = merge_dirs(dirs, out)
    assert merged == unsharded(full, merged)
    assert merged.totals == full.totals
    assert merged.shards == ["shard1", "shard2", "shard3"]
    assert merged.started_at == "2026-03-14T09:00:00+00:00"
    assert merged.finished_at == "2026-03-14T09:12:30+00:00"
    assert merged.duration_s == 750.0
    on_disk = Report.model_validate_json((out / "report.json").read_text())
    assert on_disk == merged
    assert (out / "junit.xml").read_text() == render_junit(unsharded(full, merged))
    assert (out / "summary.md").read_text() == render_markdown(unsharded(full, merged))
    assert "Merged from 3 shards: shard1, shard2, shard3." in (out / "summary.md").read_text()


def test_every_path_in_the_merged_report_exists(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    _, dirs = shard_dirs
    out = tmp_path / "merged"
    merged = merge_dirs(dirs, out)
    patches = [t.result.patch for t in merged.runs if t.result is not None]
    assert len(patches) == 12
    for t in merged.runs:
        log = (out / t.events_file).read_text()
        assert json.loads(log)["task"] == t.run
    for p in patches:
        assert (out / p).read_text().startswith("From ")


def test_order_of_directories_does_not_matter(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    _, dirs = shard_dirs
    a = merge_dirs(dirs, tmp_path / "a")
    b = merge_dirs(dirs[::-1], tmp_path / "b")
    assert a == b
    for name in ("report.json", "junit.xml", "summary.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_merging_a_merge_keeps_every_shard_id(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    full, dirs = shard_dirs
    partial = tmp_path / "partial"
    merge_dirs(dirs[:2], partial, partial=True)
    again = merge_dirs([partial, dirs[2]], tmp_path / "all")
    once = merge_dirs(dirs, tmp_path / "once")
    assert again == once
    assert again.shards == ["shard1", "shard2", "shard3"]


def test_cli_merges_and_exits_like_run(
    tmp_path: Path,
    shard_dirs: tuple[Report, list[Path]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, dirs = shard_dirs
    step_summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    out = tmp_path / "merged"
    code = main(["report", "merge", *map(str, dirs), "--out", str(out)])
    assert code == 1  # some merged runs failed, as `runner run` would say
    err = capsys.readouterr().err
    assert "merged 3 shard(s): 24 run(s): 24 finished (12 passed), 0 skipped, 0 errored" in err
    assert step_summary.read_text() == (out / "summary.md").read_text() + "\n"
    passing = write_dir(tmp_path / "green", report([task("a", "p/m", "completed", run="a.r1")]))
    assert main(["report", "merge", str(passing), "--out", str(tmp_path / "g")]) == 0


def test_secrets_of_the_merging_environment_are_masked(tmp_path: Path) -> None:
    from runner.reports.merge import merge_command

    leaky = write_dir(
        tmp_path / "s",
        report([task("a", "p/m", "failed", run="a.r1", error="saw sk-live-0123456789abcdef")]),
    )
    merge_command([leaky], tmp_path / "out", env={"OPENAI_API_KEY": "sk-live-0123456789abcdef"})
    for name in ("report.json", "junit.xml", "summary.md"):
        text = (tmp_path / "out" / name).read_text()
        assert "sk-live" not in text and "[REDACTED]" in text


def run_merge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_cli("report", "merge", *args, unset=("GITHUB_STEP_SUMMARY",))


def test_missing_report_is_exit_2_naming_the_file(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    _, dirs = shard_dirs
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_merge(dirs[0], empty, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert f"error: {empty / 'report.json'}: report.json: no such file" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing written on bad input


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"schema_version": "runner.report/1",\n  "batch_id": ', ":2: (JSON): not valid JSON"),
        ("[1, 2]", ": (document): must be a JSON object"),
        ('{"schema_version": "runner.report/9"}', ": schema_version: is 'runner.report/9'"),
        ("[" * 100_000, ": (JSON): nested too deeply"),
    ],
    ids=["cut", "list", "version", "deep"],
)
def test_corrupt_report_is_exit_2(tmp_path: Path, content: str, expected: str) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "report.json").write_text(content)
    proc = run_merge(bad, "--out", tmp_path / "out")
    assert proc.returncode == 2, proc.stderr
    assert f"error: {bad / 'report.json'}{expected}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_invalid_field_names_the_field(tmp_path: Path) -> None:
    data = json.loads(benchmark_report().model_dump_json())
    data["runs"][3]["usage"]["input_tokens"] = "many"
    del data["runs"][5]["status"]
    data["runs"][6]["status"] = "cancelled"  # statuses are one closed vocabulary
    data["totals"]["surprise"] = 1
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "report.json").write_text(json.dumps(data))
    proc = run_merge(bad, "--out", tmp_path / "out")
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert any(
        line.startswith(f"error: {bad / 'report.json'}: runs[3].usage.input_tokens: ")
        for line in lines
    )
    assert f"error: {bad / 'report.json'}: runs[5].status: Field required" in lines
    assert any("totals.surprise: Extra inputs are not permitted" in line for line in lines)
    assert any(
        line.startswith(f"error: {bad / 'report.json'}: runs[6].status: Input should be ")
        and "'completed'" in line
        and "'skipped'" in line
        for line in lines
    )


def test_every_bad_shard_is_reported_at_once(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (b / "report.json").write_text("{")
    proc = run_merge(a, b, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert str(a / "report.json") in proc.stderr and str(b / "report.json") in proc.stderr


def test_different_task_files_are_refused(tmp_path: Path) -> None:
    one = write_dir(tmp_path / "one", report([task("a", "p/m", "completed", run="a.r1")]))
    other = report([task("b", "p/m", "completed", run="b.r1")]).model_copy(
        update={"task_file": "other.yaml", "batch_id": "x"}
    )
    two = write_dir(tmp_path / "two", other)
    proc = run_merge(one, two, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert (
        f"error: {two / 'report.json'}: task_file: is 'other.yaml' but {one} ran 'tasks.yaml'"
    ) in proc.stderr


def test_the_same_shard_twice_is_refused(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    _, dirs = shard_dirs
    copy = write_dir(
        tmp_path / "copy", Report.model_validate_json((dirs[0] / "report.json").read_text())
    )
    proc = run_merge(dirs[0], copy, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert f"shard 1/3 is also in {dirs[0]}: the same shard twice" in proc.stderr
    assert proc.stderr.count("error:") == 1


def test_same_fingerprint_under_another_name_is_refused(tmp_path: Path) -> None:
    one = write_dir(
        tmp_path / "one", report([task("a", "p/m", "completed", run="a.r1", fingerprint="ff")])
    )
    two = write_dir(
        tmp_path / "two",
        report([task("a", "p/m", "completed", run="a.renamed", fingerprint="ff")], batch_id="two"),
    )
    proc = run_merge(one, two, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert f"1 run(s) are also in {one}: the shards overlap" in proc.stderr


def test_colliding_files_are_refused(tmp_path: Path) -> None:
    one = write_dir(tmp_path / "one", report([task("a", "p/m", "completed", run="a.r1")]))
    two = write_dir(
        tmp_path / "two", report([task("b", "p/m", "completed", run="b.r1")], batch_id="two")
    )
    (two / "threads" / "a.r1.jsonl").write_text("{}\n")
    proc = run_merge(one, two, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert (
        f"error: {two / 'threads' / 'a.r1.jsonl'}: threads/a.r1.jsonl: also in "
        f"{one / 'threads' / 'a.r1.jsonl'}: two shards wrote the same file"
    ) in proc.stderr


def test_symlinks_are_refused(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not ship me")
    one = write_dir(tmp_path / "one", report([task("a", "p/m", "completed", run="a.r1")]))
    (one / "patches").mkdir()
    (one / "patches" / "evil.patch").symlink_to(secret)
    proc = run_merge(one, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert "patches/evil.patch: is a symbolic link" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_out_may_not_be_a_shard(tmp_path: Path, shard_dirs: tuple[Report, list[Path]]) -> None:
    _, dirs = shard_dirs
    proc = run_merge(*dirs, "--out", dirs[1])
    assert proc.returncode == 2
    assert f"error: {dirs[1]}: DIR: is the --out directory" in proc.stderr


def test_usage_errors_are_exit_2(tmp_path: Path) -> None:
    assert run_merge("--out", tmp_path / "o").returncode == 2
    assert run_merge(tmp_path).returncode == 2


def test_reports_without_fingerprints_merge_by_run_name(tmp_path: Path) -> None:
    tasks: list[RunReport] = [task(n, "p/m", "completed", run=f"{n}.r1") for n in "dcba"]
    one = write_dir(tmp_path / "one", report(tasks[:2], batch_id="one"))
    two = write_dir(tmp_path / "two", report(tasks[2:], batch_id="two"))
    merged = merge_dirs([one, two], tmp_path / "out")
    assert [t.run for t in merged.runs] == ["a.r1", "b.r1", "c.r1", "d.r1"]


def test_missing_shard_is_refused_unless_partial(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    full, dirs = shard_dirs
    proc = run_merge(dirs[0], dirs[2], "--out", tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "shard(s) 2 of 3 missing" in proc.stderr and "--partial" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = run_merge(dirs[0], dirs[2], "--out", tmp_path / "out", "--partial")
    assert proc.returncode == 1, proc.stderr
    assert "PARTIAL merge: shard(s) 2 of 3 missing" in proc.stderr
    merged = Report.model_validate_json((tmp_path / "out" / "report.json").read_text())
    assert merged.partial and merged.missing_shards == [2]
    assert merged.totals.runs == 16
    assert [t.index for t in merged.runs] == sorted(t.index or 0 for t in merged.runs)
    assert "**PARTIAL: shard(s) 2 of 3 missing" in (tmp_path / "out" / "summary.md").read_text()
    assert (
        '<property name="partial" value="true" />' in (tmp_path / "out" / "junit.xml").read_text()
    )


def test_foreign_shard_is_refused(tmp_path: Path, shard_dirs: tuple[Report, list[Path]]) -> None:
    _, dirs = shard_dirs
    r = Report.model_validate_json((dirs[1] / "report.json").read_text())
    assert r.batch is not None
    other = write_dir(
        tmp_path / "other",
        r.model_copy(update={"batch": r.batch.model_copy(update={"run_set": "b" * 64})}),
    )
    proc = run_merge(dirs[0], other, dirs[2], "--out", tmp_path / "out", "--partial")
    assert proc.returncode == 2
    assert (
        f"{other}/report.json: batch: is from another batch than {dirs[0]}: its run set"
        in proc.stderr
    )


def test_a_killed_shards_checkpoint_is_refused_unless_partial(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    """A shard killed mid-batch leaves a checkpoint (`pending` > 0, some runs): merging it
    as if complete would report a batch of fewer runs with no mark."""
    _, dirs = shard_dirs
    r = Report.model_validate_json((dirs[1] / "report.json").read_text())
    cut = write_dir(
        tmp_path / "killed",
        r.model_copy(update={"runs": r.runs[:1], "pending": len(r.runs) - 1}),
    )
    proc = run_merge(dirs[0], cut, dirs[2], "--out", tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{cut}/report.json: pending: shard 2/3 is incomplete: 7 run(s) pending" in proc.stderr
    assert not (tmp_path / "out").exists()
    proc = run_merge(dirs[0], cut, dirs[2], "--out", tmp_path / "out", "--partial")
    assert proc.returncode == 1, proc.stderr
    assert "PARTIAL merge: 7 run(s) of shards cut short" in proc.stderr
    out = tmp_path / "out"
    merged = Report.model_validate_json((out / "report.json").read_text())
    assert merged.partial and merged.pending == 7 and merged.missing_shards == []
    assert merged.totals.runs == 17
    assert "**PARTIAL: 7 run(s) of shards cut short" in (out / "summary.md").read_text()
    junit = (out / "junit.xml").read_text()
    assert '<property name="partial" value="true" />' in junit
    assert '<property name="pending" value="7" />' in junit
    assert 'class="partial">PARTIAL: 7 run(s)' in (out / "report.html").read_text()
    code = main(["report", "compare", str(dirs[0]), str(out), "--fail-on-regression"])
    assert code == 3


def test_a_shard_with_runs_cut_by_hand_is_refused(
    tmp_path: Path, shard_dirs: tuple[Report, list[Path]]
) -> None:
    _, dirs = shard_dirs
    r = Report.model_validate_json((dirs[2] / "report.json").read_text())
    cut = write_dir(tmp_path / "cut", r.model_copy(update={"runs": r.runs[:5]}))
    proc = run_merge(dirs[0], dirs[1], cut, "--out", tmp_path / "out")
    assert proc.returncode == 2
    assert f"{cut}/report.json: runs: shard 3/3 is incomplete: has 5 of the 8 runs" in proc.stderr
    extra = write_dir(
        tmp_path / "extra",
        r.model_copy(
            update={
                "runs": [
                    *r.runs,
                    r.runs[0].model_copy(update={"fingerprint": "0" * 16, "run": "x.r9"}),
                ]
            }
        ),
    )
    proc = run_merge(dirs[0], dirs[1], extra, "--out", tmp_path / "out2", "--partial")
    assert proc.returncode == 2
    assert "has 9 runs but its shard(s) of a 24-run batch hold 8" in proc.stderr
