"""A finished run's entry in report.json: what it did, what it cost, how it ended, made
from its `RunRecord` in one pass and redacted once, value by value (the journal and every
report are made from it).

The report modules are imported when a run ends, not at start-up (bench/overhead.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.budget import cost_usd
from runner.items import Usage
from runner.record import RunRecord, error_of, status_of, stopped_by
from runner.redact import Redactor
from runner.vocabulary import RunStatus

if TYPE_CHECKING:
    from runner.reports.model import RunReport


def task_report(rec: RunRecord, out_dir: Path, order: Mapping[str, int]) -> RunReport:
    """The run's entry in report.json, before redaction (`run_report`). The report
    modules are imported here, when a run ends: start-up does not pay them."""
    from runner.reports.json_report import usage_report
    from runner.reports.model import (
        CheckReport,
        CompactionReport,
        PrefixReport,
        RequestReport,
        ResultReport,
        RunReport,
        UsageReport,
        WorkspaceReport,
    )
    from runner.usage import ideal_cached_tokens

    run, o = rec.run, rec.outcome
    name = run.label
    sanity = run.agent != "model"  # no request: nothing sent, nothing to pay
    ws = rec.workspace
    wsr = (
        WorkspaceReport(base=ws.base, base_dirty=ws.base_dirty, setup_s=round(ws.setup_s, 3))
        if ws is not None
        else None
    )
    res = rec.result
    rr = None
    if res is not None:
        patch = res.patch_path
        rr = ResultReport(
            commit=res.commit,
            branch=res.branch,
            patch=str(patch.relative_to(out_dir)) if patch.is_relative_to(out_dir) else str(patch),
            files_changed=len(res.files),
            insertions=res.insertions,
            deletions=res.deletions,
            files=[f.path for f in res.files],
            violations=list(res.violations),
            pushed=rec.pushed,
        )
    ck = rec.check
    cr = (
        CheckReport(
            command=ck.command,
            exit_code=ck.exit_code,
            passed=ck.passed,
            duration_s=ck.duration_s,
            output_tail=ck.output_tail,
        )
        if ck is not None
        else None
    )
    status = status_of(rec)
    options = run.model_options.model_dump(exclude_none=True)
    common: dict[str, Any] = {
        "id": run.id,
        "run": run.name,
        "repeat": run.repeat,
        "model": name,
        "api_model": None if sanity else run.api_model or run.model,
        "model_options": {} if sanity else options,
        "status": status,
        "error": error_of(rec),
        "events_file": rec.events_file,
        "workspace": wsr,
        "result": rr,
        "check": cr,
        "current_date": rec.current_date,
        "timezone": rec.timezone,
        "variant": run.variant,
        "tags": list(run.tags),
        "fingerprint": run.fingerprint,
        "cost_usd": 0.0 if sanity else cost_usd(run.price, o.usage if o else Usage()),
        "index": order.get(run.fingerprint),
        "skip_reason": rec.skipped if status is RunStatus.SKIPPED else None,
        "stopped_by": stopped_by(rec),
        "inputs": rec.inputs,
        "redone": rec.redone,
        "environment": _environment(rec),
        **_graded(rec),
    }
    if o is None:
        return RunReport(
            **common,
            final_message=None,
            turns_completed=0,
            tool_calls=0,
            duration_s=0.0,
            usage=UsageReport(),
            requests=[],
        )
    requests = [
        RequestReport(
            index=r.index,
            turn=r.turn,
            input_items=r.input_items,
            request_bytes=r.request_bytes,
            duration_ms=round(r.duration_s * 1000, 1),
            response_id=r.response_id,
            output_types=r.output_types,
            usage=usage_report(
                r.usage, ideal_cached_tokens(r.usage.input_tokens, r.prefix) if r.usage else None
            ),
            prefix=PrefixReport(**dataclasses.asdict(r.prefix)),
            kind=r.kind,
            error=r.error,
            retries=r.retries,
            retry_wait_s=round(r.retry_wait_s, 3),
        )
        for r in o.requests
    ]
    ideal = sum(r.usage.ideal_cached_tokens or 0 for r in requests if r.usage) if requests else None
    compactions = [
        CompactionReport(**{**dataclasses.asdict(c), "requests": list(c.requests)})
        for c in o.compactions
    ]
    return RunReport(
        **common,
        final_message=o.final_message,
        turns_completed=o.turns_completed,
        tool_calls=o.tool_calls,
        duration_s=round(o.duration_s, 3),
        usage=usage_report(o.usage, ideal) or UsageReport(),
        requests=requests,
        prefix_breaks=sum(not r.prefix.extends_previous for r in requests),
        compactions=compactions,
        retries=sum(r.retries for r in o.requests),
        retry_wait_s=round(sum(r.retry_wait_s for r in o.requests), 3),
        output=rec.output,
        truncated_output=o.truncated_output,
    )


def _graded(rec: RunRecord) -> dict[str, Any]:
    """A suite run's grade, and the verifier's own run."""
    run, g = rec.run, rec.grade
    if run.suite is None:
        return {}
    out: dict[str, Any] = {"suite": f"{run.suite.format}:{run.suite.id}", "agent": run.agent}
    if g is not None:
        out |= {
            "reward": g.reward,
            "rewards": dict(g.rewards),
            "resolution": g.resolution,
            "verifier": {
                "exit_code": g.exit_code,
                "duration_s": g.duration_s,
                "output_tail": g.output_tail,
                "fresh_environment": g.fresh,
                "start_s": g.start_s,
                "patch_applied": g.patch_applied,
                "note": g.why,
            },
        }
    elif rec.verifier_error is not None:
        out["verifier"] = {"error": rec.verifier_error}
        if (spent := rec.verifier_spent) is not None:
            out["verifier"] |= {
                "duration_s": spent.duration_s,
                "fresh_environment": spent.fresh,
                "start_s": spent.start_s,
                "patch_applied": spent.patch_applied,
            }
    return out


def _environment(rec: RunRecord) -> dict[str, Any] | None:
    e = rec.environment
    if e is None:
        return None
    data = dataclasses.asdict(e)
    del data["fault"]  # in `error`
    return {**data, "left_out": list(e.left_out)}


def run_report(
    rec: RunRecord, out_dir: Path, redact: Redactor, order: Mapping[str, int]
) -> RunReport:
    """The entry, redacted once: the journal and every report are made from it."""
    from runner.reports.model import RunReport

    data = task_report(rec, out_dir, order).model_dump(mode="json")
    return RunReport.model_validate(redacted(data, redact))


def redacted(value: Any, redact: Redactor) -> Any:
    """Every string in a dumped structure (keys too) redacted. Value by value rather than
    the JSON text, so a secret holding a quote or a backslash, escaped in JSON, is still
    found. Text from the model may hold lone surrogates (valid in JSON, not in UTF-8):
    replaced first."""
    if isinstance(value, str):
        return redact(value.encode("utf-8", "replace").decode("utf-8"))
    if isinstance(value, list):
        return [redacted(v, redact) for v in value]
    if isinstance(value, dict):
        return {redacted(k, redact): redacted(v, redact) for k, v in value.items()}
    return value
