"""The viewer of report.html, driven in a real headless Chromium on a 2,000-run batch with
hostile run text: the filters, the matrix links, sorting, transcript search, side by side
and the CSV export work, and no text of a run is ever run as script or parsed as markup.

One browser and one page serve the whole module (loading 2,000 runs is the slow part); the
tests run in file order and each sets the filters it needs."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runner.reports.html import render_html
from runner.reports.model import Report, RunReport
from tests.support.chromium import Browser
from tests.support.reports import report, result, run_name, task

pytestmark = pytest.mark.slow

MODELS = ["p/alpha", "p/beta"]
VARIANTS = ["terse", "chatty"]
TASKS = 50
REPEATS = 10  # 50 tasks x 2 models x 2 variants x 10 repeats = 2,000 runs
STATUSES = ["completed", "check_failed", "completed", "error", "max_requests", "skipped"]

CANARY = "window.__pwned"
HOSTILE = (
    f'</script><script>{CANARY}=1</script><!-- <img src=x onerror="{CANARY}=2">'
    f'<a href="javascript:{CANARY}=3">click</a>\u2028\u2029<svg onload={CANARY}=4>'
)
EVIL_TASK = 7
NEEDLE = "Needle-Zebra-42"


def _run(n: int, t: int, model: str, variant: str, repeat: int) -> RunReport:
    status = STATUSES[n % len(STATUSES)]
    task_id = f"task-{t:02d}" if t != EVIL_TASK else f"evil{HOSTILE}"
    hostile = t == EVIL_TASK
    r = task(
        task_id,
        model,
        status,
        run=run_name(f"task-{t:02d}", model, variant, repeat),
        repeat=repeat,
        variant=variant,
        cost_usd=round(0.001 * ((n * 7919) % 1000), 3),
        error=('=HYPERLINK("http://x")' + HOSTILE) if hostile and status == "error" else None,
        final_message=HOSTILE if hostile else f"done {n}",
        skip_reason="budget" if status == "skipped" else None,
        res=result(f"runner/{n}") if hostile else None,
    )
    return r.model_copy(update={"index": n})


def _batch(out: Path) -> Report:
    runs: list[RunReport] = []
    for t in range(TASKS):
        for model in MODELS:
            for variant in VARIANTS:
                for repeat in range(1, REPEATS + 1):
                    runs.append(_run(len(runs), t, model, variant, repeat))
    (out / "threads").mkdir(parents=True)
    (out / "patches").mkdir()
    for n, r in enumerate(runs):
        text = HOSTILE * 2 if EVIL_TASK * 40 <= n < (EVIL_TASK + 1) * 40 else f"step of run {n}"
        output = f"collected 3 items\n{NEEDLE} found\n" if n == 1234 else "ok\n" * 50
        events = [
            {"type": "turn.started"},
            {"type": "item.completed", "item": {"type": "agent_message", "text": text}},
            {
                "type": "item.completed",
                "item": {
                    "type": "command_execution",
                    "command": "pytest -q",
                    "exit_code": 0,
                    "aggregated_output": output,
                },
            },
        ]
        if n == 40 * EVIL_TASK:  # one huge message: 3 MiB
            events.append(
                {
                    "type": "item.completed",
                    "item": {"type": "agent_message", "text": "A" * (3 << 20)},
                }
            )
        (out / r.events_file).write_text("".join(json.dumps(e) + "\n" for e in events))
        if r.result is not None:
            patch = f"patches/{r.run}.patch"
            (out / patch).write_text(f"+{HOSTILE}\n")
            runs[n] = r.model_copy(update={"result": r.result.model_copy(update={"patch": patch})})
    return report(runs, batch_id=f"night{HOSTILE}")


class Viewer:
    def __init__(self, browser: Browser, rep: Report, downloads: Path) -> None:
        self.b = browser
        self.report = rep
        self.downloads = downloads

    def js(self, expression: str) -> Any:
        return self.b.js(expression)

    def select(self, element: str, value: str) -> None:
        self.js(
            f"(() => {{ const s = document.getElementById({json.dumps(element)}); "
            f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); "
            "if (s.value !== " + json.dumps(value) + ") throw new Error('no such option'); })()"
        )

    def search(self, text: str) -> None:
        self.js(
            "(async () => { const q = document.getElementById('f-q'); "
            f"q.value = {json.dumps(text)}; q.dispatchEvent(new Event('input')); "
            "await new Promise(r => setTimeout(r, 400)); })()"
        )

    def rows(self) -> list[list[str]]:
        rows: list[list[str]] = self.js(
            "Array.from(document.querySelectorAll('#runs-table tbody tr'), "
            "tr => Array.from(tr.cells, td => td.textContent))"
        )
        return rows

    def reset(self) -> None:
        self.js("document.getElementById('f-reset').click()")
        self.search("")


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Viewer]:
    tmp = tmp_path_factory.mktemp("viewer")
    out = tmp / "out"
    rep = _batch(out)
    page = out / "report.html"
    page.write_text(render_html(rep, out))
    downloads = tmp / "downloads"
    downloads.mkdir()
    browser = Browser(tmp / "profile", downloads)
    try:
        # Counted from before the page's first byte: a violation of its policy, and a
        # probe that the policy is in force at all.
        browser.call(
            "Page.addScriptToEvaluateOnNewDocument",
            {
                "source": "window.__csp = []; document.addEventListener("
                "'securitypolicyviolation', e => window.__csp.push(e.violatedDirective));"
            },
            session=True,
        )
        browser.call("Page.navigate", {"url": page.as_uri()}, session=True)
        browser.wait_event("Page.loadEventFired", timeout=90)
        yield Viewer(browser, rep, downloads)
    finally:
        browser.close()


def test_the_page_loads_2000_runs_quickly_and_runs_only_its_own_script(viewer: Viewer) -> None:
    ready = viewer.js("Number(document.documentElement.dataset.ready)")
    assert 0 < ready < 15_000, ready  # measured about 0.6 s on one core of a laptop
    assert viewer.js("document.getElementById('f-count').textContent") == "2000 of 2000 runs"
    assert len(viewer.rows()) == 2000
    assert viewer.js("document.scripts.length") == 2
    exceptions = [e for e in viewer.b.events if e.get("method") == "Runtime.exceptionThrown"]
    assert not exceptions


def test_hostile_text_is_shown_as_text_and_never_runs(viewer: Viewer) -> None:
    viewer.reset()
    viewer.search("onerror")
    rows = viewer.rows()
    assert len(rows) == 40 and all(r[2].startswith("evil</script>") for r in rows)
    # Open the run with the 3 MB message, its patch and transcript included.
    viewer.js(
        "document.querySelector('#runs-table tbody tr').click();"
        "document.querySelectorAll('#detail details').forEach(d => d.open = true)"
    )
    detail = viewer.js("document.getElementById('detail').textContent")
    assert HOSTILE in detail and f"+{HOSTILE}" in detail
    viewer.select("s-task", str(EVIL_TASK))
    assert HOSTILE in viewer.js("document.getElementById('side-grid').textContent")
    # Nothing of it became an element, a link or a script.
    assert viewer.js(f"typeof {CANARY}") == "undefined"
    assert (
        viewer.js("document.querySelectorAll('img, iframe, object, embed, [onerror]').length") == 0
    )
    assert viewer.js("document.querySelectorAll('svg [onload], a[href^=javascript]').length") == 0
    hrefs = viewer.js(
        "Array.from(document.querySelectorAll('[href]'), a => a.getAttribute('href'))"
    )
    assert hrefs and all(h.startswith("#cell=") for h in hrefs)
    assert viewer.js("window.__csp") == []
    # The policy is in force: a script the page did not ship is refused.
    viewer.js(
        "const s = document.createElement('script'); s.textContent = 'window.__probe = 1';"
        "document.body.appendChild(s)"
    )
    viewer.js("new Promise(r => setTimeout(r, 100))")
    assert viewer.js("typeof window.__probe") == "undefined"
    assert viewer.js("window.__csp") == ["script-src-elem"]


def test_filters_by_status_model_variant_and_task(viewer: Viewer) -> None:
    viewer.reset()
    runs = viewer.report.runs
    viewer.select("f-status", "v:failed")
    failed = [r for r in runs if r.status.verdict == "failed"]
    rows = viewer.rows()
    assert len(rows) == len(failed) and {r[5] for r in rows} == {"check_failed", "max_requests"}
    viewer.select("f-status", "!passed")
    assert len(viewer.rows()) == sum(r.status != "completed" for r in runs)
    viewer.select("f-model", "p/beta")
    viewer.select("f-variant", "chatty")
    viewer.select("f-task", "3")
    rows = viewer.rows()
    want = [
        r.run
        for r in runs
        if r.status != "completed" and r.model == "p/beta" and r.variant == "chatty"
        if r.id == "task-03"
    ]
    assert [r[1] for r in rows] == want and len(want) == 6
    viewer.select("f-status", "s:skipped")
    assert {r[5] for r in viewer.rows()} == {"skipped (budget)"}


def test_a_matrix_cell_lists_its_runs(viewer: Viewer) -> None:
    viewer.reset()
    cell = viewer.js("document.querySelector('a[href=\"#cell=12.3\"]').textContent")
    viewer.js("document.querySelector('a[href=\"#cell=12.3\"]').click()")
    viewer.js("new Promise(r => setTimeout(r, 100))")
    rows = viewer.rows()
    assert len(rows) == REPEATS
    assert {(r[2], r[3], r[4]) for r in rows} == {("task-12", "p/beta", "chatty")}
    passed = sum(r[5] == "completed" for r in rows)
    assert cell.startswith(f"{passed}/")


def test_sort_by_a_column_both_ways(viewer: Viewer) -> None:
    viewer.reset()
    viewer.js("document.querySelectorAll('#runs-table th')[10].click()")  # Cost
    costs = [float(r[10].lstrip("$")) for r in viewer.rows()]
    assert costs == sorted(costs) and costs[0] < costs[-1]
    viewer.js("document.querySelectorAll('#runs-table th')[10].click()")
    costs = [float(r[10].lstrip("$")) for r in viewer.rows()]
    assert costs == sorted(costs, reverse=True)
    viewer.js("document.querySelectorAll('#runs-table th')[0].click()")


def test_search_covers_the_transcripts(viewer: Viewer) -> None:
    viewer.reset()
    viewer.search(NEEDLE.upper())
    rows = viewer.rows()
    assert [r[1] for r in rows] == [viewer.report.runs[1234].run]
    viewer.search("no such text anywhere")
    assert viewer.rows() == []
    assert viewer.js("document.getElementById('f-count').textContent").startswith("0 of 2000")


def test_the_same_task_side_by_side_across_models_and_variants(viewer: Viewer) -> None:
    viewer.select("s-task", "20")
    viewer.select("s-by", "col")
    heads = viewer.js("Array.from(document.querySelectorAll('#side-grid h3'), h => h.textContent)")
    assert [h.split(" - ")[0] for h in heads] == [f"{m} / {v}" for m in MODELS for v in VARIANTS]
    cards = viewer.js(
        "Array.from(document.querySelectorAll('#side-grid .col'), "
        "c => c.querySelectorAll('.card').length)"
    )
    assert cards == [REPEATS] * 4
    viewer.select("s-by", "variant")
    heads = viewer.js("Array.from(document.querySelectorAll('#side-grid h3'), h => h.textContent)")
    assert [h.split(" - ")[0] for h in heads] == VARIANTS
    grid = viewer.js("document.getElementById('side-grid').textContent")
    runs = [r for r in viewer.report.runs if r.id == "task-20"]
    assert all(r.run in grid for r in runs)


def test_csv_export_holds_the_filtered_rows(viewer: Viewer) -> None:
    viewer.reset()
    viewer.select("f-task", str(EVIL_TASK))
    viewer.select("f-model", "p/alpha")
    viewer.js("document.getElementById('f-csv').click()")
    for _ in range(50):
        progress = viewer.b.wait_event("Browser.downloadProgress")
        if progress["params"]["state"] == "completed":
            break
    assert progress["params"]["state"] == "completed"
    text = (viewer.downloads / "runs.csv").read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    want = [r for r in viewer.report.runs if r.id.startswith("evil") and r.model == "p/alpha"]
    assert [r["run"] for r in rows] == [r.run for r in want] and len(rows) == 20
    assert {r["task"] for r in rows} == {f"evil{HOSTILE}"}
    errors = [r["error"] for r in rows if r["error"]]
    # A cell a spreadsheet would take for a formula is quoted as text.
    assert errors and all(e.startswith("'=HYPERLINK(") for e in errors)
    assert [float(r["cost_usd"]) for r in rows] == [r.cost_usd for r in want]
