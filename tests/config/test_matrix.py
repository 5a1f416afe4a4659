"""runner/config/matrix.py: a task file's runs (task x model x variant x repeat), their
names, and where each run's values were chosen."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from runner.config import COMMAND_LINE, Origin, Run, expand, load, parse_task_file, resolve
from tests.support.suites import suite_task_file


def test_matrix_expands_runs(tmp_path: Path) -> None:
    text = (
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:1/v1'}\n"
        "matrix: {model: [p/a, 'p/b:7b'], repeat: 2}\n"
        "tasks:\n  - {id: one, prompt: x}\n  - {id: two, prompt: y, model: p/c}\n"
    )
    tf = parse_task_file(text, "t.yaml")
    runs = expand(tf, tmp_path, file="t.yaml")
    assert [(r.id, r.model, r.repeat, r.name) for r in runs] == [
        ("one", "a", 1, "one.p-a.r1"),
        ("one", "a", 2, "one.p-a.r2"),
        ("one", "b:7b", 1, "one.p-b-7b.r1"),
        ("one", "b:7b", 2, "one.p-b-7b.r2"),
        ("two", "a", 1, "two.p-a.r1"),
        ("two", "a", 2, "two.p-a.r2"),
        ("two", "b:7b", 1, "two.p-b-7b.r1"),
        ("two", "b:7b", 2, "two.p-b-7b.r2"),
    ]
    # --model replaces the matrix models; one model and no repeat keeps plain names.
    plain = parse_task_file(
        text.replace("matrix: {model: [p/a, 'p/b:7b'], repeat: 2}\n", ""), "t.yaml"
    )
    assert [r.name for r in expand(plain, tmp_path, models=["p/z"])] == ["one", "two"]
    assert [r.model for r in expand(plain, tmp_path)] == ["smollm2", "c"]


VARIANTS = (
    "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:1/v1'}\n"
    "defaults: {model: p/m, tools: [shell]}\n"
    "matrix:\n"
    "  variant:\n"
    "    - {name: plain}\n"
    "    - name: think\n"
    '      prompt_template: "Think first.\\n\\n{prompt}"\n'
    "      reasoning_effort: high\n"
    "      tools: []\n"
    "  repeat: 2\n"
    "tasks:\n  - {id: t, prompt: fix it}\n"
)


def test_variants_rewrite_the_prompt_and_settings_and_name_their_runs(tmp_path: Path) -> None:
    runs = expand(parse_task_file(VARIANTS, "t.yaml"), tmp_path, file="t.yaml")
    assert [(r.name, r.variant, r.repeat) for r in runs] == [
        ("t.plain.r1", "plain", 1),
        ("t.plain.r2", "plain", 2),
        ("t.think.r1", "think", 1),
        ("t.think.r2", "think", 2),
    ]
    plain, think = runs[0], runs[2]
    assert (plain.prompt, plain.tools, plain.model_options.reasoning_effort) == (
        "fix it",
        ("shell",),
        None,
    )
    assert (think.prompt, think.tools, think.model_options.reasoning_effort) == (
        "Think first.\n\nfix it",
        (),
        "high",
    )
    # each value remembers the line that chose it: the variant's, else the defaults'
    assert think.at("tools") == Origin(file="t.yaml", line=11, field="matrix.variant[1].tools")
    assert plain.at("tools") == Origin(file="t.yaml", line=4, field="defaults.tools")
    assert len({r.fingerprint for r in runs}) == 4


def test_flags_win_over_the_file_and_are_blamed_on_the_command_line(tmp_path: Path) -> None:
    tf = parse_task_file(VARIANTS, "t.yaml")
    runs = expand(tf, tmp_path, file="t.yaml", sandbox="read-only", reasoning_effort="low")
    assert {(r.sandbox, r.model_options.reasoning_effort) for r in runs} == {("read-only", "low")}
    assert runs[2].at("sandbox") == Origin(file=COMMAND_LINE, line=None, field="--sandbox")
    assert runs[2].at("model_options", "reasoning_effort").field == "--reasoning-effort"


def test_resolve_gives_one_run_per_task_without_variants_or_repeats(tmp_path: Path) -> None:
    tf = parse_task_file(VARIANTS, "t.yaml")
    (run,) = resolve(tf, tmp_path, file="t.yaml", model_override="p/other")
    assert (run.name, run.variant, run.repeat, run.model, run.prompt) == (
        "t",
        None,
        1,
        "other",
        "fix it",
    )
    assert run.at("model") == Origin(file=COMMAND_LINE, line=None, field="--model")
    assert run.at("tools").line == 4  # the line map survives the copy without the matrix


def test_a_model_name_s_odd_characters_do_not_reach_the_run_name(tmp_path: Path) -> None:
    text = (
        "version: 1\nproviders:\n  p: {base_url: 'http://127.0.0.1:1/v1'}\n"
        "matrix: {model: ['p/org/m@v1+x', 'p/m']}\ntasks:\n  - {id: t, prompt: x}\n"
    )
    runs = expand(parse_task_file(text, "t.yaml"), tmp_path)
    assert [r.name for r in runs] == ["t.p-org-m-v1-x", "t.p-m"]
    assert runs[0].api_model == "org/m@v1+x"


RICH = """version: 1
providers:
  p: {base_url: 'http://127.0.0.1:1/v1', max_connections: 2}
