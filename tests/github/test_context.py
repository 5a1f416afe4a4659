"""Where the Action runs and what it was given: the event, the inputs it parses (models,
sandbox, tags, logins, extra args, an inline prompt), the runner's command line, and the
trust check of a pull request's base-branch runner config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runner.errors import RunnerError
from runner.github import MARKER, Context, main, parse_models, sandbox_for, trust_problems
from runner.github.context import (
    DEFAULT_MODEL,
    bot_allowed,
    is_bot,
    missing_keys,
    parse_extra_args,
    parse_names,
    prompt_task,
    runner_argv,
    summary_marker,
    unsandboxed_runs,
)
from tests.support.gha import parse_output_file


def test_models_and_sandbox_inputs() -> None:
    assert parse_models("openai/gpt-5.5\n ollama/gpt-oss:20b, local/smollm2 ") == [
        "openai/gpt-5.5",
        "ollama/gpt-oss:20b",
        "local/smollm2",
    ]
    assert sandbox_for("auto", True) == "read-only"
    assert sandbox_for("auto", False) is None
    assert sandbox_for("task-file", True) is None
    assert sandbox_for("workspace-write", True) == "workspace-write"
    with pytest.raises(Exception, match="sandbox must be"):
        sandbox_for("yolo", False)


def test_trusted_config_refuses_what_the_pr_could_control(tmp_path: Path) -> None:
    trusted = tmp_path / "repo/.github/runner"
    (trusted / "skills/lint").mkdir(parents=True)
    (trusted / "skills/lint/SKILL.md").write_text(
        "---\nname: lint\ndescription: run the linter\n---\nRun make lint.\n"
    )
    (trusted / "instr.md").write_text("be careful\n")
    (trusted / "schema.json").write_text('{"type": "object"}\n')
    (trusted / "mcp").mkdir()
    (tmp_path / "repo/docs").mkdir()
    (tmp_path / "repo/docs/instr.md").write_text("PR text\n")
    (trusted / "linked.md").symlink_to(tmp_path / "repo/docs/instr.md")

    def problems(settings: str, tasks: str = "") -> list[str]:
        path = trusted / "t.yaml"
        path.write_text(
            f"version: 1\ndefaults:\n{settings}\n"
            f"tasks:\n  - {{id: a, prompt: p, repo: ../..{tasks}}}\n"
        )
        return trust_problems(path, trusted)

    assert (
        problems(
            "  instructions_file: instr.md\n  skills: [skills]\n"
            "  output_schema: schema.json\n"
            "  mcp_servers:\n    m: {command: [python3, server.py], cwd: mcp}\n"
            "    web: {url: 'https://mcp.example/x'}"
        )
        == []
    )
    assert problems("  instructions_file: ../../docs/instr.md") == [
        f"defaults.instructions_file: ../../docs/instr.md is outside {trusted}"
    ]
    assert problems("  instructions_file: linked.md") == [
        f"defaults.instructions_file: linked.md is outside {trusted}"
    ]
    assert problems("  output_schema: ../../docs/instr.md")[0].startswith("defaults.output_schema:")
    (trusted / "skills/lint/ref.md").symlink_to(tmp_path / "repo/docs/instr.md")
    assert problems("  skills: [skills]") == [
        f"defaults.skills: lint/ref.md in skills leads outside {trusted}"
    ]
    (trusted / "skills/lint/ref.md").unlink()
    found = problems("  model: local/smollm2", ", mcp_servers: {m: {command: [npx, srv]}}")
    assert len(found) == 1 and found[0].startswith("tasks.a.mcp_servers.m: a stdio MCP")
    assert problems("  mcp_servers:\n    m: {command: [python3, x.py], cwd: ../../docs}") == [
        f"defaults.mcp_servers.m.cwd: ../../docs is outside {trusted}"
    ]
    assert problems("  mcp_servers:\n    m: {command: [../../docs/x], cwd: mcp}") == [
        f"defaults.mcp_servers.m.command: ../../docs/x is outside {trusted}"
    ]
    assert problems("  git: {push: {remote: origin}}") == [
        "defaults.git.push: pull-request runs do not push"
    ]
    outside = tmp_path / "repo/t.yaml"
    outside.write_text("version: 1\ntasks: [{id: a, prompt: p}]\n")
    assert trust_problems(outside, trusted) == [f"the task file {outside} is not inside {trusted}"]

    # Through the Action's run command: exit code 2 as an output, nothing started.
    out = tmp_path / "output"
    summary = tmp_path / "summary.md"
    env = {
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_EVENT_NAME": "pull_request",
        "PATH": "/usr/bin:/bin",
    }
    problems("  instructions_file: ../../docs/instr.md")
    assert (
        main(
            [
                "run",
                "--task-file",
                str(trusted / "t.yaml"),
                "--out",
                str(tmp_path / "out"),
                "--trusted-config",
                str(trusted),
            ],
            env=env,
        )
        == 0
    )
    assert parse_output_file(out.read_text()) == {"exit-code": "2"}
    assert "did not run" in summary.read_text() and not (tmp_path / "out").exists()


def test_the_sticky_comment_marker_of_a_tag() -> None:
    assert summary_marker("  ") == MARKER
    assert summary_marker(" nightly.v2 ") == "<!-- runner:summary:nightly.v2 -->"
    for bad in ("x-->", "-x", "a b", "a" * 65, "é"):
        with pytest.raises(RunnerError, match=r"^comment-tag must be 1-64 letters"):
            summary_marker(bad)


def test_logins_and_bots() -> None:
    assert parse_names("Alice, bob\n\tCAROL ") == {"alice", "bob", "carol"}
    assert is_bot({"login": "x", "type": "Bot"}) and is_bot({"login": "renovate[bot]"})
    assert not is_bot({"login": "bot", "type": "User"}) and not is_bot({})
    assert bot_allowed("Dependabot[bot]", {"dependabot"})
    assert bot_allowed("dependabot[bot]", {"dependabot[bot]"})
    assert not bot_allowed("evil-dependabot[bot]", {"dependabot"})


def test_an_inline_prompt_becomes_one_task() -> None:
    data = prompt_task(" fix it ", repo=".", model="", base_url="", key_env="K", task_id="pr-7")
    assert data == {
        "version": 1,
        "defaults": {"model": DEFAULT_MODEL},
        "tasks": [{"id": "pr-7", "prompt": " fix it ", "repo": "."}],
    }
    local = prompt_task("p", repo=".", model="ollama/m", base_url="http://h:1/v1", key_env="K")
    assert local["providers"] == {"ollama": {"base_url": "http://h:1/v1", "env_key": "K"}}
    with pytest.raises(RunnerError, match=r"^prompt is empty"):
        prompt_task(" \n", repo=".", model="", base_url="", key_env="K")
    with pytest.raises(RunnerError, match=r"^base-url must be an http\(s\) URL, got 'file:///x'"):
        prompt_task("p", repo=".", model="", base_url="file:///x", key_env="K")


def test_extra_args_are_split_and_the_actions_own_flags_refused() -> None:
    assert parse_extra_args("--concurrency 2 --label 'a b' -s x") == [
        "--concurrency", "2", "--label", "a b", "-s", "x",
    ]  # fmt: skip
    for flag in ("--sandbox=danger-full-access", "--sand x", "--ou=/tmp", "--secret-fd 3"):
        with pytest.raises(RunnerError, match=r"^extra-args: --\w+[-\w]* is not taken there"):
            parse_extra_args(flag)
    with pytest.raises(RunnerError, match=r"^extra-args: No closing quotation in"):
        parse_extra_args("--label 'open")


def test_the_runner_command_line() -> None:
    argv = runner_argv(
        "t.yaml", out="o", models=["a/b", "c/d"], shard="1/2", sandbox="read-only",
        concurrency="3", effort="high", extra=["--label", "x"],
    )  # fmt: skip
    assert argv[argv.index("-m") + 1 :] == [
        "runner", "run", "t.yaml", "--out", "o", "--force", "--model", "a/b", "--model", "c/d",
        "--shard", "1/2", "--sandbox", "read-only", "--concurrency", "3",
        "--reasoning-effort", "high", "--label", "x",
    ]  # fmt: skip
    assert argv[1] == "-I"  # never imports a runner/ package from the checkout
    with pytest.raises(RunnerError, match=r"^reasoning-effort must be one of .*; got 'max'"):
        runner_argv("t", out="o", models=[], shard="", sandbox=None, concurrency="", effort="max")


def test_the_event_file_is_read_and_a_broken_one_named(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text('{"issue": {"number": 3}}')
    env = {"GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "a/b", "GITHUB_RUN_ID": "9"}
    ctx = Context.from_env(env)
    assert ctx.prompt_id == "issue-3" and ctx.run_url == "https://github.com/a/b/actions/runs/9"
    event.write_text("[1]")
    assert Context.from_env(env).event is None
    event.write_text("{not json")
    with pytest.raises(RunnerError, match=rf"^GITHUB_EVENT_PATH {event} is not JSON: "):
        Context.from_env(env)


def test_what_an_event_says_about_its_pull_request() -> None:
    def ctx(event: dict[str, Any], name: str = "pull_request") -> Context:
        return Context(repository="a/b", event_name=name, event=event)

    def pr(repo: object) -> dict[str, Any]:
        return {"pull_request": {"number": 7, "head": {"repo": repo}}}

    assert ctx(pr({"full_name": "a/b"})).prompt_id == "pr-7"
    assert not ctx(pr({"full_name": "a/b"})).from_fork
    assert ctx(pr(None)).from_fork  # a deleted fork is still not this repository
    assert ctx(pr({"full_name": "x/b"})).from_fork
    assert not ctx({"pull_request": {"number": 7, "head": {}}}).from_fork
    comment = ctx({"issue": {"number": 5, "pull_request": {}}}, "issue_comment")
    assert comment.pr_number == 5 and comment.on_pr and comment.foreign_code
    queued = {"merge_group": {"head_ref": "refs/heads/gh-readonly-queue/main/pr-12-0af3"}}
    assert ctx(queued, "merge_group").linked_prs == [12]
    assert ctx({}, "schedule").prompt_id == "prompt" and not ctx({}, "schedule").foreign_code


def test_keys_and_unsandboxed_runs_of_a_task_file(tmp_path: Path) -> None:
    tasks = tmp_path / "t.yaml"
    tasks.write_text(
        "version: 1\n"
        "providers:\n  p: {base_url: 'http://127.0.0.1:9/v1', env_key: P_KEY}\n"
        "defaults: {model: p/m}\n"
        "tasks:\n  - {id: a, prompt: x}\n  - {id: b, prompt: y, sandbox: danger-full-access}\n"
    )
    assert (
        missing_keys(tasks, [], {}) == ["P_KEY"] and missing_keys(tasks, [], {"P_KEY": "k"}) == []
    )
    assert [n.split(".")[0] for n in unsandboxed_runs(tasks, None, [])] == ["b"]
    assert len(unsandboxed_runs(tasks, "danger-full-access", [])) == 2
    assert unsandboxed_runs(tasks, "read-only", []) == []
    tasks.write_text("version: 1\ntasks: [oops")  # the runner names the problem itself
    assert unsandboxed_runs(tasks, None, []) == [] and missing_keys(tasks, [], {}) == []
