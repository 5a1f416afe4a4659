"""A suite's `select` is decided on the ids and tags the suite gives, before any task is
read in full: a task that is not selected never stops a batch, whatever is wrong with it;
a solution runner cannot run matters to `agent: oracle` alone; a selection that picks
nothing, or fewer than `count`, is refused where it is written."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from runner.config import load
from runner.errors import ConfigError
from tests.support.cli import run_cli
from tests.support.suites import HEAD, suite_task_file

FIXTURES = Path(__file__).parent.parent / "fixtures" / "suites"


def task_file(tmp_path: Path, entry: str) -> Path:
    """The fixture suites copied (harbor/, tb/) beside a task file with one entry."""
    return suite_task_file(tmp_path, "suites:\n  - " + entry + "\n")


def problems(path: Path, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as got:
        load(path, offline=True, **kw)  # type: ignore[arg-type]
    return [str(p) for p in got.value.problems]


def ids(path: Path, **kw: object) -> list[str]:
    return sorted(r.id for r in load(path, offline=True, **kw).runs)  # type: ignore[arg-type]


def break_tb_task(root: Path) -> None:
    """A Terminal-Bench task with a fault of each kind the review met: solution.yaml in
    place of solution.sh, an unknown field, a compose file building from /."""
    (root / "solution.sh").unlink()
    (root / "solution.yaml").write_text("- keys: echo hi\n")
    (root / "task.yaml").write_text((root / "task.yaml").read_text() + "bogus: 1\n")
    (root / "docker-compose.yaml").write_text(
        "services:\n  client:\n    build:\n      context: /\n"
    )


def test_a_broken_task_that_is_not_selected_does_not_block(tmp_path: Path) -> None:
    path = task_file(tmp_path, "{format: terminal-bench, path: tb, select: {ids: [hello]}}")
    break_tb_task(tmp_path / "tb" / "broken-verifier")
    assert ids(path) == ["hello"]
    assert ids(path, agent="oracle") == ["hello"]
    path.write_text(HEAD + "suites:\n  - {format: terminal-bench, path: tb}\n")
    found = problems(path)
    assert any("bogus" in p for p in found) and any("context" in p for p in found)


def test_a_task_whose_files_cannot_be_read_is_left_alone_unless_selected(
    tmp_path: Path,
) -> None:
    """Not even a task.toml that is a folder, a FIFO or a link out stops a selection that
    does not name its task: only the folder's name is looked at."""
    path = task_file(tmp_path, "{format: harbor, path: harbor, select: {globs: ['hel*']}}")
    bad = tmp_path / "harbor" / "broken-verifier"
    (bad / "task.toml").unlink()
    os.mkfifo(bad / "task.toml")
    (bad / "instruction.md").unlink()
    (bad / "instruction.md").symlink_to("/etc/passwd")
    assert ids(path) == ["hello"]


def test_tags_are_read_from_the_task_file_alone(tmp_path: Path) -> None:
    path = task_file(tmp_path, "{format: harbor, path: harbor, select: {tags: [files]}}")
    bad = tmp_path / "harbor" / "broken-verifier"
    (bad / "instruction.md").unlink()
    (bad / "instruction.md").symlink_to("/etc/passwd")
    shutil.rmtree(bad / "tests")
    assert ids(path) == ["hello"]
    (bad / "task.toml").write_text("not = [toml\n")  # its tags cannot be told
    (found,) = problems(path)
    assert "broken-verifier/task.toml:1: (syntax): not valid TOML" in found


def test_count_draws_over_every_task_id_read_or_not(tmp_path: Path) -> None:
    """The same seed draws the same task whether or not the other task can be read, and
    a task that is not drawn is not read."""
    for seed in range(8):
        entry = f"{{format: terminal-bench, path: tb, select: {{count: 1, seed: {seed}}}}}"
        sound = ids(task_file(tmp_path / f"a{seed}", entry))
        path = task_file(tmp_path / f"b{seed}", entry)
        broken = tmp_path / f"b{seed}" / "tb" / "broken-verifier"
        (broken / "task.yaml").write_text("bogus: 1\n")
        if sound == ["hello"]:
            assert ids(path) == ["hello"]
        else:
            assert any("bogus" in p for p in problems(path))


def test_solution_yaml_matters_to_oracle_only(tmp_path: Path) -> None:
    path = task_file(tmp_path, "{format: terminal-bench, path: tb, select: {ids: [hello]}}")
    hello = tmp_path / "tb" / "hello"
    (hello / "solution.sh").unlink()
    (hello / "solution.yaml").write_text("- keys: echo hi\n")
    assert ids(path) == ["hello"]
    assert ids(path, agent="nop") == ["hello"]
    found = problems(path, agent="oracle")
    assert any(
        re.search(r":7: suites\[0\]\.agent: hello: agent oracle needs the task's solution", p)
        for p in found
    ), found
    assert any("hello/solution.yaml: (file): not supported" in p for p in found), found


def test_a_harbor_solution_fault_matters_to_oracle_only(tmp_path: Path) -> None:
    path = task_file(tmp_path, "{format: harbor, path: harbor, select: {ids: [hello]}}")
    toml = tmp_path / "harbor" / "hello" / "task.toml"
    toml.write_text(toml.read_text().replace("[solution]\n", "[solution]\nbogus = 1\n"))
    assert ids(path) == ["hello"]
    found = problems(path, agent="oracle")
    assert any("task.toml:25: solution.bogus: unknown field" in p for p in found), found


