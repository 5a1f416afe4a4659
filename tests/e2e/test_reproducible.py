"""Same inputs, same prompt, any day: the date and zone in `<environment_context>` can be
pinned, reports record what was used, and built-in providers are overridden field by field.

The workspace path is part of the prompt too; its slot (`$TMPDIR/runner-work/N`) is the
lowest one no other batch holds, so these runs use a TMPDIR of their own.

"Another day" is simulated without touching the clock: `TZ=Pacific/Kiritimati` (UTC+14)
and `TZ=Etc/GMT+12` (UTC-12) are 26 hours apart, so at any moment the machine's "today"
differs between the two runs.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.loopback import reply_message

FAR_EAST, FAR_WEST = "Pacific/Kiritimati", "Etc/GMT+12"


def tasks_file(path: Path, base_url: str, repo: Path, extra: str = "") -> Path:
    path.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}}}\n"
        f"defaults: {{model: fake/m{extra}}}\n"
        f"tasks:\n  - {{id: a, repo: '{repo}', prompt: say ok}}\n"
    )
    return path


def prompt_of(body: dict[str, Any]) -> str:
    """What the model reads: everything but the per-thread cache key."""
    return json.dumps({k: v for k, v in body.items() if k != "prompt_cache_key"})


def env_context(body: dict[str, Any]) -> str:
    text = json.dumps(body["input"])
    m = re.search(r"<environment_context>.*?</environment_context>", text)
    assert m, text
    return m.group(0)


def run_on(
    loopback_thread: Any,
    tmp_path: Path,
    git_repo: Path,
    name: str,
    tz: str,
    *flags: str,
    extra: str = "",
) -> tuple[dict[str, Any], dict[str, Any]]:
    srv = loopback_thread([reply_message("ok")])
    tasks = tasks_file(tmp_path / f"{name}.yaml", srv.base_url, git_repo, extra)
    # The workspace path is in the prompt: a private TMPDIR keeps batches of other tests
    # (which take the shared slots) from changing it. A real process, since `tempfile`
    # keeps the temp dir it found first and `time` the TZ it started with.
    private = tmp_path / "tmp"
    private.mkdir(exist_ok=True)
    res = run_cli(
        "run", tasks, "--out", tmp_path / name, *flags, env={"TZ": tz, "TMPDIR": str(private)}
    )
    assert res.returncode == 0, res.stderr
    (req,) = srv.requests
    report = json.loads((tmp_path / name / "report.json").read_text())
    return req.json, report["runs"][0]


def test_unpinned_prompts_follow_the_machines_day(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    east, east_run = run_on(loopback_thread, tmp_path, git_repo, "e", FAR_EAST)
    west, west_run = run_on(loopback_thread, tmp_path, git_repo, "w", FAR_WEST)
    assert east_run["current_date"] != west_run["current_date"]
    assert (east_run["timezone"], west_run["timezone"]) == (FAR_EAST, FAR_WEST)
    assert env_context(east) != env_context(west)


@pytest.mark.parametrize("how", ["flags", "task file"])
def test_pinned_prompts_are_byte_identical_on_any_day(
    loopback_thread: Any, git_repo: Path, tmp_path: Path, how: str
) -> None:
    flags = ("--date", "2026-02-28", "--timezone", "America/Sao_Paulo") if how == "flags" else ()
    extra = ", current_date: 2026-02-28, timezone: America/Sao_Paulo" if how != "flags" else ""
    east, east_run = run_on(loopback_thread, tmp_path, git_repo, "e", FAR_EAST, *flags, extra=extra)
    west, west_run = run_on(loopback_thread, tmp_path, git_repo, "w", FAR_WEST, *flags, extra=extra)
    assert prompt_of(east) == prompt_of(west)
    assert "<current_date>2026-02-28</current_date>" in env_context(east)
    assert "<timezone>America/Sao_Paulo</timezone>" in env_context(east)
    for run in (east_run, west_run):
        assert (run["current_date"], run["timezone"]) == ("2026-02-28", "America/Sao_Paulo")


def test_the_flag_wins_over_the_task_file(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    body, run = run_on(
        loopback_thread,
        tmp_path,
        git_repo,
        "f",
        FAR_EAST,
        "--date",
        "2030-01-01",
        extra=", current_date: 2026-02-28",
    )
    assert run["current_date"] == "2030-01-01"
    assert "<current_date>2030-01-01</current_date>" in env_context(body)


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--date", "2026-02-30", "not a day of the calendar"),
        ("--date", "tomorrow", "YYYY-MM-DD"),
        ("--timezone", "Europe/Paris; rm -rf /", "IANA zone name"),
    ],
)
def test_bad_pins_on_the_command_line(tmp_path: Path, flag: str, value: str, says: str) -> None:
    tasks = tmp_path / "t.yaml"
    tasks.write_text("version: 1\ntasks: [{id: a, prompt: p}]\n")
    for command in ("run", "validate"):
        res = run_cli(command, tasks, flag, value)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert res.stderr.startswith(f"error: (command line): {flag}: ") and says in res.stderr


def test_version() -> None:
    from runner import __version__

    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith(f"runner {__version__} ")


def test_a_builtin_provider_is_overridden_field_by_field(
    loopback_thread: Any, git_repo: Path, tmp_path: Path
) -> None:
    """`providers: {openai: {base_url: ...}}` moves OpenAI to a proxy and keeps its key
    variable, its Authorization header and its price (it used to drop all three)."""
    srv = loopback_thread([reply_message("ok")])
    tasks = tmp_path / "t.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{openai: {{base_url: '{srv.base_url}'}}}}\n"
        "defaults: {model: openai/gpt-5.5, limits: {max_cost_usd: 1.0}}\n"
        f"tasks:\n  - {{id: a, repo: '{git_repo}', prompt: say ok}}\n"
    )
    missing = run_cli("run", tasks, "--out", tmp_path / "none", env={"OPENAI_API_KEY": ""})
    assert missing.returncode == 2 and "OPENAI_API_KEY" in missing.stderr
    res = run_cli(
        "run", tasks, "--out", tmp_path / "o", env={"OPENAI_API_KEY": "sk-proxy-0123456789abcdef"}
    )
    assert res.returncode == 0, res.stderr
    (req,) = srv.requests
    assert req.headers["authorization"] == "Bearer sk-proxy-0123456789abcdef"
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert report["runs"][0]["cost_usd"] is not None
    assert "sk-proxy" not in (tmp_path / "o" / "report.json").read_text()
