"""The inputs the Action parses (models, sandbox) and the trust check of a pull request's
base-branch runner config."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.github import main, parse_models, sandbox_for, trust_problems
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
