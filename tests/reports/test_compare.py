"""`runner report compare`: Fisher's exact test against published values, the comparison of
two variants with hand-counted pass rates, two models from real batches (two out dirs, and
one with both), and task sets that differ. The CLI's exit codes for CI gating are
tests/test_report_cli.py's."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runner.errors import ReportError
from runner.reports.compare import compare, render_compare
from runner.reports.stats import fisher_exact
from tests.support.cli import run_cli, shell, write_tasks
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    ThreadedServer,
    per_conversation,
    reply_message,
)
from tests.support.reports import benchmark_report, report, report_dir, task, usage


@pytest.mark.parametrize(
    ("table", "p"),
    [
        # R: fisher.test(matrix(c(a, c, b, d), 2))$p.value
        ((3, 1, 1, 3), 0.4857142857),
        ((1, 9, 11, 3), 0.0027594562),  # the tea-tasting-like textbook table
        ((10, 0, 0, 10), 1.0825088224e-05),
        ((8, 2, 1, 5), 0.0349650350),
        ((5, 1, 1, 5), 0.0800865801),
        ((0, 6, 6, 0), 0.00216450216),
        ((2, 2, 2, 2), 1.0),
        ((0, 0, 3, 1), 1.0),
    ],
)
def test_fisher_exact_matches_published_values(table: tuple[int, int, int, int], p: float) -> None:
    assert math.isclose(fisher_exact(*table), p, rel_tol=1e-8)


def test_fisher_is_symmetric_and_refuses_negative_counts() -> None:
    assert fisher_exact(8, 2, 1, 5) == fisher_exact(1, 5, 8, 2) == fisher_exact(2, 8, 5, 1)
    with pytest.raises(ReportError, match="counts must be >= 0"):
        fisher_exact(-1, 0, 0, 0)


def test_two_variants_of_one_batch() -> None:
    """benchmark_report: gpt-5 terse 5/6, plain 1/6; smollm2 terse 0/6, plain 6/6."""
    r = benchmark_report()
    c = compare(r, r, base_variant="terse", new_variant="plain")
    assert [g.name for g in c.groups] == ["openai/gpt-5", "local/smollm2"]
    gpt, small = c.groups
    assert (gpt.base.passed, gpt.base.finished, gpt.new.passed, gpt.new.finished) == (5, 6, 1, 6)
    assert gpt.pass_rate_change == round(1 / 6 - 5 / 6, 4)
    assert gpt.verdict == "no significant change" and math.isclose(
        gpt.p_value or 0, 0.080087, abs_tol=1e-6
    )
    assert small.verdict == "improvement" and small.pass_rate_change == 1.0
    assert c.overall.base.passed == 5 and c.overall.new.passed == 7
    assert c.overall.verdict == "no significant change"
    assert len(c.tasks) == 4 and c.tasks[0].name == "alpha (openai/gpt-5)"
    # Token means over finished runs: r=1..3 -> 1100, 2100, 3100 tokens; mean 2100.
    assert gpt.base.mean_tokens == 2100.0
    assert gpt.base.mean_cost_usd == 0.02 and small.base.mean_cost_usd is None
    md = render_compare(c)
    assert "**No significant regression** at alpha 0.05 (Fisher's exact test" in md
    assert "| local/smollm2 | 0/6 0% | 6/6 100% | +100.0 pp | 0.002 | **improvement** |" in md


def test_skipped_and_errored_runs_are_not_compared() -> None:
    base = report(
        [
            task("a", "p/m", "completed"),
            task("a", "p/m", "skipped", requests=0),
            task("a", "p/m", "error"),
        ]
    )
    new = report([task("a", "p/m", "check_failed")])
    c = compare(base, new)
    assert (c.overall.base.finished, c.overall.base.skipped, c.overall.base.errored) == (1, 1, 1)
    assert c.overall.base.pass_rate == 1.0 and c.overall.new.pass_rate == 0.0
    assert "1/1 -> 0/0" in render_compare(c)


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return run_cli("report", "compare", *map(str, args))


# Two models, compared as a researcher would: batches made by `runner run` against the
# loopback server. `fake/good` writes ok.txt on every task; `fake/bad` answers without a
# command. Task `a` passes anyway, `b` and `c` check for ok.txt. With 3 repeats:
#   good: a 3/3, b 3/3, c 3/3 = 9/9;  bad: a 3/3, b 0/3, c 0/3 = 3/9.
# Pooled Fisher [[9, 0], [3, 6]]: the two tables as unlikely as this one (a = 9 and a = 3)
# weigh C(9, 3) = 84 each of C(18, 12) = 18564: p = 168/18564.
# Stratified: `a` carries no information; `b` and `c` are each [[3, 0], [0, 3]], whose laws
# are 1, 9, 9, 1 over 20; their convolution is 1, 18, 99, 164, 99, 18, 1 over 400, and the
# observed total 6 is one of the two outcomes of weight 1: p = 2/400.
# Per task: b and c 2/20 = 0.1 each, a 1.0; Holm over 3: 0.3, 0.3, 1.0.
TWO_MODEL_TASKS = (
    "  - {id: a, prompt: task a, repo: ., check: 'true'}\n"
    "  - {id: b, prompt: task b, repo: ., check: 'test -f ok.txt'}\n"
    "  - {id: c, prompt: task c, repo: ., check: 'test -f ok.txt'}\n"
)


def _two_models(req: RecordedRequest, i: int) -> Reply:
    if i == 0 and req.json.get("model") == "good":
        return shell("echo ok > ok.txt", f"c{i}")
    return reply_message("Done.")


@pytest.fixture(scope="module")
def model_batches(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`good` and `bad` in an out dir each, and `both`: one batch with both models."""
    tmp = tmp_path_factory.mktemp("models")
    srv = ThreadedServer(per_conversation(_two_models)).start()
    try:
        tasks = write_tasks(
            tmp,
            srv.base_url,
            TWO_MODEL_TASKS,
            defaults="  git: {keep: patch}\nmatrix: {repeat: 3}\n",
        )
        dirs = {}
        for name, models in (
            ("good", ["fake/good"]),
            ("bad", ["fake/bad"]),
            ("both", ["fake/good", "fake/bad"]),
        ):
            flags = [x for m in models for x in ("--model", m)]
            res = run_cli("run", tasks, "--out", tmp / name, *flags, timeout=300)
            assert res.returncode == (0 if name == "good" else 1), res.stderr
            dirs[name] = tmp / name
        return dirs
    finally:
        srv.stop()


