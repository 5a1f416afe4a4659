"""runner/config/envcheck.py: the checks of a run's `environment:` that need more than one
field: the engine program each backend drives, whether it and the image are on this
machine (a real stand-in program on a PATH of its own), and the `build` folder, each
problem blamed where the run chose the value."""

from __future__ import annotations

from pathlib import Path

from runner.config import Origin, Run, expand, parse_task_file
from runner.config.envcheck import BuildDirs, engine_problems, program

HEAD = "version: 1\ntasks:\n"


def runs_of(tmp_path: Path, tasks: str) -> list[Run]:
    return expand(parse_task_file(HEAD + tasks, "t.yaml"), tmp_path, file="t.yaml")


def engine(folder: Path, log: Path) -> dict[str, str]:
    """A `docker` that logs what it is asked and knows one image; the PATH that finds it."""
    folder.mkdir()
    prog = folder / "docker"
    prog.write_text(
        f'#!/bin/sh\necho "$@" >> {log}\n'
        'if [ "$5" = localhost/here:1 ]; then echo sha256:ab; exit 0; fi\n'
        'echo "no such image: $5" >&2; exit 1\n'
    )
    prog.chmod(0o755)
    return {"PATH": str(folder)}


def test_the_program_is_the_executable_else_the_backend_and_kubectl_for_kubernetes(
    tmp_path: Path,
) -> None:
    runs = runs_of(
        tmp_path,
        "  - {id: a, prompt: p, environment: {backend: podman, image: x}}\n"
        "  - {id: b, prompt: p, environment: {backend: docker, image: x, executable: nerdctl}}\n"
        "  - {id: c, prompt: p, environment: {backend: kubernetes, image: r/x:1}}\n"
        "  - {id: d, prompt: p}\n",
    )
    assert [program(r) for r in runs] == ["podman", "nerdctl", "kubectl", "local"]


def test_a_missing_engine_is_blamed_where_the_backend_was_chosen(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    runs = runs_of(
        tmp_path,
        "  - id: a\n    prompt: p\n    environment: {backend: docker, image: x}\n"
        "  - {id: b, prompt: p}\n",
    )
    [p] = engine_problems(runs, {"PATH": str(empty)})
    assert (p.file, p.line, p.field) == ("t.yaml", 5, "tasks[0].environment.backend")
    assert p.message.startswith("backend docker needs 'docker', which is not on PATH")
    assert "`runner validate --offline` skips this check" in p.message


def test_each_image_is_asked_once_and_a_missing_one_is_located(tmp_path: Path) -> None:
    log = tmp_path / "asked.txt"
    runs = runs_of(
        tmp_path,
        "  - {id: a, prompt: p, environment: {backend: docker, image: localhost/here:1}}\n"
        "  - {id: b, prompt: p, environment: {backend: docker, image: localhost/gone:2}}\n"
        "  - {id: c, prompt: p, environment: {backend: docker, image: localhost/gone:2}}\n"
        "  - {id: k, prompt: p, environment: {backend: kubernetes, image: localhost/gone:2}}\n",
    )
    found = engine_problems(runs, engine(tmp_path / "bin", log))
    assert [(p.line, p.field) for p in found] == [
        (4, "tasks[1].environment.image"),
        (5, "tasks[2].environment.image"),
        (6, "tasks[3].environment.backend"),  # kubectl is looked for, never the image
    ]
    assert "needs 'kubectl'" in found[2].message
    assert found[0].message.startswith(
        "image localhost/gone:2 is not on this machine (`docker image inspect` exit 1: "
        "no such image: localhost/gone:2); build or load it first"
    )
    assert sorted(log.read_text().splitlines()) == [
        "image inspect --format {{.Id}} localhost/gone:2",
        "image inspect --format {{.Id}} localhost/here:1",
    ]


def test_a_build_folder_is_checked_once_and_made_absolute(tmp_path: Path) -> None:
    at = {
        "": Origin(file="t.yaml", line=3, field="tasks[0]"),
        "environment.build": Origin(file="t.yaml", line=7, field="tasks[0].environment.build"),
    }
    dirs = BuildDirs()
    assert dirs.get(tmp_path, None, at) is None
    assert dirs.get(tmp_path, "ctx", at) is None
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "Dockerfile").write_text("FROM scratch\n")
    assert dirs.get(tmp_path, "ctx", at) is None  # the first answer holds for the batch
    assert [(p.line, p.field) for p in dirs.problems] == [(7, "tasks[0].environment.build")] * 2
    assert dirs.problems[0].message == f"{tmp_path / 'ctx'} is not a directory"
    fresh = BuildDirs()
    assert fresh.get(tmp_path / "ctx" / "..", "ctx", at) == (tmp_path / "ctx").resolve()
    assert fresh.problems == []
