"""The files the suites' own tools take, written beside the reports: SWE-bench's
predictions per model and variant, and Harbor's trial layout."""

from __future__ import annotations

import json
from pathlib import Path

from runner.redact import Redactor
from runner.reports.files import write_reports
from runner.reports.model import EnvironmentReport, RunReport, VerifierReport
from tests.support.reports import report, task


def swe(instance: str, model: str, patch: str | None, out: Path, **extra: object) -> RunReport:
    t = task(instance, model, "completed", requests=1)
    rel = None
    if patch is not None:
        rel = f"patches/{extra.get('run', instance)}.patch"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(patch)
    env = EnvironmentReport(backend="podman", image="img", start_s=0.5, build_s=1.0, patch=rel)
    return t.model_copy(
        update={
            "suite": f"swe-bench:{instance}",
            "reward": 1.0,
            "rewards": {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0},
            "resolution": "resolved",
            "environment": env,
            "verifier": VerifierReport(
                exit_code=0, duration_s=2.0, output_tail="ok sk-secret-0123456789abcdef"
            ),
            **extra,
        }
    )


def test_predictions_per_model_and_variant_and_the_harbor_layout(tmp_path: Path) -> None:
    runs = [
        swe("i-1", "p/x", "diff --git a/f b/f\n", tmp_path),
        swe("i-2", "p/x", None, tmp_path),
        swe("i-1", "p/x", "diff --git a/g b/g\n", tmp_path, variant="v", run="i-1.v"),
    ]
    write_reports(report(runs), tmp_path, redact=Redactor(["sk-secret-0123456789abcdef"]))
    lines = [
        json.loads(x) for x in (tmp_path / "predictions" / "p__x.jsonl").read_text().splitlines()
    ]
    assert lines == [
        {"instance_id": "i-1", "model_name_or_path": "p/x", "model_patch": "diff --git a/f b/f\n"},
        {"instance_id": "i-2", "model_name_or_path": "p/x", "model_patch": ""},
    ]
    (variant,) = (tmp_path / "predictions" / "p__x.v.jsonl").read_text().splitlines()
    assert json.loads(variant)["model_name_or_path"] == "p/x.v"
    trial = tmp_path / "harbor" / "i-1" / "i-1"
    assert json.loads((trial / "verifier" / "reward.json").read_text())["fail_to_pass"] == 1.0
    assert "sk-secret-0123456789abcdef" not in (trial / "verifier" / "test-stdout.txt").read_text()
    result = json.loads((trial / "result.json").read_text())
    assert (result["task_name"], result["reward"], result["resolution"]) == ("i-1", 1.0, "resolved")
    assert result["timing_s"] == {"build": 1.0, "start": 0.5, "agent": 12.5, "verify": 2.0}


def test_one_reward_is_reward_txt_and_no_suite_writes_nothing(tmp_path: Path) -> None:
    t = task("h", "p/x", "completed").model_copy(
        update={
            "suite": "harbor:h",
            "reward": 0.5,
            "rewards": {"reward": 0.5},
            "verifier": VerifierReport(exit_code=1),
        }
    )
    write_reports(report([t]), tmp_path, redact=Redactor([]))
    assert (tmp_path / "harbor" / "h" / "h" / "verifier" / "reward.txt").read_text() == "0.5\n"
    assert not (tmp_path / "predictions").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    write_reports(report([task("a", "p/x", "completed")]), plain, redact=Redactor([]))
    assert not (plain / "harbor").exists() and not (plain / "predictions").exists()


def test_oracle_and_nop_runs_write_no_predictions(tmp_path: Path) -> None:
    """Predictions are a model's work for the official harness: a gold patch applied by
    the oracle, or nop's nothing, is not."""
    runs = [
        swe("i-1", "p/x", "diff --git a/f b/f\n", tmp_path),
        swe("oracle-i-1", "agent/oracle", "diff --git a/g b/g\n", tmp_path, agent="oracle"),
        swe("nop-i-1", "agent/nop", "", tmp_path, agent="nop"),
    ]
    write_reports(report(runs), tmp_path, redact=Redactor([]))
    assert sorted(p.name for p in (tmp_path / "predictions").iterdir()) == ["p__x.jsonl"]
    only = tmp_path / "only-sanity"
    only.mkdir()
    write_reports(report(runs[1:]), only, redact=Redactor([]))
    assert not (only / "predictions").exists()
    assert (only / "harbor" / "oracle-i-1").is_dir()  # the trial layout keeps every graded run