def _counts(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return (
        row["base"]["passed"],
        row["base"]["finished"],
        row["new"]["passed"],
        row["new"]["finished"],
    )


def _check_good_vs_bad(data: dict[str, Any]) -> None:
    overall = data["overall"]
    assert _counts(overall) == (9, 9, 3, 9)
    assert overall["p_value"] == round(168 / 18564, 6)
    assert overall["stratified_p_value"] == 0.005 and overall["stratified_exact"] is True
    assert overall["tasks_compared"] == 3
    assert overall["pass_rate_change_pp"] == overall["mean_task_change_pp"] == -66.67
    assert overall["verdict"] == "regression"
    tasks = {t["name"]: t for t in data["tasks"]}
    assert sorted(tasks) == ["a", "b", "c"]
    assert [_counts(tasks[k]) for k in "abc"] == [(3, 3, 3, 3), (3, 3, 0, 3), (3, 3, 0, 3)]
    assert [tasks[k]["p_value"] for k in "abc"] == [1.0, 0.1, 0.1]
    assert [tasks[k]["p_adjusted"] for k in "abc"] == [1.0, 0.3, 0.3]
    assert [tasks[k]["verdict"] for k in "abc"] == ["no significant change"] * 3
    assert data["common_tasks"] == 3 and data["notes"] == []


def test_two_models_in_two_out_dirs(model_batches: dict[str, Path]) -> None:
    good, bad = model_batches["good"], model_batches["bad"]
    # Without the flags every row is one model against nothing: said, not guessed.
    plain = _cli(good, bad, "--format", "json")
    assert plain.returncode == 0, plain.stderr
    data = json.loads(plain.stdout)
    assert [g["verdict"] for g in data["groups"]] == ["not comparable"] * 2
    assert data["overall"]["tasks_compared"] == 0  # no task of one model meets the other
    assert all(t["verdict"] == "not comparable" for t in data["tasks"])
    assert "to compare two models give --base-model and --new-model" in data["notes"][0]
    res = _cli(
        good, bad, "--base-model", "fake/good", "--new-model", "fake/bad", "--format", "json"
    )
    assert res.returncode == 0, res.stderr
    _check_good_vs_bad(json.loads(res.stdout))
    # One flag is enough when the other side ran one model only.
    assert _cli(good, bad, "--new-model", "fake/bad", "--fail-on-regression").returncode == 1
    md = _cli(good, bad, "--base-model", "fake/good", "--new-model", "fake/bad").stdout
    assert md.startswith("# Compare good fake/good -> bad fake/bad\n")
    assert (
        "| all runs | 9/9 100% | 3/9 33% | -66.7 pp | 0.009 | **regression** "
        "| 0.005 (3 strata) | -66.7 pp |" in md
    )
    assert "| b | 3/3 100% | 0/3 0% | -100.0 pp | 0.100 | 0.300 | no significant change |" in md
    assert "## By model / variant" not in md  # nothing left to group by


def test_two_models_in_one_out_dir(model_batches: dict[str, Path]) -> None:
    both = model_batches["both"]
    res = _cli(
        both, both, "--base-model", "fake/good", "--new-model", "fake/bad", "--format", "json"
    )
    assert res.returncode == 0, res.stderr
    _check_good_vs_bad(json.loads(res.stdout))
    # Against a batch of two models, one side must say which.
    res = _cli(model_batches["good"], both, "--base-model", "fake/good")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--new-model: NEW ran several models (fake/bad, fake/good); name one" in res.stderr
    res = _cli(both, both, "--base-model", "fake/nope", "--new-model", "fake/bad")
    assert res.returncode == 2
    assert (
        "--base-model: no run of model 'fake/nope'; models there: fake/bad, fake/good" in res.stderr
    )


def test_a_closed_stdout_keeps_the_exit_code(model_batches: dict[str, Path]) -> None:
    """`compare --format json | head -1`: the reader is gone before the first write."""
    good, bad = model_batches["good"], model_batches["bad"]
    for extra in (["--format", "json"], []):
        read, write = os.pipe()
        os.close(read)
        try:
            res = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "runner",
                    "report",
                    "compare",
                    good,
                    bad,
                    "--new-model",
                    "fake/bad",
                    "--fail-on-regression",
                    *extra,
                ],
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        finally:
            os.close(write)
        assert res.returncode == 1 and res.stderr == "", res.stderr


