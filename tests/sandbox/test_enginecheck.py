"""The preflight's questions to an engine (runner/sandbox/enginecheck.py): is its program
here, and is an image on this machine, asked with the engine's own environment. A shell
script stands in for the engine and says what it was given."""

from __future__ import annotations

import os
from pathlib import Path

from runner.sandbox.enginecheck import image_missing, which

HOST = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/u",
    "DOCKER_HOST": "ssh://builder@example.invalid",
    "DOCKER_CONTEXT": "rootless",
    "CONTAINER_HOST": "unix:///run/user/1000/podman/podman.sock",
    "DOCKER_PASSWORD": "hunter2",
    "OPENAI_API_KEY": "sk-x",
    "DATABASE_URL": "postgres://u:p@h/db",
}


def engine(tmp_path: Path, script: str) -> Path:
    program = tmp_path / "docker"
    program.write_text("#!/bin/sh\n" + script)
    program.chmod(0o755)
    return program


def test_the_preflights_image_question_sees_the_same_environment(tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    docker = engine(tmp_path, f"env > {seen}\nexit 0\n")
    assert image_missing(str(docker), "localhost/x:1", HOST) is None
    names = {line.split("=", 1)[0] for line in seen.read_text().splitlines()}
    assert {"DOCKER_HOST", "DOCKER_CONTEXT"} <= names
    assert not {"OPENAI_API_KEY", "DOCKER_PASSWORD", "DATABASE_URL", "CONTAINER_HOST"} & names


def test_a_missing_image_is_the_engines_last_word_cut_short(tmp_path: Path) -> None:
    said = "x" * 500
    docker = engine(tmp_path, f"echo first >&2\necho '{said}' >&2\nexit 125\n")
    assert image_missing(str(docker), "localhost/none", HOST) == (
        f"`docker image inspect` exit 125: {'x' * 160}"
    )
    quiet = engine(tmp_path, "printf '\\377\\376' >&2\nexit 1\n")
    assert image_missing(str(quiet), "localhost/none", HOST) == (
        "`docker image inspect` exit 1: \ufffd\ufffd"
    )


def test_the_image_is_asked_for_by_its_id_and_an_absent_engine_is_named(tmp_path: Path) -> None:
    args = tmp_path / "args"
    docker = engine(tmp_path, f'printf "%s\\n" "$@" > {args}\n')
    assert image_missing(str(docker), "localhost/x:1", HOST) is None
    assert args.read_text().split("\n")[:-1] == [
        "image",
        "inspect",
        "--format",
        "{{.Id}}",
        "localhost/x:1",
    ]
    gone = tmp_path / "podman"
    assert image_missing(str(gone), "x", HOST) == f"cannot run {gone}: No such file or directory"


def test_which_looks_on_the_given_path_and_takes_a_path_only_if_runnable(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "podman"
    tool.write_text("#!/bin/sh\n")
    assert which("podman", {"PATH": str(bin_dir)}) is None  # not executable
    assert which(str(tool), {}) is None
    tool.chmod(0o755)
    assert which("podman", {"PATH": str(bin_dir)}) == str(tool)
    assert which("podman", {"PATH": str(tmp_path)}) is None
    assert which(str(tool), {"PATH": ""}) == str(tool)
    assert which(str(bin_dir), {}) is None  # a folder is no program
    os.mkfifo(tmp_path / "fifo")
    assert which(str(tmp_path / "fifo"), {}) is None
