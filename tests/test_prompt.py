"""Tests for runner.prompt: the exact bytes of the context we send.

Goldens live in tests/golden/prompt/. Regenerate them with `UPDATE_GOLDEN=1 pytest
tests/test_prompt.py` and review the diff; without it the tests only compare.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner import prompt
from runner.errors import ConfigError, SandboxError
from runner.items import Item, message
from tests.support.prompts import check_golden, git_init, write

DATE = "2026-03-14"
TZ = "Europe/Berlin"


def items_json(items: list[Item], tmp_path: Path | None = None) -> str:
    text = json.dumps([i.data for i in items], ensure_ascii=False, indent=2) + "\n"
    return text.replace(str(tmp_path), "$TMP") if tmp_path is not None else text


# --- base instructions ---------------------------------------------------------------


def test_base_instructions_bundled_and_cached() -> None:
    text = prompt.base_instructions()
    assert prompt.base_instructions() is text
    assert 3_000 <= len(text.encode()) <= 6_500
    assert text == text.strip()
    for needle in (
        "`shell`",
        '["bash", "-lc"',
        "`workdir`",
        "`apply_patch`",
        "`update_plan`",
        "*** Begin Patch",
        "*** End Patch",
        "final message",
    ):
        assert needle in text


def test_load_instructions_default_is_base() -> None:
    assert prompt.load_instructions(None) == prompt.base_instructions()


def test_load_instructions_file_replaces_base(tmp_path: Path) -> None:
    f = write(tmp_path / "instr.md", "\n  Custom instructions.\n\n")
    assert prompt.load_instructions(f) == "Custom instructions."


@pytest.mark.parametrize("content", [None, "  \n\t\n"], ids=["missing", "blank"])
def test_load_instructions_bad_file_is_config_error(tmp_path: Path, content: str | None) -> None:
    f = tmp_path / "instr.md"
    if content is not None:
        write(f, content)
    with pytest.raises(ConfigError) as e:
        prompt.load_instructions(f)
    assert e.value.problems[0].field == "instructions_file"
    assert e.value.problems[0].file == str(f)


# --- permissions ---------------------------------------------------------------------


@pytest.mark.parametrize("network", [False, True], ids=["restricted", "enabled"])
@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write", "danger-full-access"])
def test_permissions_text_golden(sandbox: prompt.SandboxMode, network: bool) -> None:
    text = prompt.permissions_text(
        sandbox=sandbox, network=network, writable_roots=[Path("/work/repo")]
    )
    check_golden(f"permissions_{sandbox}_{'enabled' if network else 'restricted'}.txt", text)


def test_permissions_structure() -> None:
    text = prompt.permissions_text(sandbox="read-only", network=False, writable_roots=[])
    assert text.startswith("<permissions instructions>\n")
    assert text.endswith("\n</permissions instructions>")
    body = text.removeprefix("<permissions instructions>").removesuffix(
        "</permissions instructions>"
    )
    sandbox_line, approval_line, end = body[1:].split("\n")
    assert "`sandbox_mode` is `read-only`" in sandbox_line
    assert sandbox_line.endswith("Network access is restricted.")
    assert approval_line.startswith("`approval_policy` is `never`")
    assert end == ""


def test_permissions_writable_roots_sentences() -> None:
    one = prompt.permissions_text(
        sandbox="workspace-write", network=False, writable_roots=[Path("/a")]
    )
    assert one.endswith("\n The writable root is `/a`.\n</permissions instructions>")
    many = prompt.permissions_text(
        sandbox="workspace-write", network=False, writable_roots=[Path("/a"), Path("/b c")]
    )
    assert many.endswith("\n The writable roots are `/a`, `/b c`.\n</permissions instructions>")
    none = prompt.permissions_text(sandbox="workspace-write", network=False, writable_roots=[])
    assert "writable root" not in none
    for mode in ("read-only", "danger-full-access"):
        other = prompt.permissions_text(sandbox=mode, network=False, writable_roots=[Path("/a")])
        assert "writable root" not in other


def test_permissions_notes() -> None:
    text = prompt.permissions_text(
        sandbox="workspace-write",
        network=True,
        writable_roots=[Path("/w")],
        notes=["No sandbox is enforced yet.", "Second note."],
    )
    check_golden("permissions_workspace-write_notes.txt", text)
    assert text.endswith(
        "`/w`.\nNo sandbox is enforced yet.\nSecond note.\n</permissions instructions>"
    )
    assert "`approval_policy` is `never`" in text


def test_permissions_rejects_unknown_values() -> None:
    with pytest.raises(SandboxError, match="unknown sandbox mode 'yolo'"):
        prompt.permissions_text(
            sandbox="yolo",
            network=False,  # type: ignore[arg-type]
            writable_roots=[],
        )


# --- environment context, user instructions, user turn --------------------------------


def test_environment_context_exact() -> None:
    text = prompt.environment_context(
        cwd=Path("/work/repo"), shell="bash", current_date=DATE, timezone=TZ
    )
    assert text == (
        "<environment_context>\n"
        "  <cwd>/work/repo</cwd>\n"
        "  <shell>bash</shell>\n"
        "  <current_date>2026-03-14</current_date>\n"
        "  <timezone>Europe/Berlin</timezone>\n"
        "</environment_context>"
    )


def test_user_instructions_text_exact() -> None:
    assert prompt.user_instructions_text(Path("/work/repo"), "Be nice.\n") == (
        "# AGENTS.md instructions for /work/repo\n\n<INSTRUCTIONS>\nBe nice.\n\n</INSTRUCTIONS>"
    )


def test_a_task_prompt_is_a_plain_user_message() -> None:
    """The loop sends each prompt as a plain user message, which compaction keeps."""
    item = message("user", "Fix the bug.")
    assert item.data == {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Fix the bug."}],
    }
    assert not prompt.is_contextual_user_message(item)


# --- AGENTS.md discovery ---------------------------------------------------------------


@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write", "danger-full-access"])
def test_initial_context_bare_golden(no_git_above: Path, sandbox: prompt.SandboxMode) -> None:
    """No developer instructions, no AGENTS.md: permissions + environment only."""
    cwd = no_git_above / "work"
    cwd.mkdir()
    items = prompt.initial_context(
        cwd=cwd,
        sandbox=sandbox,
        network=False,
        writable_roots=[],
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date=DATE,
        timezone=TZ,
    )[0]
    assert [(i.type, i.role, len(i.data["content"])) for i in items] == [
        ("message", "developer", 1),
        ("message", "user", 1),
    ]
    check_golden(f"initial_{sandbox}_bare.json", items_json(items, no_git_above))


@pytest.mark.parametrize("sandbox", ["read-only", "workspace-write", "danger-full-access"])
def test_initial_context_full_golden(tmp_path: Path, sandbox: prompt.SandboxMode) -> None:
    """Developer instructions, global and nested project AGENTS.md, extra root, a note."""
    home = tmp_path / "home"
    write(home / "AGENTS.md", "Prefer small commits.")
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "Run `make test` before finishing.\n")
    write(repo / "pkg" / "AGENTS.md", "This package targets Python 3.11.\n")
    items = prompt.initial_context(
        cwd=repo / "pkg",
        sandbox=sandbox,
        network=True,
        writable_roots=[tmp_path / "cache", repo / "pkg"],  # cwd repeated: listed once
        developer_instructions="Work only on the failing test.",
        runner_home=home,
        shell="zsh",
        current_date=DATE,
        timezone=TZ,
        permission_notes=["No sandbox is enforced yet: treat these rules as binding anyway."],
    )[0]
    assert [(i.role, len(i.data["content"])) for i in items] == [("developer", 2), ("user", 2)]
    dev, user = (i.data["content"] for i in items)
    assert dev[0]["text"].startswith("<permissions instructions>")
    assert dev[1]["text"] == "Work only on the failing test."
    assert user[0]["text"].startswith(f"# AGENTS.md instructions for {repo / 'pkg'}\n")
    assert user[1]["text"].startswith("<environment_context>")
    check_golden(f"initial_{sandbox}_full.json", items_json(items, tmp_path))


def test_initial_context_is_deterministic(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "rules")

    def build() -> list[str]:
        return [
            i.wire
            for i in prompt.initial_context(
                cwd=repo,
                sandbox="workspace-write",
                network=False,
                writable_roots=[],
                developer_instructions="",
                runner_home=None,
                shell="bash",
                current_date=DATE,
                timezone=TZ,
            )[0]
        ]

    first = build()
    assert build() == first
    assert '"role":"developer","content":[{"type":"input_text"' in first[0]
    assert len(json.loads(first[0])["content"]) == 1  # empty developer_instructions: no part


def test_is_contextual_user_message(tmp_path: Path) -> None:
    repo = git_init(tmp_path / "repo")
    write(repo / "AGENTS.md", "rules")
    dev, user = prompt.initial_context(
        cwd=repo,
        sandbox="read-only",
        network=False,
        writable_roots=[],
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date=DATE,
        timezone=TZ,
    )[0]
    assert prompt.is_contextual_user_message(user)
    assert not prompt.is_contextual_user_message(dev)
    env_only = message(
        "user", prompt.environment_context(cwd=repo, shell="bash", current_date=DATE, timezone=TZ)
    )
    assert prompt.is_contextual_user_message(env_only)
    assert prompt.is_contextual_user_message(
        Item({"type": "message", "role": "user", "content": "<environment_context>\n</…>"})
    )
    assert not prompt.is_contextual_user_message(message("user", "Fix <environment_context>"))
    assert not prompt.is_contextual_user_message(message("assistant", "<environment_context>"))
    assert not prompt.is_contextual_user_message(
        Item({"type": "function_call_output", "call_id": "c", "output": "<environment_context>"})
    )