def test_different_task_sets_are_refused_unless_allowed(tmp_path: Path) -> None:
    base = report_dir(
        tmp_path / "base",
        report([task(i, "p/m", "completed", repeat=r) for i in "abc" for r in (1, 2)]),
    )
    new = report_dir(
        tmp_path / "new",
        report([task(i, "p/m", "check_failed", repeat=r) for i in "bcd" for r in (1, 2)]),
    )
    res = _cli(base, new)
    assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
    assert (
        "BASE/NEW: task ids differ (only in base: a; only in new: d); "
        "--allow-different-tasks compares the 2 common task(s) only"
    ) in res.stderr
    res = _cli(base, new, "--allow-different-tasks", "--format", "json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert (data["common_tasks"], data["tasks_only_in_base"], data["tasks_only_in_new"]) == (
        2,
        ["a"],
        ["d"],
    )
    assert _counts(data["overall"]) == (4, 4, 0, 4)
    assert [t["name"] for t in data["tasks"]] == ["b (p/m)", "c (p/m)"]
    md = _cli(base, new, "--allow-different-tasks").stdout
    assert (
        "> compared on the 2 task(s) both sides ran; left out: only in base: a; only in new: d"
        in md
    )
    other = report_dir(tmp_path / "other", report([task("z", "p/m", "completed")]))
    res = _cli(base, other, "--allow-different-tasks")
    assert res.returncode == 2 and "no task is on both sides" in res.stderr


