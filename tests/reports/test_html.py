"""report.html: hostile text stays text, nothing is fetched, the charts carry the numbers,
and (slow) a real headless Chromium draws them: a screenshot shows the bars."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.redact import Redactor
from runner.reports.files import write_reports
from runner.reports.html import render_html, token_chart
from runner.reports.model import Report, RequestReport
from tests.support.reports import benchmark_report, report, request, result, task, usage

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
    assert "<script" not in page.lower() and "<img" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("&lt;/pre&gt;") >= 5  # message, error, transcript, command, patch
    assert "\x1b" not in page and "\\x1b" in page
    assert "\u202e" not in page and "\\u202egpj.exe" in page  # no right-to-left override
    assert "script-src 'none'" in page and "default-src 'none'" in page
    # No attribute that could load anything; the one URL is the SVG namespace name.
    tags = re.findall(r"<[^>]*>", page)
    assert not [tag for tag in tags if re.search(r"\s(src|href|action|srcset|on\w+)=", tag)]
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}
    # A 4 MB command output is cut, with a note.
    assert len(page) < 100_000 and "characters cut" in page
    page.encode("utf-8")  # no lone surrogate left


def test_token_chart_marks_compactions_and_stacks_cached_under_uncached() -> None:
    reqs = [
        request(1, usage(1000, 0, 100)),
        request(2, usage(2000, 1500, 100)),
        RequestReport(**{**request(3, usage(2200, 2000, 50)).model_dump(), "kind": "compaction"}),
    ]
    t = task("a", "p/m", "completed").model_copy(update={"requests": reqs})
    svg = token_chart(t)
    assert svg.count('class="compaction"') == 1
    heights = [
        float(h)
        for h in re.findall(
            r'class="cached" x="[\d.]+" y="[\d.]+" '
            r'width="\d+" height="([\d.]+)"',
            svg,
        )
    ]
    # Cached input per request 0, 1500, 2000, on one scale (the tallest request is 2250).
    assert heights[0] == 0.0 and heights[2] / heights[1] == pytest.approx(2000 / 1500, 0.01)


def test_every_report_directory_gets_a_page(tmp_path: Path) -> None:
    r = benchmark_report()
    write_reports(r, tmp_path, redact=Redactor(["sk-secret-value-123"]))
    page = (tmp_path / "report.html").read_text()
    assert "12 of 24 finished runs passed (50.0%) - 24 runs: 24 finished, 0 skipped" in page
    assert page.count('class="run"') == 24
    assert page.count('class="bar"') == 3  # smollm2/terse passed nothing: no bar


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium: `make chromium` installs Debian's package")


@pytest.mark.slow
def test_charts_render_in_headless_chromium(tmp_path: Path) -> None:
    from PIL import Image

    browser = _chromium()
    r = benchmark_report()
    first = r.runs[0].model_copy(
        update={"requests": [request(i, usage(1000 * i, 800 * i, 50)) for i in range(1, 6)]}
    )
    r = r.model_copy(update={"runs": [first, *r.runs[1:]]})
    page = render_html(r, tmp_path)
    # Open the first run's drill-down so its token chart is on the screenshot.
    page = page.replace('<details class="run">', '<details class="run" open>', 1)
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
            "--window-size=1200,2400",
            f"--screenshot={shot}",
            (tmp_path / "report.html").as_uri(),
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
    page = render_html(report([t]), tmp_path)
    shown = [int(n) for n in re.findall(r"message (\d{4})", page)]
    assert shown[0] == 0 and shown[-1] == 499 and shown == sorted(shown)
    assert len(shown) < 60 and f"[{500 - len(shown)} entries cut;" in page