@pytest.mark.parametrize(
    ("select", "where", "says"),
    [
        ("{globs: ['hel*', 'nothing-*']}", r"suites\[0\]\.select\.globs\[1\]", "'nothing-*'"),
        ("{tags: [files, nope]}", r"suites\[0\]\.select\.tags\[1\]", "tag 'nope'"),
        ("{ids: [nope]}", r"suites\[0\]\.select\.ids\[0\]", "'nope'"),
        (
            "{count: 50}",
            r"suites\[0\]\.select\.count",
            "asks for 50 tasks, but the selection has 2",
        ),
        ("{globs: ['hel*'], count: 2}", r"suites\[0\]\.select\.count", "the selection has 1"),
    ],
)
def test_a_selection_that_picks_less_than_it_says_is_refused(
    tmp_path: Path, select: str, where: str, says: str
) -> None:
    path = task_file(tmp_path, f"{{format: harbor, path: harbor, select: {select}}}")
    done = run_cli("validate", path, "--offline")
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert re.search(rf"tasks\.yaml:7: {where}: .*{re.escape(says)}", line), line


def test_suite_problems_name_fields_as_the_task_file_does(tmp_path: Path) -> None:
    """`suites[0].path`, as pydantic's problems with an entry (`suites[0].format`) and
    every other field of the task file are named; never `suites.0.path`."""
    path = tmp_path / "tasks.yaml"
    path.write_text(HEAD + "suites:\n  - {format: nope, path: x}\n")
    assert [p.split(": ")[1] for p in problems(path)] == ["suites[0].format"]
    path.write_text(
        HEAD + "suites:\n"
        "  - {format: harbor, path: nowhere}\n"
        "  - {format: harbor, path: harbor, select: {ids: [a], globs: [b], count: 3}}\n"
        "  - {format: harbor, path: harbor, agent: oracle, environment: {backend: local}}\n"
    )
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    fields = [p.split(": ")[1] for p in problems(path)]
    assert fields == [
        "suites[0].path",
        "suites[1].select.ids[0]",
        "suites[1].select.globs[0]",
        "suites[1].select.count",
        "suites[2].environment.backend",
    ]


def test_validate_says_what_a_suite_run_starts_from_and_what_was_not_read(
    tmp_path: Path,
) -> None:
    path = task_file(tmp_path, "{format: harbor, path: harbor, select: {ids: [hello]}}")
    done = run_cli("validate", path, "--offline")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == (
        "hello: p/m, 1 turn(s), build harbor/hello/environment, workdir /app (nothing copied in)"
    )
    assert "repo" not in done.stdout
    assert lines[1].endswith(
        "tasks.yaml:7: suites[0] (harbor): 1 of 2 tasks not selected, so not read"
    ), lines


def test_an_instance_that_is_not_selected_does_not_block(tmp_path: Path) -> None:
    good = (FIXTURES / "swe-bench" / "instances.jsonl").read_text().strip()
    bad = '{"instance_id": "other-1", "repo": 7}'
    (tmp_path / "i.jsonl").write_text(good + "\n" + bad + "\n" + "[]\n")
    path = tmp_path / "tasks.yaml"
    entry = "{format: swe-bench, path: i.jsonl, environment: {image: x}, select: {ids: [%s]}}"
    path.write_text(HEAD + "suites:\n  - " + entry % "runner-fixtures__tinycalc-1" + "\n")
    assert ids(path) == ["runner-fixtures__tinycalc-1"]
    path.write_text(HEAD + "suites:\n  - " + entry % "other-1" + "\n")
    found = problems(path)
    assert any("i.jsonl:2: repo: expected a string" in p for p in found), found
    assert not any(":3:" in p for p in found), found  # no id: named only for the whole suite


@pytest.mark.parametrize(
    ("select", "said"),
    [
        ("{ids: []}", "suites[0].select: ids: an empty list would select every task"),
        ("{globs: []}", "suites[0].select: globs: an empty list would select every task"),
        ("{tags: [], count: 1}", "suites[0].select: tags: an empty list would select every task"),
        ("{}", "suites[0].select: selects nothing"),
        ("{ids: [hello, hello]}", "suites[0].select: ids: hello written twice"),
    ],
)
def test_a_select_that_would_run_everything_by_a_slip_is_refused(
    tmp_path: Path, select: str, said: str
) -> None:
    """Review 27c #2: an empty list (a template that found nothing) selected the whole
    suite; `select: null`, like no select, still means every task."""
    tasks = task_file(tmp_path, f"{{format: harbor, path: harbor, select: {select}}}")
    res = run_cli("validate", tasks, "--offline")
    assert res.returncode == 2 and said in res.stderr and "Traceback" not in res.stderr, res.stderr
    tasks.write_text(HEAD + "suites:\n  - {format: harbor, path: harbor, select: null}\n")
    everything = run_cli("validate", tasks, "--offline")
    assert everything.returncode == 0 and "2 task(s)" in everything.stdout, everything.stderr