secrets: [TOKEN]
models:
  p/priced: {context_window: 64000, price: {input: 1, cached_input: 0.5, output: 4}}
defaults:
  model: p/priced
  instructions_file: base.md
  compact_prompt_file: handoff.md
  skills: [skills]
  writable_roots: [extra]
  limits: {max_requests: 7, timeout_s: 30}
  model_options: {reasoning_effort: low, max_output_tokens: 900}
  git: {branch: 'runner/{task}-{run}'}
  mcp_servers: {m: {command: [python3, server.py], env: {A: b}}}
  check: 'true'
matrix:
  model: [p/priced, p/other]
  variant:
    - {name: plain}
    - {name: think, reasoning_effort: high, tools: [shell]}
  repeat: 2
tasks:
  - {id: a, prompt: one, turns: [two, three], tags: [x, y], output_schema: out.json}
  - {id: b, prompt: four, sandbox: read-only, environment: {backend: podman, image: 'debian:12'}}
"""


def _same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down (`==` alone takes a list for a tuple
    or a str for a Path as different only sometimes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, BaseModel):
        return all(_same(getattr(a, f), getattr(b, f)) for f in type(a).model_fields)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())  # type: ignore[attr-defined]
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same, a, b))  # type: ignore[arg-type]
    return a == b


def test_runs_are_built_unvalidated_as_validation_would_build_them(tmp_path: Path) -> None:
    """The config pass builds each `Run` from values the task file's models already
    validated, without validating them again (its validator cost the first run ~7 ms of
    start-up). Validating a run's own values must give the same run, type for type."""
    (tmp_path / "base.md").write_text("Be brief.\n")
    (tmp_path / "handoff.md").write_text("Hand over.\n")
    (tmp_path / "out.json").write_text('{"type": "object"}\n')
    (tmp_path / "extra").mkdir()
    (tmp_path / "skills" / "lint").mkdir(parents=True)
    (tmp_path / "skills" / "lint" / "SKILL.md").write_text(
        "---\nname: lint-fix\ndescription: Fix lint errors.\n---\nRun the linter.\n"
    )
    (tmp_path / "t.yaml").write_text(RICH)
    suite = suite_task_file(tmp_path / "s", "suites:\n  - {format: harbor, path: harbor}\n")
    runs = [
        *load(tmp_path / "t.yaml", offline=True).runs,
        *load(suite, offline=True).runs,
        *load(suite, offline=True, agent="oracle").runs,
    ]
    assert len(runs) == 2 * 2 * 2 * 2 + 2 + 2
    for run in runs:
        again = Run(**{f: getattr(run, f) for f in Run.model_fields})
        assert _same(run, again), run.name
        assert run.model_fields_set == again.model_fields_set
    # No run shares a dict with another (an edit to one would show in its siblings).
    dicts = [
        id(v) for run in runs for f in Run.model_fields if isinstance(v := getattr(run, f), dict)
    ]
    assert len(dicts) == len(set(dicts))