def labels_in(path: Path) -> set[str]:
    return {json.loads(x)["model_name_or_path"] for x in path.read_text().splitlines()}


def test_each_repeat_s_file_has_a_label_of_its_own(tmp_path: Path) -> None:
    """The harness keys its logs, skip-if-done and report by run id and label: two files
    evaluated under one run id must not share a label."""
    runs = [
        swe("i-1", "p/x", "diff --git a/f b/f\n", tmp_path, repeat=1, run="i-1.r1"),
        swe("i-1", "p/x", "diff --git a/g b/g\n", tmp_path, repeat=2, run="i-1.r2"),
        swe("i-1", "p/x", "", tmp_path, repeat=2, variant="v", run="i-1.v.r2"),
    ]
    write_reports(report(runs), tmp_path, redact=Redactor([]))
    got = {p.name: labels_in(p) for p in (tmp_path / "predictions").glob("*.jsonl")}
    assert got == {
        "p__x.r1.jsonl": {"p/x.r1"},
        "p__x.r2.jsonl": {"p/x.r2"},
        "p__x.v.r2.jsonl": {"p/x.v.r2"},
    }


def test_a_patch_that_is_not_the_whole_work_is_listed_beside_the_predictions(
    tmp_path: Path,
) -> None:
    """The harness reads its three fields only: what a prediction lacks goes in a file
    of its own, never in the .jsonl."""
    big = ["big.txt: over 16.0 MiB, left out of the patch"]
    whole = ["/testbed: the diff is over 64.0 MiB"]
    env = EnvironmentReport(backend="podman", image="img", start_s=0.5)
    runs = [
        swe("i-1", "p/x", "diff --git a/f b/f\n", tmp_path),
        swe("i-2", "p/x", "diff --git a/g b/g\n", tmp_path),
        swe("i-3", "p/x", None, tmp_path),
    ]
    runs[1] = runs[1].model_copy(
        update={"environment": runs[1].environment.model_copy(update={"left_out": big})}
    )
    runs[2] = runs[2].model_copy(update={"environment": env.model_copy(update={"left_out": whole})})
    write_reports(report(runs), tmp_path, redact=Redactor([]))
    folder = tmp_path / "predictions"
    lines = [json.loads(x) for x in (folder / "p__x.jsonl").read_text().splitlines()]
    assert [sorted(x) for x in lines] == [["instance_id", "model_name_or_path", "model_patch"]] * 3
    assert lines[2]["model_patch"] == ""  # the whole patch was dropped
    assert json.loads((folder / "p__x.incomplete.json").read_text()) == {"i-2": big, "i-3": whole}
    assert sorted(p.name for p in folder.glob("*.jsonl")) == ["p__x.jsonl"]
    write_reports(report(runs[:1]), tmp_path, redact=Redactor([]))
    assert not (folder / "p__x.incomplete.json").exists()  # an earlier write's is gone


def test_a_file_named_at_an_earlier_checkpoint_is_not_left_behind(tmp_path: Path) -> None:
    """Review 27c #1: the first checkpoint saw one repeat and wrote `p__x.jsonl`; once a
    second repeat finished the files became `.r1`/`.r2`, and the first one stayed, a
    partial prediction set under the model's own label."""
    first = [swe("i-1", "p/x", "diff --git a/f b/f\n", tmp_path, repeat=1, run="i-1.r1")]
    write_reports(report(first), tmp_path, redact=Redactor([]))
    assert [p.name for p in (tmp_path / "predictions").glob("*.jsonl")] == ["p__x.jsonl"]
    both = [*first, swe("i-1", "p/x", "diff --git a/g b/g\n", tmp_path, repeat=2, run="i-1.r2")]
    write_reports(report(both), tmp_path, redact=Redactor([]))
    names = sorted(p.name for p in (tmp_path / "predictions").iterdir())
    assert names == ["p__x.r1.jsonl", "p__x.r2.jsonl"]
