"""Every rename of issue 29's vocabulary keeps reading what older runners wrote: a report
with `run_id`, `tasks` and status `max_turns`, a journal with `run_id`, a task file with
`limits.max_turns`, a branch template with `{run}`, and `report branches --run-id`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import load_runs
from runner.cli import build_parser
from runner.config import branch_fields
from runner.errors import ConfigError
from runner.journal import Journal
from runner.reports.model import SCHEMA_VERSION, Report
from runner.vocabulary import RunStatus
from runner.workspace import branch_name
from tests.support import paths
from tests.support.cli import run_cli

OLD_REPORT = paths.FIXTURES / "report_v2.json"


def test_an_old_report_reads_under_the_new_names() -> None:
    report = Report.model_validate_json(OLD_REPORT.read_text())
    assert report.batch_id == "20260314-101500-ab12"
    assert [r.status for r in report.runs] == [
        RunStatus.COMPLETED,
        RunStatus.MAX_REQUESTS,
        RunStatus.COMPLETED,
    ]
    written = json.loads(
        report.model_copy(update={"schema_version": SCHEMA_VERSION}).model_dump_json()
    )
    assert {"batch_id", "runs"} <= set(written) and not {"run_id", "tasks"} & set(written)
    assert written["runs"][1]["status"] == "max_requests"


def test_the_old_status_name_is_the_new_status() -> None:
    assert RunStatus("max_turns") is RunStatus.MAX_REQUESTS
    with pytest.raises(ValueError):
        RunStatus("max_turn")


def test_a_journal_an_older_runner_wrote_resumes_with_its_id(tmp_path: Path) -> None:
    (tmp_path / "journal").mkdir()
    started = "2026-03-14T10:15:00+00:00"
    (tmp_path / "journal" / "batch.json").write_text(
        json.dumps({"run_id": "0123456789ab", "task_file": "t.yaml", "started_at": started})
    )
    j = Journal(tmp_path)
    assert j.first_start("0123456789ab") == started
    assert j.start_batch(batch_id="new", task_file="t.yaml", resume=True) == "0123456789ab"


def _task_file(tmp_path: Path, limits: str, branch: str = "") -> Path:
    (tmp_path / "repo").mkdir(exist_ok=True)
    git = f", git: {{branch: '{branch}'}}" if branch else ""
    path = tmp_path / "t.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n  fake: {base_url: 'http://127.0.0.1:9/v1'}\n"
        f"tasks:\n  - {{id: a, prompt: hi, model: fake/m, repo: repo, limits: {limits}{git}}}\n"
    )
    return path


def test_max_turns_is_read_as_max_requests_with_the_same_fingerprint(tmp_path: Path) -> None:
    [old] = load_runs(_task_file(tmp_path, "{max_turns: 7}"), offline=True)
    [new] = load_runs(_task_file(tmp_path, "{max_requests: 7}"), offline=True)
    assert old.limits.max_requests == new.limits.max_requests == 7
    # The fingerprint main computed for this very run before the rename: --resume and
    # --shard keep agreeing with batches an older runner started.
    assert old.fingerprint == new.fingerprint == "0646a9a06ee13797"


def test_max_turns_and_max_requests_together_are_refused_located(tmp_path: Path) -> None:
    path = _task_file(tmp_path, "{max_turns: 7, max_requests: 8}")
    with pytest.raises(ConfigError) as info:
        load_runs(path)
    [p] = info.value.problems
    assert (p.file, p.line, p.field) == (str(path), 5, "tasks[0].limits")
    assert "max_requests or max_turns" in p.message
    res = run_cli("validate", path)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{path}:5: tasks[0].limits: give max_requests or max_turns" in res.stderr


def test_a_bad_max_turns_is_named_as_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_runs(_task_file(tmp_path, "{max_turns: 0}"))
    assert info.value.problems[0].field == "tasks[0].limits.max_turns"


@pytest.mark.parametrize("template", ["x/{run}/{name}", "x/{batch}/{name}"])
def test_run_and_batch_in_a_branch_template_both_name_the_batch(
    tmp_path: Path, template: str
) -> None:
    [run] = load_runs(_task_file(tmp_path, "{}", branch=template), offline=True)
    assert branch_name(run.git.branch, branch_fields(run, "0123456789ab")) == "x/0123456789ab/a"


def test_the_default_branch_template_names_the_batch(tmp_path: Path) -> None:
    [run] = load_runs(_task_file(tmp_path, "{}"), offline=True)
    assert run.git.branch == "runner/{batch}/{name}"
    assert branch_name(run.git.branch, branch_fields(run, "b1")) == "runner/b1/a"


@pytest.mark.parametrize("flag", ["--batch-id", "--run-id"])
def test_report_branches_takes_the_old_flag(flag: str) -> None:
    args = build_parser().parse_args(
        ["report", "branches", "d", "--repo", "r", "--delete", flag, "x", flag, "y"]
    )
    assert args.batch_id == ["x", "y"]
