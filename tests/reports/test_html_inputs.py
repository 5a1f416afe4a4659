"""report.html shows a run's exact input (prompt, instructions, tool schemas) from the
files its report names under `inputs/`, as text: a hostile prompt never runs. Driven in
a real headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.redact import Redactor
from runner.reports.html import render_html
from runner.reports.inputs import record_inputs
from runner.reports.model import RunInputs
from tests.support.chromium import Browser
from tests.support.reports import report, task

pytestmark = pytest.mark.slow

CANARY = "window.__pwned"
HOSTILE = f'</script><script>{CANARY}=1</script><img src=x onerror="{CANARY}=2">'


def test_a_run_shows_its_prompt_instructions_and_tools(tmp_path: Path) -> None:
    out = tmp_path / "out"
    names = record_inputs(
        out,
        Redactor(["sk-canary-0123456789abcdef"]),
        prompts=[f"Be brief. fix it {HOSTILE}", "and again sk-canary-0123456789abcdef"],
        instructions="You are a coding agent.",
        developer_instructions="Prefer small diffs.",
        tools=[{"type": "function", "name": "shell", "description": "Runs a command"}],
        agents_md=f"Run the tests first. {HOSTILE}",
    )
    assert "sk-canary" not in "".join((out / n).read_text() for n in names.values())
    run = task("a", "p/m", "completed", run="a.r1").model_copy(
        update={"inputs": RunInputs(**names)}
    )
    gone = task("b", "p/m", "completed", run="b.r1").model_copy(
        update={
            "inputs": RunInputs(
                prompt="inputs/" + "0" * 64 + ".json",
                **{k: names[k] for k in ("instructions", "tools")},
            )
        }
    )
    page = out / "report.html"
    page.write_text(render_html(report([run, gone]), out))
    browser = Browser(tmp_path / "profile")
    try:
        browser.call("Page.navigate", {"url": page.as_uri()}, session=True)
        browser.wait_event("Page.loadEventFired", timeout=90)
        texts = []
        for row in range(2):
            browser.js(
                f"document.querySelectorAll('#runs-table tbody tr')[{row}].click();"
                "document.querySelectorAll('#detail details').forEach(d => d.open = true)"
            )
            texts.append(browser.js("document.getElementById('detail').textContent"))
        shown, missing = texts
        assert json.dumps(f"Be brief. fix it {HOSTILE}", ensure_ascii=False) in shown
        assert "[REDACTED]" in shown
        assert "You are a coding agent." in shown and "Prefer small diffs." in shown
        assert "AGENTS.md (inputs/" in shown and "Run the tests first." in shown
        assert '"name": "shell"' in shown and names["tools"] in shown
        assert "not shown: missing, or not a plain file under inputs/" in missing
        assert browser.js(f"typeof {CANARY}") == "undefined"
        assert browser.js("document.querySelectorAll('img, [onerror]').length") == 0
    finally:
        browser.close()
