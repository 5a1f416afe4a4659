"""Artifacts are never read through a link, on every backend: a container's `tar` would
follow a link to a folder anywhere in the image, and a local run's reads follow links
inside the workspace. The rule is one, and named in the run's notes. A host run's
artifacts are read by the runner itself: a link out, `.git`, a FIFO, a missing path and
what is over the cap are notes, never a hang or a copy of a host file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.artifacts import ARTIFACTS_MAX_BYTES, copy_artifacts, local_artifacts
from runner.config import Run
from runner.redact import Redactor
from tests.support.environments import BACKENDS, Backend, started
from tests.support.fixtures import make_git_repo
from tests.support.records import a_task

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]
backends = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


@backends
async def test_a_link_in_an_artifact_path_is_refused_by_name(
    backend: Backend, tmp_path: Path
) -> None:
    async with started(backend, tmp_path) as env:
        await env.write_file("logs/out.txt", b"kept\n")
        await env.write_file("real/inner.txt", b"inner\n")
        done = await env.exec(
            ["sh", "-c", "ln -s /etc etc-link && ln -s real alias && ln -s logs/out.txt f"],
            timeout_s=60,
        )
        assert done.exit_code == 0, done.output
        out = tmp_path / "out"
        folder, notes = await copy_artifacts(
            env, ["logs", "etc-link", "alias/inner.txt", "f"], out, "r"
        )
    assert folder == "artifacts/r"
    assert (out / folder / "logs" / "out.txt").read_text() == "kept\n"
    assert sorted(p.name for p in (out / folder).iterdir()) == ["logs"]
    rule = "is a link, and artifacts are never read through links"
    assert notes == [
        f"artifact etc-link not copied: etc-link {rule} (name the file or folder it points at)",
        f"artifact alias/inner.txt not copied: alias {rule} (name the file or folder it points at)",
        f"artifact f not copied: f {rule} (name the file or folder it points at)",
    ]


# -- a host run's artifacts (`local_artifacts`): the runner's own reads of its workspace ------


def _host_run(tmp_path: Path, artifacts: str) -> tuple[Run, Path]:
    work = make_git_repo(tmp_path / "work", {"made.txt": "made\n", "logs/deep/x.log": "x\n"})
    return a_task(tmp_path, f", environment: {{artifacts: [{artifacts}]}}"), work


async def test_a_host_run_without_artifacts_copies_nothing(tmp_path: Path) -> None:
    t = a_task(tmp_path)
    got = await local_artifacts(t, tmp_path, tmp_path / "out", Redactor())
    assert got == (None, []) and not (tmp_path / "out").exists()


async def test_a_host_runs_files_and_folders_are_copied_and_the_rest_named(
    tmp_path: Path,
) -> None:
    t, work = _host_run(tmp_path, "made.txt, logs, .git/config, out.txt, fifo, none")
    (tmp_path / "secret.txt").write_text("host file outside the workspace\n")
    (work / "out.txt").symlink_to(tmp_path / "secret.txt")
    os.mkfifo(work / "fifo")  # read, it would block the run for good
    out = tmp_path / "out"
    info, notes = await local_artifacts(t, work, out, Redactor())
    assert info is not None and (info.backend, info.artifacts) == ("local", f"artifacts/{t.name}")
    got = out / "artifacts" / t.name
    assert (got / "made.txt").read_text() == "made\n"
    assert (got / "logs/deep/x.log").read_text() == "x\n"
    assert sorted(p.name for p in got.iterdir()) == ["logs", "made.txt"]
    said = {n.split(" not copied: ")[0]: n for n in notes}
    assert list(said) == [f"artifact {n}" for n in (".git/config", "out.txt", "fifo", "none")]
    assert "is a link, and artifacts are never read through links" in said["artifact out.txt"]
    assert "fifo: is a FIFO, not a regular file" in said["artifact fifo"]
    assert said["artifact none"] == "artifact none not copied: nothing is there"


async def test_notes_on_a_host_runs_artifacts_are_redacted(tmp_path: Path) -> None:
    secret = "sk-live-0123456789abcdef"
    t, work = _host_run(tmp_path, f"{secret}.log")
    info, notes = await local_artifacts(t, work, tmp_path / "out", Redactor([secret]))
    assert info is not None and info.artifacts is None  # nothing came
    assert notes == ["artifact [REDACTED].log not copied: nothing is there"]


async def test_a_file_over_what_is_left_of_the_cap_is_not_copied(tmp_path: Path) -> None:
    """The cap counts every path together: a sparse file over it costs no disk here."""
    t, work = _host_run(tmp_path, "made.txt, big.bin")
    with (work / "big.bin").open("wb") as f:
        f.truncate(ARTIFACTS_MAX_BYTES + 1)
    out = tmp_path / "out"
    info, notes = await local_artifacts(t, work, out, Redactor())
    assert info is not None and info.artifacts is not None
    assert sorted(p.name for p in (out / info.artifacts).iterdir()) == ["made.txt"]
    assert len(notes) == 1
    left = ARTIFACTS_MAX_BYTES - len("made\n")  # the cap is for all the paths together
    assert notes[0].startswith(f"artifact big.bin not copied: big.bin: is larger than {left} bytes")


async def test_a_refused_file_leaves_no_empty_folder_of_its_name(tmp_path: Path) -> None:
    """A path that is neither a file nor a folder that can be copied names no folder."""
    t, work = _host_run(tmp_path, "deep/fifo")
    (work / "deep").mkdir()
    os.mkfifo(work / "deep/fifo")
    info, notes = await local_artifacts(t, work, tmp_path / "out", Redactor())
    assert info is not None and info.artifacts is None
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").rglob("*")) == []
    assert len(notes) == 1 and "as a folder: deep/fifo: is a FIFO" in notes[0]
