"""Skills: SKILL.md front matter read at resolve time (bad skills are located problems),
and the `<skills_instructions>` block of the developer message within its budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner import prompt
from runner.config import parse_task_file, resolve
from runner.errors import ConfigError
from runner.skills import Skill, SkillError, load_skills, read_skill
from tests.support import golden_files
from tests.support.cli import run_cli
from tests.support.loopback import reply_message

GOLDEN = Path(__file__).parent / "golden" / "prompt"


def write_skill(folder: Path, name: str, description: str, body: str = "Do it well.\n") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n{body}"
    )
    return folder


# ---------------------------------------------------------------- reading


def test_front_matter_gives_name_description_and_path(tmp_path: Path) -> None:
    folder = write_skill(tmp_path / "lint", "lint-fix", "Fix lint\n  errors, file by file.")
    assert read_skill(folder / "SKILL.md") == Skill(
        "lint-fix", "Fix lint errors, file by file.", (folder / "SKILL.md").resolve()
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("# no front matter\n", "must start with YAML front matter"),
        ("---\nname: [unclosed\n---\n", "front matter is not valid YAML"),
        ("---\ndescription: d\n---\n", "needs `name:`"),
        ("---\nname: n\ndescription: ''\n---\n", "needs `description:`"),
        ("---\nname: " + "n" * 65 + "\ndescription: d\n---\n", "longer than 64"),
        ("---\n- a list\n---\n", "must be a mapping"),
    ],
)
def test_broken_skills_say_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "SKILL.md").write_text(text)
    with pytest.raises(SkillError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_skill(tmp_path / "SKILL.md")


def test_a_folder_of_skills(tmp_path: Path) -> None:
    write_skill(tmp_path / "b", "beta", "Second.")
    write_skill(tmp_path / "a", "alpha", "First.")
    (tmp_path / "notes").mkdir()
    assert [s.name for s in load_skills(tmp_path)] == ["alpha", "beta"]
    with pytest.raises(SkillError, match="no SKILL.md"):
        load_skills(tmp_path / "notes")


def test_task_file_skills_resolve_and_problems_are_located(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills" / "lint", "lint-fix", "Fix lint errors.")
    write_skill(tmp_path / "more" / "lint", "lint-fix", "Another one.")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "SKILL.md").write_text("no front matter")
    ok = parse_task_file(
        "version: 1\ndefaults:\n  skills: [skills]\ntasks:\n  - {id: a, prompt: p}\n", "t.yaml"
    )
    (task,) = resolve(ok, tmp_path)
    assert [s.name for s in task.skills] == ["lint-fix"]
    bad = parse_task_file(
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n"
        "    skills:\n      - skills\n      - missing\n      - broken\n"
        "      - more\n",
        "t.yaml",
    )
    with pytest.raises(ConfigError) as err:
        resolve(bad, tmp_path)
    found = [(p.line, p.field, p.message) for p in err.value.problems]
    assert [f[:2] for f in found] == [
        (7, "tasks[0].skills[1]"),
        (8, "tasks[0].skills[2]"),
        (5, "tasks[0].skills"),
    ]
    assert "is not a directory" in found[0][2]
    assert "must start with YAML front matter" in found[1][2]
    assert "two skills are named 'lint-fix'" in found[2][2]


# ---------------------------------------------------------------- the prompt block

SKILLS = [
    Skill(
        "release-notes",
        "Write release notes from the git log since the last tag, grouped "
        "by area, one line per change.",
        Path("/skills/release-notes/SKILL.md"),
    ),
    Skill(
        "lint-fix",
        "Fix lint errors file by file and rerun the linter.",
        Path("/skills/lint-fix/SKILL.md"),
    ),
    Skill(
        "db-migration",
        "Write a reversible database migration with a test that applies and rolls it back.",
        Path("/repo/.skills/db-migration/SKILL.md"),
    ),
]


def test_block_golden() -> None:
    text = prompt.skills_instructions(SKILLS)
    assert text is not None
    golden_files.check_golden(GOLDEN / "skills_full.txt", text)
    assert prompt.skills_instructions(list(reversed(SKILLS))) == text  # sorted, not as given
    assert prompt.skills_instructions([]) is None


def test_budget_is_two_percent_of_the_window_or_8000_chars() -> None:
    assert prompt.skills_budget(None) == 8000
    assert prompt.skills_budget(272_000) == 5440 * 4


def lines_of(budget: int) -> list[str]:
    return prompt.skill_lines(SKILLS, budget)


def test_over_budget_descriptions_shrink_evenly_then_skills_drop() -> None:
    full = lines_of(10_000)
    assert sum(map(len, full)) < 10_000 and all(line.endswith(".md)") for line in full)
    bare = sum(len(f"- {s.name}: (file: {s.path})") for s in SKILLS)
    cut = lines_of(bare + 60)
    assert sum(map(len, cut)) <= bare + 60
    assert [line.split(":")[0] for line in cut] == [
        "- db-migration",
        "- lint-fix",
        "- release-notes",
    ]
    assert sum("…" in line for line in cut) == 3
    assert cut == lines_of(bare + 60)  # the same cut every time
    golden_files.check_golden(GOLDEN / "skills_cut.txt", "\n".join(cut) + "\n")
    few = lines_of(bare - 10)
    kept = few[:-1]
    assert (
        kept
        == [f"- {s.name}: (file: {s.path})" for s in sorted(SKILLS, key=lambda s: s.name)][
            : len(kept)
        ]
    )
    assert few[-1] == f"- ({3 - len(kept)} more skills left out: over the skills budget)"
    assert 1 <= len(kept) < 3 and sum(map(len, few)) <= bare - 10


def test_initial_context_carries_the_block_last_in_the_developer_message() -> None:
    items = prompt.initial_context(
        cwd=Path("/work/repo"),
        sandbox="workspace-write",
        network=False,
        writable_roots=[],
        developer_instructions="Prefer small diffs.",
        runner_home=None,
        shell="bash",
        current_date="2026-01-02",
        timezone="UTC",
        skills=prompt.skills_instructions(SKILLS),
    )[0]
    golden_files.check_golden(
        GOLDEN / "initial_with_skills.json", json.dumps([i.data for i in items], indent=2) + "\n"
    )
    parts = items[0].data["content"]
    assert len(parts) == 3 and parts[2]["text"].startswith("<skills_instructions>\n## Skills")


def test_runner_sends_the_skills(loopback_thread: Any, git_repo: Path, tmp_path: Path) -> None:
    write_skill(tmp_path / "skills" / "lint", "lint-fix", "Fix lint errors.")
    srv = loopback_thread([reply_message("ok")])
    tasks = tmp_path / "t.yaml"
    tasks.write_text(f"""version: 1
providers: {{fake: {{base_url: "{srv.base_url}"}}}}
defaults: {{model: fake/m, skills: [skills]}}
tasks:
  - {{id: a, repo: "{git_repo}", prompt: say ok}}
""")
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    developer = srv.requests[0].json["input"][0]["content"]
    # The sandbox shows the runner's copy of the skill at a fixed path (issue 25).
    path = "/tmp/.runner/skills/0/SKILL.md"
    assert f"- lint-fix: Fix lint errors. (file: {path})" in developer[-1]["text"]
