"""Writing a batch's reports: time to render report.json, junit.xml, summary.md and
report.html for a large batch, the page's size, `report compare` on it, and (when Chromium
is installed) how long the page takes to become usable in headless Chromium: the time from
navigation to the end of the viewer's first drawing (its `data-ready` mark), and to the
load event.

Runs are synthetic (built in memory: 20 requests each, every third with a 200-event
transcript on disk), so the numbers are the report code's alone.

Measures report writing directly (runner.reports.json_report, runner.reports.files,
runner.reports.compare, runner.reports.model, runner.redact): no public API gives it.

    .venv/bin/python bench/reports.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from runner.redact import Redactor  # noqa: E402
from runner.reports.compare import compare  # noqa: E402
from runner.reports.files import write_reports  # noqa: E402
from runner.reports.json_report import build_report  # noqa: E402
from runner.reports.model import (  # noqa: E402
    PrefixReport,
    RequestReport,
    RunReport,
    UsageReport,
)


def make_run(i: int, variant: str) -> RunReport:
    reqs = [
        RequestReport(
            index=k,
            turn=0,
            input_items=2 * k,
            request_bytes=4000 * k,
            duration_ms=300.0,
            response_id=f"r{k}",
            output_types=["message"],
            usage=UsageReport(
                input_tokens=1000 * k,
                cached_tokens=900 * k,
                uncached_tokens=100 * k,
                output_tokens=50,
                total_tokens=1000 * k + 50,
            ),
            prefix=PrefixReport(extends_previous=True, reused_items=k, ideal_cache_ratio=0.9),
        )
        for k in range(1, 21)
    ]
    return RunReport(
        id=f"task-{i // 2 % 50}",  # each task in both variants, as a real matrix
        run=f"task-{i}.{variant}",
        model="openai/gpt-5",
        variant=variant,
        status="completed" if i % 3 else "check_failed",
        error=None,
        final_message="Done. " * 50,
        turns_completed=1,
        tool_calls=19,
        duration_s=30.0,
        cost_usd=0.01,
        usage=UsageReport(
            input_tokens=210_000,
            cached_tokens=189_000,
            uncached_tokens=21_000,
            output_tokens=1000,
            total_tokens=211_000,
        ),
        requests=reqs,
        events_file=f"threads/task-{i}.{variant}.jsonl",
        index=i,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    import datetime as dt

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        (out / "threads").mkdir()
        runs = [make_run(i, "a" if i % 2 else "b") for i in range(args.runs)]
        event = json.dumps(
            {
                "type": "item.completed",
                "item": {
                    "id": "x",
                    "type": "command_execution",
                    "command": "pytest -q",
                    "aggregated_output": "." * 2000,
                    "exit_code": 0,
                },
            }
        )
        for t in runs[::3]:
            (out / t.events_file).write_text((event + "\n") * 200)
        now = dt.datetime.now(dt.UTC)
        report = build_report(
            runs=runs, batch_id="bench", task_file="tasks.yaml", started=now, finished=now
        )
        t0 = time.perf_counter()
        write_reports(report, out, redact=Redactor([]))
        all_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        write_reports(report, out, redact=Redactor([]), page=False)
        no_page_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        compare(report, report, base_variant="a", new_variant="b")
        compare_s = time.perf_counter() - t0
        size = (out / "report.html").stat().st_size
        print(f"runs: {args.runs} (20 requests each)")
        print(
            f"all four reports: {all_s:.2f} s; without report.html: {no_page_s:.2f} s; "
            f"report.html alone: {all_s - no_page_s:.2f} s"
        )
        print(f"report.html: {size / 1e6:.1f} MB (every run, transcripts cut to a share)")
        print(f"report compare (per variant and per task): {compare_s * 1000:.0f} ms")
        if shutil.which("chromium"):
            load_page(out / "report.html", out / "profile")


def load_page(page: Path, profile: Path) -> None:
    from bench.browser import Browser

    browser = Browser(profile)
    try:
        t0 = time.perf_counter()
        browser.call("Page.navigate", {"url": page.as_uri()}, session=True)
        browser.wait_event("Page.loadEventFired", timeout=120)
        load_s = time.perf_counter() - t0
        ready = browser.js("Number(document.documentElement.dataset.ready)")
        count = browser.js("document.getElementById('f-count').textContent")
        search = browser.js(
            "(async () => { const q = document.getElementById('f-q'); q.value = 'passed';"
            "q.dispatchEvent(new Event('input')); await new Promise(r => setTimeout(r, 1000));"
            "return document.documentElement.dataset.drawn; })()"
        )
        print(
            f"headless Chromium: viewer ready {ready} ms after navigation start ({count}); "
            f"load event after {load_s:.2f} s; first transcript search and redraw {search} ms"
        )
    finally:
        browser.close()


if __name__ == "__main__":
    main()
