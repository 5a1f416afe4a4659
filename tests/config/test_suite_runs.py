"""`suites:` entries expand into ordinary runs in the config pass: selection, settings
over the suite's own, names and fingerprints, and located problems (exit 2)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from runner.config import load
from runner.errors import ConfigError
from tests.support import paths
from tests.support.cli import run_cli
from tests.support.suites import HEAD, suite_task_file

FIXTURES = paths.FIXTURES / "suites"


def suite_dir(tmp_path: Path, text: str) -> Path:
    return suite_task_file(tmp_path, text)


def problems(path: Path, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as got:
        load(path, offline=True, **kw)  # type: ignore[arg-type]
    return [str(p) for p in got.value.problems]


def test_a_suite_becomes_runs_with_its_own_environment_and_timeouts(tmp_path: Path) -> None:
    path = suite_dir(tmp_path, "suites:\n  - format: harbor\n    path: harbor\n")
    runs = {r.id: r for r in load(path, offline=True).runs}
    assert sorted(runs) == ["broken-verifier", "hello"]
    hello = runs["hello"]
    assert hello.suite is not None and hello.suite.id == "hello"
    assert hello.agent == "model"
    assert hello.prompt == hello.suite.instruction
    assert hello.limits.timeout_s == 120.0  # [agent] timeout_sec
    env = hello.environment
    assert (env.backend, env.build, env.workdir, env.cpus, env.memory_mb, env.network) == (
        "podman",
        "harbor/hello/environment",
        "/app",
        1.0,
        512,
        "none",
    )
    assert env.timeout_s == 300.0  # build_timeout_sec
    assert env.run_args == ("--env=LANG=C.UTF-8",)
    assert not hello.repo_named


def test_the_entry_settings_win_and_the_matrix_applies(tmp_path: Path) -> None:
    path = suite_dir(
        tmp_path,
        "matrix:\n  model: [p/a, p/b]\n  repeat: 2\n"
        "suites:\n  - format: harbor\n    path: harbor\n    select: {ids: [hello]}\n"
        "    environment: {cpus: 2}\n    limits: {timeout_s: 30}\n",
    )
    runs = load(path, offline=True).runs
    assert [r.name for r in runs] == [
        "hello.p-a.r1",
        "hello.p-a.r2",
        "hello.p-b.r1",
        "hello.p-b.r2",
    ]
    assert [r.label for r in runs] == ["p/a", "p/a", "p/b", "p/b"]
    assert {(r.environment.cpus, r.limits.timeout_s, r.agent) for r in runs} == {
        (2.0, 30.0, "model")
    }


def test_a_sanity_run_is_no_model_s_run_and_runs_once(tmp_path: Path) -> None:
    """nop calls no model, so the matrix's models do not multiply it; it is labelled, and
    named, as agent/nop."""
    path = suite_dir(
        tmp_path,
        "matrix:\n  model: [p/a, p/b]\n  repeat: 2\n"
        "suites:\n  - format: harbor\n    path: harbor\n    select: {ids: [hello]}\n"
        "    limits: {timeout_s: 30}\n    agent: nop\n",
    )
    runs = load(path, offline=True).runs
    assert [(r.name, r.label, r.agent) for r in runs] == [
        ("hello.agent-nop.r1", "agent/nop", "nop"),
        ("hello.agent-nop.r2", "agent/nop", "nop"),
    ]
    assert runs[0].limits.timeout_s == 30.0


def test_agent_flag_replaces_the_entry_agent(tmp_path: Path) -> None:
    path = suite_dir(tmp_path, "suites:\n  - format: terminal-bench\n    path: tb\n")
    runs = load(path, offline=True, agent="oracle").runs
    assert {(r.agent, r.label) for r in runs} == {("oracle", "agent/oracle")}
    assert {r.model for r in runs} == {"m"}  # the file's model, never called nor shown
    done = run_cli("validate", path, "--offline", "--agent", "oracle")
    assert done.returncode == 0, done.stderr
    assert "hello: agent/oracle," in done.stdout and "p/m" not in done.stdout


@pytest.mark.parametrize(
    ("prefix", "ids"),
    [
        ("h", ["h.broken-verifier", "h.hello"]),
        ("oracle-", ["oracle-broken-verifier", "oracle-hello"]),
        ("x_", ["x_broken-verifier", "x_hello"]),
        ("v1.", ["v1.broken-verifier", "v1.hello"]),
    ],
)
def test_id_prefix_reads_well(tmp_path: Path, prefix: str, ids: list[str]) -> None:
    """A prefix ending in a separator is joined as it is: `oracle-hello`, not
    `oracle-.hello`."""
    text = f"suites:\n  - format: harbor\n    path: harbor\n    id_prefix: '{prefix}'\n"
    assert sorted(r.id for r in load(suite_dir(tmp_path, text), offline=True).runs) == ids


def test_two_prefixes_that_make_one_id_are_refused(tmp_path: Path) -> None:
    text = (
        "suites:\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}, id_prefix: 'a-'}\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}, id_prefix: 'a-'}\n"
    )
    assert any("'a-hello' is used twice" in p for p in problems(suite_dir(tmp_path, text)))


def test_fingerprints_hold_no_machine_path(tmp_path: Path) -> None:
    text = "suites:\n  - format: harbor\n    path: harbor\n"
    one = load(suite_dir(tmp_path / "a", text), offline=True).runs
    two = load(suite_dir(tmp_path / "b", text), offline=True).runs
    assert [r.fingerprint for r in one] == [r.fingerprint for r in two]


@pytest.mark.parametrize(
    ("select", "expected"),
    [
        ("{globs: ['hel*']}", ["hello"]),
        ("{tags: [files]}", ["hello"]),
        ("{ids: [broken-verifier], tags: [files]}", ["broken-verifier", "hello"]),
        ("{count: 1, seed: 3}", None),
    ],
)
def test_select(tmp_path: Path, select: str, expected: list[str] | None) -> None:
    path = suite_dir(
        tmp_path, f"suites:\n  - format: harbor\n    path: harbor\n    select: {select}\n"
    )
    ids = sorted(r.id for r in load(path, offline=True).runs)
    if expected is None:  # a draw: one task, the same on every load
        assert len(ids) == 1
        assert ids == sorted(r.id for r in load(path, offline=True).runs)
    else:
        assert ids == expected


def test_count_draws_depend_on_the_seed_only(tmp_path: Path) -> None:
    drawn = set()
    for seed in range(12):
        select = f"    select: {{count: 1, seed: {seed}}}\n"
        text = "suites:\n  - format: harbor\n    path: harbor\n" + select
        path = suite_dir(tmp_path / str(seed), text)
        drawn.add(load(path, offline=True).runs[0].id)
    assert drawn == {"hello", "broken-verifier"}


def test_a_task_and_a_suite_task_share_no_id(tmp_path: Path) -> None:
    text = "tasks:\n  - {id: hello, prompt: hi}\nsuites:\n  - format: harbor\n    path: harbor\n"
    assert any(
        "'hello' is used twice" in p and ":10:" in p for p in problems(suite_dir(tmp_path, text))
    )
    fixed = suite_dir(tmp_path / "x", text + "    id_prefix: h\n")
    assert sorted(r.id for r in load(fixed, offline=True).runs) == [
        "h.broken-verifier",
        "h.hello",
        "hello",
    ]


def test_located_problems(tmp_path: Path) -> None:
    path = suite_dir(
        tmp_path,
        "suites:\n"
        "  - format: harbor\n    path: nowhere\n"
        "  - format: harbor\n    path: harbor\n    select: {ids: [nope]}\n",
    )
    found = problems(path)
    assert any(":8:" in p and "suites[0].path" in p and "not a directory" in p for p in found)
    assert any(":11:" in p and "suites[1].select.ids[0]" in p and "'nope'" in p for p in found)


def test_wrong_fields_for_the_format(tmp_path: Path) -> None:
    text = "suites:\n  - format: harbor\n    path: harbor\n    prompt_template: 'x {x}'\n"
    assert any(
        "prompt_template is for format swe-bench" in p for p in problems(suite_dir(tmp_path, text))
    )


def test_a_broken_suite_file_is_named_and_validate_exits_2(tmp_path: Path) -> None:
    path = suite_dir(tmp_path, "suites:\n  - format: harbor\n    path: harbor\n")
    toml = tmp_path / "harbor" / "hello" / "task.toml"
    toml.write_text(toml.read_text() + "\n[[steps]]\nname = 'two'\n")
    done = run_cli("validate", path, "--offline")
    assert done.returncode == 2, done.stderr
    assert "task.toml" in done.stderr and "steps" in done.stderr
    assert "Traceback" not in done.stderr


def test_agent_flag_without_suites_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(HEAD + "tasks:\n  - {id: a, prompt: hi}\n")
    assert any("--agent" in p for p in problems(path, agent="nop"))


def test_a_suite_runs_in_its_image_not_on_the_host(tmp_path: Path) -> None:
    text = "suites:\n  - format: harbor\n    path: harbor\n    environment: {backend: local}\n"
    found = problems(suite_dir(tmp_path, text))
    assert any("suites[0].environment.backend" in p and "backend podman" in p for p in found)


def test_a_verifier_user_on_kubernetes_is_refused_and_located(tmp_path: Path) -> None:
    """kubectl exec runs as the pod's user only: a task whose verifier must run as another
    user cannot be graded there as its suite defines."""
    text = (
        "suites:\n  - format: harbor\n    path: harbor\n    select: {ids: [hello]}\n"
        "    environment: {backend: kubernetes, image: 'registry.example/hello:1'}\n"
    )
    path = suite_dir(tmp_path, text)
    toml = tmp_path / "harbor" / "hello" / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", "[verifier]\nuser = 'nobody'\n"))
    (found,) = [p for p in problems(path) if "kubectl" in p]
    assert ":10:" in found and "suites[0].environment.backend" in found
    assert "hello" in found and "'nobody'" in found and "podman or docker" in found
    path.write_text(HEAD + text.replace("backend: kubernetes", "backend: podman"))
    (run,) = load(path, offline=True).runs
    assert run.suite is not None and run.suite.verifier.user == "nobody"


def test_swe_bench_verifier_timeout_is_the_entry_s_and_bounded(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "swe-bench", tmp_path / "swe")
    entry = "suites:\n  - {format: swe-bench, path: swe/instances.jsonl, environment: {build: swe}"
    path = tmp_path / "tasks.yaml"
    path.write_text(HEAD + entry + "}\n")
    (run,) = load(path, offline=True).runs
    assert run.suite is not None and run.suite.verifier.timeout_s == 1800.0  # the harness's
    path.write_text(HEAD + entry + ", verifier_timeout_s: 90}\n")
    (run,) = load(path, offline=True).runs
    assert run.suite is not None and run.suite.verifier.timeout_s == 90.0
    for bad, says in (
        ("0", "greater than or equal to 1"),
        ("1.0e-300", "greater than or equal to 1"),
        ("86401", "less than or equal to 86400"),
        (".nan", "finite number"),
        ("'60'", "must be a number"),
    ):
        path.write_text(HEAD + entry + f", verifier_timeout_s: {bad}}}\n")
        (said,) = problems(path)
        assert "tasks.yaml:7: suites" in said and "0].verifier_timeout_s: " in said.replace(
            ".0.", "[0]."
        ), said
        assert says in said, said


def test_a_verifier_timeout_on_harbor_is_refused_at_its_entry(tmp_path: Path) -> None:
    entry = "  - {format: harbor, path: harbor, verifier_timeout_s: 9}\n"
    path = suite_dir(tmp_path, "suites:\n" + entry)
    (said,) = problems(path)
    assert "tasks.yaml:7" in said, said
    assert "verifier_timeout_s is for format swe-bench, not harbor" in said, said
