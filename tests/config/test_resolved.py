"""runner/config/resolved.py: a run as the config pass hands it over: where each value
was chosen (`Origin`, `Run.at`), who it counts as, the values a branch template may
name, and a fingerprint that is the same on every machine."""

from __future__ import annotations

from pathlib import Path

from runner.config import Origin, Run, branch_fields, expand, fingerprint, parse_task_file
from runner.errors import Problem

TEXT = (
    "version: 1\n"
    "providers:\n  p: {base_url: 'http://127.0.0.1:9/v1'}\n"
    "defaults:\n"
    "  model: p/m\n"
    "  limits: {max_requests: 5}\n"
    "tasks:\n"
    "  - id: a\n"
    "    prompt: fix it\n"
    "    instructions_file: rules.md\n"
)


def runs_in(folder: Path, text: str = TEXT, rules: str = "be brief\n") -> list[Run]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rules.md").write_text(rules)
    return expand(parse_task_file(text, "t.yaml"), folder, file="t.yaml")


def test_at_finds_a_value_s_own_origin_or_the_nearest_enclosing_one(tmp_path: Path) -> None:
    [run] = runs_in(tmp_path)
    assert run.at("limits", "max_requests") == Origin(
        file="t.yaml", line=6, field="defaults.limits.max_requests"
    )
    assert run.at("limits", "max_requests", "no", "deeper") == run.at("limits", "max_requests")
    assert run.at("no_such_setting") == run.origins[""] == run.at()
    assert run.origins[""].line == 8
    assert run.at("prompt").problem("too long") == Problem(
        "t.yaml", 9, "tasks[0].prompt", "too long"
    )


def test_a_run_counts_as_its_provider_and_model_or_as_its_sanity_agent(tmp_path: Path) -> None:
    [run] = runs_in(tmp_path)
    assert run.label == "p/m"
    assert run.model_copy(update={"agent": "oracle"}).label == "agent/oracle"


def test_branch_fields_give_batch_and_its_older_name_the_same_value(tmp_path: Path) -> None:
    [run] = runs_in(tmp_path)
    assert branch_fields(run, "b1") == {
        "batch": "b1",
        "run": "b1",
        "task": "a",
        "model": "p/m",
        "repeat": "1",
        "name": "a",
        "variant": "",
    }


def test_the_fingerprint_holds_no_machine_path(tmp_path: Path) -> None:
    here, there = runs_in(tmp_path / "here")[0], runs_in(tmp_path / "elsewhere" / "deep")[0]
    assert here.repo != there.repo and here.instructions_file != there.instructions_file
    assert here.fingerprint == there.fingerprint == fingerprint(here)
    assert len(here.fingerprint) == 16 and int(here.fingerprint, 16) >= 0


def test_what_the_run_does_changes_the_fingerprint(tmp_path: Path) -> None:
    """Instructions count by content (an edit makes `--resume` redo the run); the prompt,
    the limits and the model count as written."""
    base = runs_in(tmp_path / "0")[0].fingerprint
    changed = [
        runs_in(tmp_path / "1", rules="be thorough\n")[0],
        runs_in(tmp_path / "2", TEXT.replace("fix it", "fix it all"))[0],
        runs_in(tmp_path / "3", TEXT.replace("max_requests: 5", "max_requests: 6"))[0],
        runs_in(tmp_path / "4", TEXT.replace("model: p/m", "model: p/n"))[0],
    ]
    prints = [r.fingerprint for r in changed]
    assert base not in prints and len(set(prints)) == 4


def test_a_branch_template_hashes_batch_as_its_older_name(tmp_path: Path) -> None:
    """`{batch}` is issue 29's name for `{run}`: a file written either way keeps the
    fingerprint, so `--resume` agrees with a batch an older runner started."""
    older = TEXT.replace("  model: p/m\n", "  model: p/m\n  git: {branch: 'x/{run}/{name}'}\n")
    newer = older.replace("{run}", "{batch}")
    assert (
        runs_in(tmp_path / "a", older)[0].fingerprint
        == runs_in(tmp_path / "b", newer)[0].fingerprint
    )
    other = older.replace("x/{run}", "y/{run}")
    assert (
        runs_in(tmp_path / "c", other)[0].fingerprint
        != runs_in(tmp_path / "a", older)[0].fingerprint
    )
