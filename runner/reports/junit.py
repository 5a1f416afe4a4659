"""Renders a `Report` as JUnit XML, so CI systems can show agent runs as test results.

Pure: returns the document as a string; the caller writes it atomically.

The output must validate against the Jenkins xUnit junit-10 schema, which `junit-xml` alone
does not produce, so its output is post-processed:

* `disabled` (on `testsuites` and `testsuite`) is not in the schema: removed.
* `time` is a SUREFIRE_TIME (at most 3 decimals); `junit-xml` writes raw float sums and `%f`
  (6 decimals): every `time` is rewritten with 3 decimals, and the `testsuites` time is the
  run's wall-clock duration rather than the sum over (parallel) suites.
* `properties` is only allowed on `testsuite`, not on `testcase`: the suite carries the model's
  totals only; a run's few key numbers are `name=value` lines in its testcase's
  `system-out`, which Jenkins, GitLab and dorny/test-reporter all show next to the test
  (report.json has the rest: repeating every number per run made JUnit viewers unreadable).
* A run that never started (batch budget, Ctrl-C) is `<skipped>`, not an error or failure.
  The root `testsuites` cannot say how many: the schema has no `skipped` attribute there
  (only on `testsuite`), and an invalid file is worse than a missing total.

Layout: a `testsuite` per model (variants and repeats of a model are its testcases, so a
model's pass rate is the suite's), a `testcase` per run named by the run's name
(`<task>.<provider>-<model>[.<variant>].r<n>`), with the task id as `classname`. Jenkins
splits `classname` at dots into package and class, and model names have dots (`gpt-5.5`)
where task ids rarely do; it also groups the repeats of one task under one class.

Text is sanitized before it reaches `junit-xml`: characters XML 1.0 cannot carry (control
characters, lone surrogates, U+FFFE/U+FFFF) and the ones `junit-xml` silently deletes (C1
controls) are replaced by a visible `\\xNN`/`\\uNNNN` escape instead of breaking the document.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from junit_xml import TestCase, TestSuite, to_xml_report_string

from runner.reports.model import Report, RunReport, UsageReport
from runner.reports.totals import compute_totals, mean_reward, task_rewards
from runner.vocabulary import RunStatus, Verdict

REASONS: dict[RunStatus, str] = {
    RunStatus.FAILED: "the model or server refused to go on",
    RunStatus.CHECK_FAILED: "the check command failed",
    RunStatus.MAX_REQUESTS: "stopped at the request limit (limits.max_requests)",
    RunStatus.MAX_TOOL_CALLS: "stopped at the tool-call limit",
    RunStatus.TIMEOUT: "timed out",
    RunStatus.BUDGET: "stopped at the token or cost budget",
    RunStatus.SCOPE_VIOLATION: "changes outside the allowed scope",
    RunStatus.ERROR: "the run failed with an error",
    RunStatus.INTERRUPTED: "stopped by Ctrl-C or SIGTERM",
    RunStatus.RATE_LIMITED: "still rate-limited after every retry",
    RunStatus.QUOTA_EXHAUSTED: "the provider account is out of quota",
    RunStatus.MAX_OUTPUT_TOKENS: "the answer was cut off at max_output_tokens",
    RunStatus.SIZE_LIMIT: "stopped at a byte cap (limits.max_*_bytes)",
}
"""Short human reason for each status that is an `<error>` or a `<failure>`; the start of
the `message` attribute. An errored verdict (the run says nothing about the agent: provider,
workspace, crash, Ctrl-C, a rate limit or quota retries could not get past) is an
`<error>`; a failed one (the agent ran and did not achieve the task within its limits) is a
`<failure>`."""

MESSAGE_LIMIT = 200
"""`message` is a one-line summary; the full text goes in the element body."""

# Everything XML 1.0 forbids, plus what junit-xml's cleaner drops (DEL and C1 controls but
# U+0085) and noncharacters, so nothing vanishes without a trace.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufdd0-\ufddf\ufffe\uffff]"
    "|[\U0001fffe\U0001ffff\U0002fffe\U0002ffff\U0003fffe\U0003ffff\U0004fffe\U0004ffff"
    "\U0005fffe\U0005ffff\U0006fffe\U0006ffff\U0007fffe\U0007ffff\U0008fffe\U0008ffff"
    "\U0009fffe\U0009ffff\U000afffe\U000affff\U000bfffe\U000bffff\U000cfffe\U000cffff"
    "\U000dfffe\U000dffff\U000efffe\U000effff\U000ffffe\U000fffff\U0010fffe\U0010ffff]"
)


def _escape_char(m: re.Match[str]) -> str:
    code = ord(m.group())
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def xml_safe(text: str) -> str:
    """Replace characters XML cannot carry with a visible escape (not silently dropped)."""
    return _UNSAFE.sub(_escape_char, text)


def _time(seconds: float) -> str:
    """SUREFIRE_TIME: digits, at most 3 decimals (so no sign, no `nan`/`inf`, no exponent)."""
    return f"{max(seconds, 0.0):.3f}" if math.isfinite(seconds) else "0.000"


def _ratio(value: float | None) -> str | None:
    return None if value is None else f"{value:.4f}"


def _cost(value: float | None) -> str | None:
    return None if value is None else f"{value:.6f}"


def _known(pairs: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """Unknown values (no price, nothing sent, no branch) are left out rather than written
    as an empty string or a 0 a dashboard would plot."""
    return [(name, value) for name, value in pairs if value is not None]


def _usage_pairs(u: UsageReport) -> list[tuple[str, str | None]]:
    return [
        ("tokens", str(u.total_tokens)),
        ("tokens_input", str(u.input_tokens)),
        ("tokens_cached", str(u.cached_tokens)),
        ("tokens_uncached", str(u.uncached_tokens)),
        ("tokens_output", str(u.output_tokens)),
        ("tokens_reasoning", str(u.reasoning_tokens)),
        ("cache_hit_ratio", _ratio(u.cache_hit_ratio)),
        ("prefix_reuse_ratio", _ratio(u.ideal_cache_ratio)),  # report.json: ideal_cache_ratio
    ]


def run_properties(task: RunReport) -> list[tuple[str, str]]:
    """The per-run numbers CI dashboards plot (unprefixed names, in a stable order)."""
    branch = task.result.branch if task.result is not None else None
    check = None if task.check is None else "passed" if task.check.passed else "failed"
    return _known(
        [
            ("status", task.status),
            ("skip_reason", task.skip_reason),
            ("stopped_by", task.stopped_by),
            ("variant", task.variant),
            ("repeat", str(task.repeat)),
            *_usage_pairs(task.usage),
            ("cost_usd", _cost(task.cost_usd)),
            ("requests", str(len(task.requests))),
            ("user_turns", str(task.user_turns)),
            ("tool_calls", str(task.tool_calls)),
            ("duration_s", _time(task.duration_s)),
            ("branch", branch),
            ("check", check),
            ("prefix_breaks", str(task.prefix_breaks)),
            ("reward", None if task.reward is None else f"{task.reward:g}"),
            *((f"reward.{k}", f"{v:g}") for k, v in task.rewards.items() if k != "reward"),
            ("resolution", task.resolution),
        ]
    )


CASE_OUTPUT = (
    "status",
    "skip_reason",
    "stopped_by",
    "requests",
    "tokens",
    "cache_hit_ratio",
    "cost_usd",
    "duration_s",
    "branch",
    "reward",
    "resolution",
)
"""The run properties repeated in a testcase's `system-out`."""


