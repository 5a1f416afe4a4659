"""The README's model A/B runs as written: its three commands (two `runner run` with
different `--model` into two out dirs, then `runner report compare ... --base-model
--new-model`), against the loopback server standing in for the provider."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tests.support import paths
from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import RecordedRequest, per_conversation, reply_message

ROOT = paths.ROOT
MARK = "A model A/B in two commands and one comparison:"


def readme_commands() -> list[str]:
    """The code block right after `MARK`, comments dropped."""
    text = (ROOT / "README.md").read_text()
    assert MARK in text
    block = text.split(MARK, 1)[1].split("```", 2)[1]
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def answer(req: RecordedRequest, i: int) -> object:
    return reply_message(f"done by {req.model}")


def test_the_readme_model_ab_runs_as_written(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    commands = readme_commands()
    assert [c.split()[:2] for c in commands] == [
        ["runner", "run"],
        ["runner", "run"],
        ["runner", "report"],
    ]
    srv = loopback_thread(per_conversation(answer))  # type: ignore[arg-type]
    make_git_repo(tmp_path)
    (tmp_path / "tasks.yaml").write_text(
        "version: 1\n"
        "providers:\n"
        f"  openai: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}\n"
        "matrix: {repeat: 2}\n"
        "tasks:\n"
        "  - {id: fix, prompt: fix it, repo: ., check: 'true'}\n"
        "  - {id: doc, prompt: write docs, repo: ., check: 'true'}\n"
    )
    results = []
    for command in commands:
        done = run_cli(*shlex.split(command)[1:], cwd=tmp_path)
        assert "Traceback" not in done.stderr, done.stderr
        results.append(done)
    run_a, run_b, compare = results
    assert run_a.returncode == 0 and run_b.returncode == 0, run_a.stderr + run_b.stderr
    assert compare.returncode == 0, compare.stderr + compare.stdout
    sent = {r.model for r in srv.requests}
    assert sent == {"gpt-5", "gpt-5-mini"}
    for out, model in (("a", "openai/gpt-5"), ("b", "openai/gpt-5-mini")):
        runs = json.loads((tmp_path / out / "report.json").read_text())["runs"]
        assert {r["model"] for r in runs} == {model} and len(runs) == 4
    text = compare.stdout
    assert "openai/gpt-5" in text and "openai/gpt-5-mini" in text, text
    assert "not comparable" not in text, text
