"""report.html: hostile text stays text, nothing is fetched, the charts carry the numbers,
and (slow) a real headless Chromium draws them: a screenshot shows the bars.

The viewer's behaviour in a browser (filters, search, side by side, CSV) is tested in
test_html_viewer.py."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.redact import Redactor
from runner.reports.files import write_reports
from runner.reports.html import asset, cost_chart, render_html
from runner.reports.model import Report
from tests.support.chromium import chromium
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import per_conversation, reply_custom_tool_call, reply_message
from tests.support.reports import benchmark_report, report, request, result, task, usage

DATA = re.compile(r'<script type="application/json" id="runner-data">(.*?)</script>', re.S)


def split_page(page: str) -> tuple[str, dict[str, Any]]:
    """The page's markup without its two script elements, and the viewer's data."""
    found = DATA.search(page)
    assert found is not None, "no data block"
    own = f"<script>{asset('viewer.js')}</script>"
    assert page.count(own) == 1
    markup = page.replace(found.group(0), "").replace(own, "")
    data: dict[str, Any] = json.loads(found.group(1))
    return markup, data


EVIL = '<script>alert(1)</script><img src=x onerror="alert(2)"></pre>\ud800\x1b[31m\u202egpj.exe'


def hostile_dir(tmp_path: Path) -> tuple[Report, Path]:
    out = tmp_path / "out"
    t = task(
        f"evil{EVIL}",
        "p/m",
        "check_failed",
        run="evil.r1",
        error=EVIL,
        final_message=EVIL,
        res=result("runner/evil"),
        requests=3,
    )
    t = t.model_copy(
        update={
            "result": t.result.model_copy(  # type: ignore[union-attr]
                update={"patch": "patches/evil.r1.patch"}
            )
        }
    )
    (out / "threads").mkdir(parents=True)
    (out / "patches").mkdir()
    events = [
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "i0", "type": "agent_message", "text": EVIL}},
        {
            "type": "item.completed",
            "item": {
                "id": "i1",
                "type": "command_execution",
                "command": EVIL,
                "exit_code": 0,
                "aggregated_output": EVIL * 1000,
            },
        },
        {
            "type": "item.completed",
            "item": {"id": "i2", "type": "file_change", "changes": [{"path": EVIL}]},
        },
    ]
    (out / t.events_file).write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")
    (out / "patches" / "evil.r1.patch").write_text(f"+{EVIL}\n", errors="surrogatepass")
    return report([t], batch_id=f"run{EVIL}"), out


def test_hostile_text_is_escaped_and_nothing_is_fetched(tmp_path: Path) -> None:
    r, out = hostile_dir(tmp_path)
    page = render_html(r, out)
    markup, data = split_page(page)
    # Outside the page's two script elements: no markup from a run.
    assert "<script" not in markup.lower() and "<img" not in markup.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    # Inside the data: the text itself, which cannot end the element or open a comment.
    block = DATA.search(page).group(1)  # type: ignore[union-attr]
    assert "<" not in block and ">" not in block and "&" not in block
    run = data["runs"][0]
    shown = [run["error"], run["final"], run["patch"], *(e[2] for e in run["transcript"])]
    assert sum("</pre>" in text for text in shown) >= 5  # error, final, message, output, patch
    assert "<script>alert(1)</script>" in run["final"]
    assert "\x1b" not in page and "\\x1b" in page  # printable: ESC as visible text
    assert "\u202e" not in page and "\\u202egpj.exe" in run["final"]
    assert "\ud800" not in page
    csp = re.search(r'Content-Security-Policy" content="([^"]*)"', page).group(1)  # type: ignore[union-attr]
    assert "default-src 'none'" in csp and "unsafe" not in csp
    assert re.search(r"script-src 'sha256-[A-Za-z0-9+/=]{44}';", csp)
    # No attribute that could load anything; the only links are the matrix's to the list.
    tags = re.findall(r"<[^>]*>", markup)
    loads = [tag for tag in tags if re.search(r"\s(src|href|action|srcset|on\w+)=", tag)]
    assert loads and all(re.fullmatch(r'<a href="#cell=\d+\.\d+">', tag) for tag in loads)
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}
    # A 4 MB command output is cut, with a note.
    assert len(page) < 100_000 and "characters cut" in page
    page.encode("utf-8")  # no lone surrogate left


def test_every_report_directory_gets_a_page(tmp_path: Path) -> None:
    r = benchmark_report()
    write_reports(r, tmp_path, redact=Redactor(["sk-secret-value-123"]))
    page = (tmp_path / "report.html").read_text()
    assert "12 of 24 finished runs passed (50.0%) - 24 runs: 24 finished, 0 skipped" in page
    assert len(split_page(page)[1]["runs"]) == 24
    assert page.count('class="bar"') == 3  # smollm2/terse passed nothing: no bar


@pytest.mark.slow
def test_charts_render_in_headless_chromium(tmp_path: Path) -> None:
    from PIL import Image

    browser = chromium()
    r = benchmark_report()
    first = r.runs[0].model_copy(
        update={"requests": [request(i, usage(1000 * i, 800 * i, 50)) for i in range(1, 6)]}
    )
    r = r.model_copy(update={"runs": [first, *r.runs[1:]]})
    page = render_html(r, tmp_path)
    (tmp_path / "report.html").write_text(page)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--hide-scrollbars",
            "--window-size=1200,6000",
            f"--screenshot={shot}",
            # The viewer opens the first run (with its token chart) from the address.
            (tmp_path / "report.html").as_uri() + "#run=0",
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.exists(), "Chromium wrote no screenshot"
    img = Image.open(shot).convert("RGB")
    colours: dict[tuple[int, int, int], int] = {}
    for count, colour in img.getcolors(maxcolors=1 << 20) or []:
        colours[colour] = count
    # Pass-rate bars (#4c8bf5): 3 bars of 5/6, 1/6 and 6/6 of 420 px, 18 px high.
    assert colours.get((0x4C, 0x8B, 0xF5), 0) > (420 * (5 + 1 + 6) / 6) * 18 * 0.8
    # Token chart: cached (#1565c0) and uncached (#90caf9) input, and the thin output
    # (#ffb74d, 50 tokens a request) drawn.
    for rgb, least in (
        ((0x15, 0x65, 0xC0), 1000),
        ((0x90, 0xCA, 0xF9), 200),
        ((0xFF, 0xB7, 0x4D), 10),
    ):
        assert colours.get(rgb, 0) > least, rgb
    # Matrix cells coloured pass / fail / mixed.
    for rgb in ((0xC8, 0xE6, 0xC9), (0xFF, 0xCD, 0xD2), (0xFF, 0xF3, 0xC4)):
        assert colours.get(rgb, 0) > 1000, rgb


def test_long_transcript_keeps_its_start_and_end(tmp_path: Path) -> None:
    t = task("long", "p/m", "completed", run="long.r1")
    (tmp_path / "threads").mkdir()
    (tmp_path / t.events_file).write_text(
        "".join(
            json.dumps(
                {
                    "type": "item.completed",
                    "item": {"type": "agent_message", "text": f"message {i:04d} " + "x" * 900},
                }
            )
            + "\n"
            for i in range(500)
        )
    )
    run = split_page(render_html(report([t]), tmp_path))[1]["runs"][0]
    shown = [int(e[2][8:12]) for e in run["transcript"]]
    assert shown[0] == 0 and shown[-1] == 499 and shown == sorted(shown)
    assert len(shown) < 60 and run["cut"] == 500 - len(shown)


def test_scatter_labels_of_close_configurations_do_not_overlap_and_x_has_ticks() -> None:
    runs = [
        task("a", model, "completed", run=f"a.{model}", cost_usd=0.01)
        for model in ("p/one", "p/two", "p/three")
    ]
    svg = cost_chart(report(runs))
    labels = re.findall(r'<text x="[\d.]+" y="([\d.]+)" font-size="11">p/', svg)
    ys = sorted(float(y) for y in labels)
    assert len(ys) == 3 and all(b - a >= 12 for a, b in itertools.pairwise(ys))
    ticks = re.findall(r'class="xtick"[^>]*>([^<]*)<', svg)
    assert ticks == ["$0.0000", "$0.0028", "$0.0055", "$0.0083", "$0.0110"]  # span 1.1 x max


def test_a_file_change_shows_its_path_in_the_workspace(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The thread log keeps the absolute path (as `codex exec --json` does); the page
    shows it as the workspace names it, not the run's private folder on this machine."""
    patch = "*** Begin Patch\n*** Add File: docs/hello.txt\n+hi\n*** End Patch"
    srv = loopback_thread(
        per_conversation(
            lambda req, i: (
                reply_custom_tool_call("apply_patch", patch, call_id="p")
                if i == 0
                else reply_message("done")
            )
        )
    )
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: add a file, repo: .}\n",
        defaults="  apply_patch_tool: freeform\n",
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    (run,) = json.loads((out / "report.json").read_text())["runs"]
    log = (out / run["events_file"]).read_text()
    assert "runner-work" in log and "/docs/hello.txt" in log  # absolute in the log
    page = (out / "report.html").read_text()
    assert "add docs/hello.txt" in page
    assert "runner-work" not in page
