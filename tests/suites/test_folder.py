"""A suite's task folder read safely: regular files only, bounded, UTF-8, no link out of
the task; every refusal a located problem. And the folder helpers the readers share."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import ConfigError, Problem
from runner.suites.folder import (
    MAX_TEXT_BYTES,
    TaskFolder,
    apart,
    dockerfile_workdir,
    expand,
    list_tasks,
)
from runner.suites.model import SuiteTask


def refusal(folder: TaskFolder) -> tuple[str, str]:
    (problem,) = folder.problems
    return problem.file, problem.message


def test_a_regular_file_s_text_is_read(tmp_path: Path) -> None:
    (tmp_path / "task.yaml").write_text("instruction: héllo\n")
    folder = TaskFolder(tmp_path)
    assert folder.text("task.yaml") == "instruction: héllo\n"
    assert folder.text("absent.yaml") is None and folder.file("absent") is None
    assert folder.problems == []


def test_a_symlink_is_refused_even_to_a_file_inside(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("x")
    (tmp_path / "task.md").symlink_to(tmp_path / "real.md")
    folder = TaskFolder(tmp_path)
    assert folder.text("task.md") is None
    assert refusal(folder) == (
        str(tmp_path / "task.md"),
        "a symbolic link; a task's files must be real files",
    )


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "task.yaml")
    folder = TaskFolder(tmp_path)
    assert folder.text("task.yaml") is None
    assert refusal(folder)[1] == "not a regular file"


def test_a_huge_file_or_bad_utf8_is_refused(tmp_path: Path) -> None:
    with open(tmp_path / "big.md", "wb") as f:
        f.truncate(MAX_TEXT_BYTES + 1)  # sparse: no megabyte written
    (tmp_path / "bad.md").write_bytes(b"ok\n\xff\xfe")
    (tmp_path / "edge.md").write_bytes(b"a" * MAX_TEXT_BYTES)
    folder = TaskFolder(tmp_path)
    assert folder.text("big.md") is None and folder.text("bad.md") is None
    assert folder.text("edge.md") == "a" * MAX_TEXT_BYTES
    assert [p.message for p in folder.problems] == [
        f"larger than {MAX_TEXT_BYTES} bytes",
        "not UTF-8 text (byte 3)",
    ]


def test_a_folder_with_a_link_out_of_the_task_is_refused(tmp_path: Path) -> None:
    task = tmp_path / "task"
    (task / "tests" / "deep").mkdir(parents=True)
    (task / "tests" / "inside").symlink_to(task / "tests" / "deep")
    folder = TaskFolder(task)
    assert folder.folder("tests") == task / "tests" and folder.problems == []
    (task / "tests" / "deep" / "out").symlink_to(tmp_path)
    assert folder.folder("tests") is None
    assert refusal(folder) == (
        str(task / "tests/deep/out"),
        "a symbolic link out of the task folder",
    )
    other = TaskFolder(task)
    (task / "file").write_text("x")
    assert other.folder("file") is None and refusal(other)[1] == "not a folder (a link or a file)"


def read_none(path: Path) -> tuple[SuiteTask | None, list[Problem]]:
    return None, [Problem(str(path), None, "(read)", "read")]


def no_tags(path: Path) -> tuple[tuple[str, ...], list[Problem]]:
    return (path.name,), []


def test_tasks_are_the_marked_folders_by_name_and_the_rest_unlisted(tmp_path: Path) -> None:
    for name in ("b", "a", ".hidden", "plain"):
        (tmp_path / name).mkdir()
    for name in ("b", "a", ".hidden"):
        (tmp_path / name / "task.toml").write_text("")
    (tmp_path / "linked").symlink_to(tmp_path / "a")
    (tmp_path / "note.txt").write_text("")
    listing = list_tasks(tmp_path, "task.toml", "harbor", read_none, no_tags)
    assert [t.id for t in listing.tasks] == ["a", "b"]
    assert listing.tasks[1].tags() == (("b",), [])
    assert listing.tasks[0].read()[1] == [Problem(str(tmp_path / "a"), None, "(read)", "read")]
    assert listing.unlisted == (
        Problem(
            str(tmp_path / "plain"), None, "(folder)", "not a harbor task: it has no task.toml"
        ),
    )
    one = list_tasks(tmp_path / "a", "task.toml", "harbor", read_none, no_tags)
    assert [t.id for t in one.tasks] == ["a"]  # a task folder is a suite of one


@pytest.mark.parametrize(("make", "says"), [(None, "not a folder of"), ("empty", "holds no")])
def test_a_path_with_no_task_is_a_config_error(tmp_path: Path, make: str | None, says: str) -> None:
    path = tmp_path / "suite"
    if make:
        path.mkdir()
    with pytest.raises(ConfigError) as err:
        list_tasks(path, "task.toml", "harbor", read_none, no_tags)
    (problem,) = err.value.problems
    assert problem.file == str(path) and problem.field == "path" and says in problem.message


def test_apart_takes_a_read_s_problems_off_the_folder_s(tmp_path: Path) -> None:
    folder = TaskFolder(tmp_path)
    folder.refuse("task.toml", 1, "a", "before")

    def read() -> int:
        folder.refuse("solve.sh", None, "(file)", "x")
        return 7

    value, found = apart(folder, read)
    assert value == 7 and [p.message for p in found] == ["x"]
    assert [p.message for p in folder.problems] == ["before"]


def test_expand_takes_only_the_given_variables() -> None:
    given = {"A": "1", "EMPTY": ""}
    assert expand("${A}/${B:-two}/${EMPTY:-dflt}/$A/${1X}", given) == "1/two/dflt/$A/${1X}"
    with pytest.raises(KeyError, match="HOME"):
        expand("${HOME}", given)


@pytest.mark.parametrize(
    ("dockerfile", "workdir"),
    [
        ("FROM x\nWORKDIR /app\nRUN y\nworkdir /srv/work\n", "/srv/work"),
        ('FROM x\nWORKDIR "/quoted"\n', "/quoted"),
        ("FROM x\nWORKDIR /app\nWORKDIR $HOME\n", None),
        ("FROM x\nWORKDIR relative\n", None),
        ("FROM x\n", None),
    ],
)
def test_the_dockerfile_s_last_plain_absolute_workdir(dockerfile: str, workdir: str | None) -> None:
    assert dockerfile_workdir(dockerfile) == workdir