def suite_properties(tasks: list[RunReport]) -> list[tuple[str, str]]:
    """The model's totals over its runs; `cost_usd` only when every run's cost is known.
    `pass_rate` is over finished runs (skipped and errored ones are counted apart)."""
    totals = compute_totals(tasks)
    return _known(
        [
            ("runs", str(totals.runs)),
            ("finished", str(totals.finished)),
            ("skipped", str(totals.skipped)),
            ("errored", str(totals.errored)),
            ("passed", str(totals.completed)),
            ("pass_rate", None if totals.pass_rate is None else f"{totals.pass_rate:.4f}"),
            *_usage_pairs(totals.usage),
            ("cost_usd", _cost(totals.cost_usd)),
            ("requests", str(totals.requests)),
            ("user_turns", str(sum(t.user_turns for t in tasks))),
            ("tool_calls", str(totals.tool_calls)),
            ("duration_s", _time(sum(t.duration_s for t in tasks))),
            *_reward_pairs(tasks),
        ]
    )


def _reward_pairs(tasks: list[RunReport]) -> list[tuple[str, str | None]]:
    """Mean reward over tasks (each its finished graded runs' mean), with its 95% interval
    (`totals.mean_reward`); the graded runs and the tasks, its n."""
    n, mean, ci = mean_reward(tasks)
    runs, _ = task_rewards(tasks)
    if mean is None:
        return []
    return [
        ("mean_reward", f"{mean:.4f}"),
        ("mean_reward_ci_low", None if ci is None else f"{ci[0]:.4f}"),
        ("mean_reward_ci_high", None if ci is None else f"{ci[1]:.4f}"),
        ("rewarded", str(runs)),
        ("reward_tasks", str(n)),
    ]


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def failure_message(task: RunReport) -> str:
    """One line: the reason for the status, then the first line of the error if any."""
    reason = REASONS.get(task.status, "")
    if task.suite is not None and task.status is RunStatus.CHECK_FAILED:
        reason = "the suite's verifier did not pass it"
    detail = _first_line(task.error)
    if not detail and task.check is not None and not task.check.passed:
        detail = f"`{task.check.command}` exited {task.check.exit_code}"
    message = f"{task.status}: {reason}" + (f": {detail}" if detail else "")
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "\u2026"
    return xml_safe(message)


