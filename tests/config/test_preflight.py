"""runner/config/preflight.py: late problems are located from the run's own origins."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.config import expand, parse_task_file, preflight
from runner.errors import ConfigError


def _check(text: str, base: Path, **kw: object) -> list[str]:
    tf = parse_task_file(text, "t.yaml")
    runs = expand(tf, base, file="t.yaml", **kw)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as err:
        preflight.check(runs, env={}, budget=tf.budget, offline=True)
    return [str(p) for p in err.value.problems]


def test_a_defaults_branch_template_is_blamed_on_its_line_once(tmp_path: Path) -> None:
    text = (
        "version: 1\ndefaults:\n  git:\n    branch: 'x/{nope}'\n"
        "tasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: p}\n"
    )
    [problem] = _check(text, tmp_path)
    assert problem.startswith("t.yaml:4: defaults.git.branch: ")


def test_a_cost_limit_without_price_names_the_task_field(tmp_path: Path) -> None:
    text = (
        "version: 1\nproviders: {p: {base_url: 'http://127.0.0.1:9/v1'}}\n"
        "tasks:\n  - id: a\n    prompt: p\n    model: p/m\n    limits:\n"
        "      max_cost_usd: 1.0\n"
    )
    [problem] = _check(text, tmp_path)
    assert problem.startswith("t.yaml:8: tasks[0].limits.max_cost_usd: p/m has no known price")


def test_a_model_listed_twice_in_the_matrix_blames_the_second_entry(tmp_path: Path) -> None:
    text = (
        "version: 1\nmatrix:\n  model:\n    - local/smollm2\n    - local/smollm2\n"
        "tasks:\n  - {id: a, prompt: p}\n"
    )
    [problem] = _check(text, tmp_path)
    assert problem.startswith("t.yaml:5: matrix.model[1]: 'local/smollm2' is listed twice")


def test_a_flag_is_blamed_on_the_command_line(tmp_path: Path) -> None:
    text = "version: 1\ntasks:\n  - {id: a, prompt: p}\n"
    [problem] = _check(text, tmp_path, models=["local/smollm2", "local/smollm2"])
    assert problem.startswith("(command line): --model: ")


def test_runs_remember_origins_of_variant_and_flag_values(tmp_path: Path) -> None:
    (tmp_path / "v.md").write_text("be brief\n")
    text = (
        "version: 1\nmatrix:\n  variant:\n    - name: v\n      instructions_file: v.md\n"
        "tasks:\n  - {id: a, prompt: p}\n"
    )
    [run] = expand(parse_task_file(text, "t.yaml"), tmp_path, file="t.yaml", sandbox="read-only")
    assert run.instructions == "be brief"
    at = run.at("instructions_file")
    assert (at.line, at.field) == (5, "matrix.variant[0].instructions_file")
    assert run.at("sandbox").field == "--sandbox"
    assert (run.at("limits", "max_requests").line, run.at("").field) == (7, "tasks[0]")
