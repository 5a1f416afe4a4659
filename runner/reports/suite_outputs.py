"""Files the suites' own tools take (issue 27), made from the report alone so `runner
report merge` writes them too:

- `OUT/predictions/<model>[.<variant>][.r<n>].jsonl`: SWE-bench predictions
  (`instance_id`, `model_name_or_path`, `model_patch`) per model and variant (and repeat,
  since the harness keeps one prediction per instance), which the official harness
  evaluates unchanged; of model runs only (an oracle's gold patch is no model's work);
  `<same>.incomplete.json` beside one whose patches lack part of the work;
- `OUT/harbor/<task>/<run>/`: Harbor's trial layout for every graded suite run,
  `verifier/reward.json` (named rewards) or `verifier/reward.txt` (one), the verifier's
  output in `verifier/test-stdout.txt`, and `result.json` (fields in docs/report.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from runner.fsutil import atomic_write_text
from runner.redact import Redactor
from runner.reports.model import Report, RunReport
from runner.vocabulary import RunStatus

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def write_suite_outputs(report: Report, out_dir: Path, redact: Redactor) -> None:
    suite_runs = [t for t in report.runs if t.suite is not None]
    if not suite_runs:
        return
    _predictions(
        [t for t in suite_runs if (t.suite or "").startswith("swe-bench:") and t.agent == "model"],
        out_dir,
        redact,
    )
    for t in suite_runs:
        if t.verifier is not None:
            _harbor_trial(t, out_dir, redact)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, text)


def model_label(t: RunReport) -> str:
    """`model_name_or_path`: the model, and the variant when there is one."""
    return t.model if t.variant is None else f"{t.model}.{t.variant}"


def _predictions(runs: list[RunReport], out_dir: Path, redact: Redactor) -> None:
    """One file per model, variant and repeat, each with a `model_name_or_path` of its
    own (`.r<n>` for a repeat, as the file name): the harness keys its logs, its
    skip-if-done and its report by run id and that label, so two files evaluated under
    one run id must not share it. Beside a file, `<name>.incomplete.json` lists the
    instances whose patch is not the run's whole work (a file over the per-file cap, or
    every change over the patch's cap), which the harness's own fields cannot carry."""
    from runner.suites.swe_predictions import predictions_lines

    repeats = any(t.repeat > 1 for t in runs)
    files: dict[str, list[tuple[str, str, str | None]]] = {}
    incomplete: dict[str, dict[str, list[str]]] = {}
    for t in runs:
        if t.status is RunStatus.SKIPPED:
            continue
        label = model_label(t) + (f".r{t.repeat}" if repeats else "")
        name = _UNSAFE.sub("-", label.replace("/", "__"))
        instance = (t.suite or "").partition(":")[2]
        files.setdefault(name, []).append((instance, label, _patch(t, out_dir)))
        if t.environment is not None and t.environment.left_out:
            incomplete.setdefault(name, {})[instance] = list(t.environment.left_out)
    folder = out_dir / "predictions"
    for name, lines in files.items():
        text = predictions_lines(lines).decode("ascii")
        _write(folder / f"{name}.jsonl", redact(text))
        if name in incomplete:
            _write(
                folder / f"{name}.incomplete.json",
                redact(json.dumps(incomplete[name], indent=2)) + "\n",
            )
    # An earlier write of this out dir may have named files otherwise (before a second
    # repeat finished, one model's file had no `.r1`): a stale file would be graded as a
    # prediction set of its own, under a label another file now uses.
    keep = {f"{n}.jsonl" for n in files} | {f"{n}.incomplete.json" for n in incomplete}
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as entries:
        for entry in entries:
            stale = entry.name.endswith((".jsonl", ".incomplete.json"))
            if stale and entry.name not in keep and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)


def _patch(t: RunReport, out_dir: Path) -> str | None:
    """The run's patch ("" when it changed nothing); None when it never got to work."""
    rel = t.environment.patch if t.environment is not None else None
    if rel is None and t.result is not None:
        rel = t.result.patch
    if rel is None:
        return "" if t.environment is not None and t.environment.start_s is not None else None
    try:
        return (out_dir / rel).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError:
        return None


def _harbor_trial(t: RunReport, out_dir: Path, redact: Redactor) -> None:
    task = _UNSAFE.sub("-", t.id)
    trial = out_dir / "harbor" / task / _UNSAFE.sub("-", t.run or t.id)
    v = t.verifier
    assert v is not None
    if t.rewards and set(t.rewards) != {"reward"}:
        _write(trial / "verifier" / "reward.json", json.dumps(t.rewards) + "\n")
    elif t.reward is not None:
        _write(trial / "verifier" / "reward.txt", f"{t.reward:g}\n")
    _write(trial / "verifier" / "test-stdout.txt", redact(v.output_tail))
    e = t.environment
    result: dict[str, Any] = {
        "task_name": t.id,
        "trial_name": t.run or t.id,
        "suite": t.suite,
        "agent": t.agent,
        "model": t.model,
        "variant": t.variant,
        "repeat": t.repeat,
        "status": str(t.status),
        "reward": t.reward,
        "rewards": t.rewards,
        "resolution": t.resolution,
        "exception": t.error,
        "verifier_error": v.error,
        "timing_s": {
            "build": e.build_s if e is not None else None,
            "start": e.start_s if e is not None else None,
            "agent": t.duration_s,
            "verify": v.duration_s,
        },
        "patch": e.patch if e is not None else None,
        "tokens": {"input": t.usage.input_tokens, "output": t.usage.output_tokens},
        "cost_usd": t.cost_usd,
    }
    _write(trial / "result.json", redact(json.dumps(result, indent=2)) + "\n")
