"""Tests for runner.reports.named: a name in a report directory is a claim, so each
hostile one (absolute, `..`, a link, a FIFO, a hard link, a control character) is refused
with a message that says why, and no reader holds more than its cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.errors import UnsafeFileError
from runner.reports import named
from runner.reports.model import Report, RunInputs
from runner.reports.named import (
    EVENTS_DIR,
    INPUTS_DIR,
    PATCHES_DIR,
    check_named,
    named_files,
    named_lines,
    open_named,
    path_problem,
    read_named,
)
from tests.support.reports import report, result, task

INPUT = "inputs/" + "a" * 64 + ".json"


def _write(root: Path, rel: str, data: bytes = b"x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("threads/a\x00.jsonl", "holds a control character"),
        ("threads/a\n.jsonl", "holds a control character"),
        ("threads/a\x7f", "holds a control character"),
        ("/etc/passwd", "is an absolute path"),
        ("/threads/a.jsonl", "is an absolute path"),
        ("threads/../../etc/passwd", "holds `..`"),
        ("..", "holds `..`"),
        ("threads//a.jsonl", "holds an empty or `.` component"),
        ("threads/./a.jsonl", "holds an empty or `.` component"),
        ("threads/", "holds an empty or `.` component"),
        ("threads", "is not under threads/"),
        ("patches/a.jsonl", "is not under threads/"),
        ("a.jsonl", "is not under threads/"),
    ],
)
def test_path_problem_names_what_is_wrong(value: str, why: str) -> None:
    assert path_problem(value, EVENTS_DIR) == why


@pytest.mark.parametrize("value", ["threads/a.jsonl", "threads/sub/b.jsonl", "threads/..a"])
def test_path_problem_passes_a_plain_name_under_its_folder(value: str) -> None:
    assert path_problem(value, EVENTS_DIR) is None


def test_open_named_reads_a_plain_file_and_is_none_when_it_is_missing(tmp_path: Path) -> None:
    _write(tmp_path, "threads/a.jsonl", b"hello\n")
    fd = open_named(tmp_path, "threads/a.jsonl", EVENTS_DIR)
    assert fd is not None
    try:
        assert os.read(fd, 100) == b"hello\n"
    finally:
        os.close(fd)
    assert open_named(tmp_path, "threads/b.jsonl", EVENTS_DIR) is None
    assert open_named(tmp_path, "threads/no/b.jsonl", EVENTS_DIR) is None
    # A report directory that is a file holds nothing.
    _write(tmp_path, "flat", b"")
    assert open_named(tmp_path / "flat", "threads/a.jsonl", EVENTS_DIR) is None


def test_open_named_refuses_a_bad_name_before_touching_the_disk(tmp_path: Path) -> None:
    _write(tmp_path, "secret", b"key\n")
    with pytest.raises(UnsafeFileError) as err:
        open_named(tmp_path, "threads/../secret", EVENTS_DIR)
    assert str(err.value) == "'threads/../secret' holds `..`"
    with pytest.raises(UnsafeFileError, match="is an absolute path"):
        open_named(tmp_path, str(tmp_path / "secret"), EVENTS_DIR)


def test_open_named_refuses_links_fifos_directories_and_hard_links(tmp_path: Path) -> None:
    secret = _write(tmp_path / "host", "secret", b"key\n")
    root = tmp_path / "rep"
    (root / "threads").mkdir(parents=True)
    (root / "threads" / "link.jsonl").symlink_to(secret)
    os.mkfifo(root / "threads" / "fifo.jsonl")
    (root / "threads" / "dir.jsonl").mkdir()
    os.link(secret, root / "threads" / "hard.jsonl")
    (root / "patches").symlink_to(secret.parent)
    _write(secret.parent, "p.patch")
    cases = {
        ("threads/link.jsonl", EVENTS_DIR): "threads/link.jsonl: is a symbolic link",
        ("threads/fifo.jsonl", EVENTS_DIR): "threads/fifo.jsonl: is a FIFO, not a regular file",
        ("threads/dir.jsonl", EVENTS_DIR): "threads/dir.jsonl: is a directory",
        ("threads/hard.jsonl", EVENTS_DIR): "threads/hard.jsonl: has another hard link",
        ("patches/p.patch", PATCHES_DIR): (
            "patches/p.patch: patches is a symbolic link or not a directory; the runner "
            "does not follow links in a report directory"
        ),
    }
    for (value, folder), message in cases.items():
        with pytest.raises(UnsafeFileError) as err:
            open_named(root, value, folder)
        assert str(err.value).startswith(message), (value, str(err.value))


def test_read_named_gives_a_head_and_the_whole_size(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40  # not UTF-8: bytes come back as they are
    _write(tmp_path, "patches/p.patch", data)
    assert read_named(tmp_path, "patches/p.patch", PATCHES_DIR, 100) == (data[:100], len(data))
    assert read_named(tmp_path, "patches/p.patch", PATCHES_DIR, 1 << 20) == (data, len(data))


def test_read_named_is_none_for_what_it_may_not_show(tmp_path: Path) -> None:
    secret = _write(tmp_path, "secret", b"key\n")
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "link.patch").symlink_to(secret)
    for value in ("patches/missing.patch", "patches/link.patch", "patches/../secret", "secret"):
        assert read_named(tmp_path, value, PATCHES_DIR, 100) is None, value


def test_named_lines_streams_lines_and_passes_over_an_oversize_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(named, "LINE_CHARS", 10)
    body = b'{"a":1}\n' + b"x" * 50 + b"\n" + b"caf\xe9\n" + b"tail"
    _write(tmp_path, "threads/t.jsonl", body)
    lines = list(named_lines(tmp_path, "threads/t.jsonl", EVENTS_DIR))
    assert lines == ['{"a":1}\n', "caf\ufffd\n", "tail"]


def test_named_lines_is_empty_for_what_it_may_not_read(tmp_path: Path) -> None:
    secret = _write(tmp_path, "secret", b"key\n")
    (tmp_path / "threads").mkdir()
    (tmp_path / "threads" / "l.jsonl").symlink_to(secret)
    os.mkfifo(tmp_path / "threads" / "f.jsonl")  # never waited on
    for value in ("threads/l.jsonl", "threads/f.jsonl", "threads/none.jsonl", "/x", "../secret"):
        assert list(named_lines(tmp_path, value, EVENTS_DIR)) == [], value


def _with_files() -> Report:
    res = result("b").model_copy(update={"patch": "patches/a.patch"})
    a = task("a", "p/m", "completed", res=res)
    b = task("b", "p/m", "error").model_copy(
        update={"inputs": RunInputs(prompt=INPUT, instructions=INPUT, tools=INPUT)}
    )
    return report([a, b])


def test_named_files_lists_every_file_a_report_names() -> None:
    rep = _with_files()
    assert list(named_files(rep)) == [
        ("runs[0].events_file", rep.runs[0].events_file, EVENTS_DIR),
        ("runs[0].result.patch", "patches/a.patch", PATCHES_DIR),
        ("runs[1].events_file", rep.runs[1].events_file, EVENTS_DIR),
        ("runs[1].inputs.prompt", INPUT, INPUTS_DIR),
        ("runs[1].inputs.instructions", INPUT, INPUTS_DIR),
        ("runs[1].inputs.tools", INPUT, INPUTS_DIR),
    ]


def test_check_named_passes_plain_and_missing_files(tmp_path: Path) -> None:
    rep = _with_files()
    _write(tmp_path, rep.runs[0].events_file)
    _write(tmp_path, INPUT)
    assert check_named(tmp_path, rep, "r/report.json") == []


def test_check_named_names_the_field_and_says_why(tmp_path: Path) -> None:
    rep = _with_files()
    secret = _write(tmp_path / "host", "secret", b"key\n")
    root = tmp_path / "rep"
    (root / "threads").mkdir(parents=True)
    (root / rep.runs[1].events_file).symlink_to(secret)
    bad = rep.runs[0].model_copy(update={"events_file": "/etc/passwd"})
    rep = rep.model_copy(update={"runs": [bad, rep.runs[1]]})
    problems = check_named(root, rep, "r/report.json")
    assert [(p.file, p.line, p.field) for p in problems] == [
        ("r/report.json", None, "runs[0].events_file"),
        ("r/report.json", None, "runs[1].events_file"),
    ]
    assert problems[0].message == "'/etc/passwd' is an absolute path; " + named.allowed("threads")
    assert problems[1].message.startswith(f"{rep.runs[1].events_file}: is a symbolic link")
    assert problems[1].message.endswith("(no absolute path, no `..`, no links)")


def test_check_named_says_when_a_file_cannot_be_opened(tmp_path: Path) -> None:
    long = "threads/" + "x" * 300 + ".jsonl"  # longer than a file name may be
    rep = report([task("a", "p/m", "completed").model_copy(update={"events_file": long})])
    (tmp_path / "threads").mkdir()
    problems = check_named(tmp_path, rep, "report.json")
    assert [p.message.split(";")[0] for p in problems] == ["cannot be opened: File name too long"]