def test_changes_say_pp_or_percent() -> None:
    """A pass rate or cache hit moves by percentage points; tokens, cost and time by an
    absolute amount and a percent of the base."""
    base = report(
        [task("a", "p/m", "completed", u=usage(1000, 500, 0), cost_usd=0.02, duration_s=10)]
    )
    new = report(
        [task("a", "p/m", "check_failed", u=usage(1500, 300, 0), cost_usd=0.01, duration_s=15)]
    )
    c = compare(base, new)
    assert c.overall.pass_rate_change == -1.0 and c.overall.pass_rate_change_pp == -100.0
    row = next(line for line in render_compare(c).splitlines() if line.startswith("| all runs"))
    assert "| -100.0 pp |" in row
    assert (
        "| 1,500 (+500, +50%) | 20.0% (-30.0 pp) | $0.0100 (-$0.0100, -50%) | 15.0s (+5.0s, +50%) |"
        in row
    )


def test_no_task_on_both_sides_has_no_per_task_p_value(tmp_path: Path) -> None:
    """Each side finished a different task: the pooled row compares, but no stratum can,
    so there is no per-task p-value (not p = 1), and a note says why."""
    base = report([task("a", "p/m", "completed"), task("b", "p/m", "error")])
    new = report([task("a", "p/m", "error"), task("b", "p/m", "check_failed")])
    res = _cli(
        report_dir(tmp_path / "b", base), report_dir(tmp_path / "n", new), "--format", "json"
    )
    assert res.returncode == 0, res.stderr
    overall = json.loads(res.stdout)["overall"]
    assert overall["tasks_compared"] == 0 and overall["p_value"] is not None
    assert overall["stratified_p_value"] is None and overall["mean_task_change_pp"] is None
    md = render_compare(compare(base, new))
    assert "| all runs | 1/1 100% | 0/1 0% | -100.0 pp | 1.000 | no significant change | - |" in md
    assert "> all runs: no per-task test, as no task has finished runs on both sides" in md


def test_a_run_listed_twice_is_refused(tmp_path: Path) -> None:
    """An edited report that repeats an entry would double n: refused where it is read,
    naming the entry, for compare and merge alike."""
    runs = [
        task(i, "p/m", "completed", run=f"{i}.r{r}", repeat=r, fingerprint=f"{i}{r}")
        for i in "ab"
        for r in (1, 2)
    ]
    good = report_dir(tmp_path / "good", report(runs))
    edited = report_dir(tmp_path / "edited", report([*runs, runs[1]]))
    for res in (_cli(good, edited), run_cli("report", "merge", edited, "--out", tmp_path / "m")):
        assert res.returncode == 2 and res.stdout == "" and "Traceback" not in res.stderr
        assert f"{edited / 'report.json'}: runs[4]: is run 'a.r2' again (first at runs[1]" in (
            res.stderr
        ), res.stderr
    assert _cli(good, good).returncode == 0


def test_the_same_task_ids_from_another_task_file_are_noted(
    loopback_thread: Any, tmp_path: Path
) -> None:
    """Two task files with the same ids but another prompt or check: the comparison says
    which tasks changed (read from each run's recorded prompt and check command)."""
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    first = write_tasks(
        tmp_path / "one",
        srv.base_url,
        "  - {id: a, prompt: fix it, repo: ., check: 'true'}\n"
        "  - {id: b, prompt: explain it, repo: ., check: 'true'}\n",
    )
    second = write_tasks(
        tmp_path / "two",
        srv.base_url,
        "  - {id: a, prompt: fix it, repo: ., check: 'true'}\n"
        "  - {id: b, prompt: explain something else, repo: ., check: 'true'}\n",
    )
    third = write_tasks(
        tmp_path / "three",
        srv.base_url,
        "  - {id: a, prompt: fix it, repo: ., check: 'test -e nothing'}\n"
        "  - {id: b, prompt: explain it, repo: ., check: 'true'}\n",
    )
    outs = []
    for tasks in (first, second, third):
        outs.append(tasks.parent / "out")
        run_cli("run", tasks, "--out", outs[-1])
    note = "the same id ran another prompt or check on each side (another task file?)"
    same = _cli(outs[0], outs[0])
    assert same.returncode == 0 and note not in same.stdout
    prompt = _cli(outs[0], outs[1])
    assert prompt.returncode == 0 and f"> task(s) b: {note}" in prompt.stdout, prompt.stdout
    check = _cli(outs[0], outs[2], "--format", "json")
    assert any(n.startswith(f"task(s) a: {note}") for n in json.loads(check.stdout)["notes"])