def failure_text(task: RunReport) -> str:
    """The full error, the failed check's output and the agent's final message."""
    parts = []
    if task.error:
        parts.append(task.error)
    if task.check is not None and not task.check.passed:
        parts.append(
            f"Check `{task.check.command}` exited {task.check.exit_code}:\n{task.check.output_tail}"
        )
    if task.final_message:
        parts.append(f"Final message:\n{task.final_message}")
    return xml_safe("\n\n".join(parts))


def case_name(task: RunReport) -> str:
    """The run's name; a report from before run names existed falls back to the task id."""
    return task.run or task.id


def _suites(report: Report) -> tuple[list[TestSuite], list[list[RunReport]]]:
    """One suite per model, in order of first appearance; tasks keep report order."""
    by_model: dict[str, list[RunReport]] = {}
    for task in report.runs:
        by_model.setdefault(task.model, []).append(task)
    suites = []
    for model, tasks in by_model.items():
        cases = []
        props = {name: xml_safe(value) for name, value in suite_properties(tasks)}
        if report.partial or report.pending:
            props["partial"] = "true"
        if report.partial:
            props["missing_shards"] = ",".join(str(k) for k in report.missing_shards)
        if report.pending:
            props["pending"] = str(report.pending)
        for task in tasks:
            case = TestCase(
                xml_safe(case_name(task)), classname=xml_safe(task.id), elapsed_sec=task.duration_s
            )
            pairs = [
                p for p in run_properties(task) if p[0] in CASE_OUTPUT or p[0].startswith("reward.")
            ]
            case.stdout = "\n".join(f"{name}={xml_safe(value)}" for name, value in pairs)
            kind = task.status.verdict
            if kind is Verdict.SKIPPED:
                case.add_skipped_info(
                    xml_safe(
                        f"not started: {task.skip_reason or 'skipped'}"
                        + (f": {_first_line(task.error)}" if task.error else "")
                    )[:MESSAGE_LIMIT]
                )
            elif kind is Verdict.ERRORED:
                case.add_error_info(failure_message(task), failure_text(task) or None, task.status)
            elif kind is Verdict.FAILED:
                case.add_failure_info(
                    failure_message(task), failure_text(task) or None, xml_safe(task.status)
                )
            cases.append(case)
        suites.append(
            TestSuite(
                xml_safe(model), cases, timestamp=xml_safe(report.started_at), properties=props
            )
        )
    return suites, list(by_model.values())


def _ordered(el: ET.Element, order: tuple[str, ...]) -> None:
    """Put the attributes in a fixed order (junit-xml's depends on which ones it set)."""
    attrs = dict(el.attrib)
    el.attrib.clear()
    el.attrib.update({k: attrs.pop(k) for k in order if k in attrs})
    el.attrib.update(attrs)


def render_junit(report: Report) -> str:
    """The report as a JUnit XML document (UTF-8 declaration, indented, trailing newline)."""
    suites, grouped = _suites(report)
    raw = to_xml_report_string(suites, prettyprint=False)
    root = ET.fromstring(raw)
    root.attrib.pop("disabled", None)
    root.set("name", xml_safe(report.batch_id))
    root.set("time", _time(report.duration_s))
    for suite_el, tasks in zip(root.findall("testsuite"), grouped, strict=True):
        suite_el.attrib.pop("disabled", None)
        suite_el.set("time", _time(sum(t.duration_s for t in tasks)))
        for case_el, task in zip(suite_el.findall("testcase"), tasks, strict=True):
            case_el.set("time", _time(task.duration_s))
            _ordered(case_el, ("name", "classname", "time"))
        _ordered(suite_el, ("name", "tests", "failures", "errors", "skipped", "time"))
    if not len(root):
        for key in ("tests", "failures", "errors"):
            root.set(key, "0")
    _ordered(root, ("name", "tests", "failures", "errors", "time"))
    ET.indent(root, space="  ")
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
