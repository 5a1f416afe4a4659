"""Tests for runner.sandbox.registry: the list of this user's batches' folders, which every
sandbox reads to leave them out wherever TMPDIR, `--out` or the task file put them. A live
batch's folders are listed; a killed batch's stay listed while they exist; a finished
batch's out dir stays listed; folders that are gone are pruned; what is read is bounded;
and a registry folder that is a link, loose or someone else's is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.errors import RunnerError
from runner.sandbox import registry


def _dirs(tmp_path: Path, *names: str) -> list[Path]:
    out = []
    for name in names:
        (tmp_path / name).mkdir(parents=True, mode=0o700)
        out.append(tmp_path / name)
    return out


def test_live_finished_and_odd_entries(tmp_path: Path) -> None:
    work, out, repo, bench = _dirs(tmp_path, "w/runner-work", "out", "repo", "bench")
    with registry.live([work, out, repo, bench], keep=[out]):
        listed = registry.registered()
        assert {work, out, repo, bench} <= set(listed)
        folder = registry.folder()
        assert (os.stat(folder).st_mode & 0o777) == 0o700
        assert not folder.is_relative_to("/tmp"), "another user could create it there"
        # Written by hand: relative, `..`, top-level, a file, missing: never taken.
        (tmp_path / "file").write_text("")
        odd = ["rel/x", f"{tmp_path}/../x", "/srv", f"{tmp_path}/file", f"{tmp_path}/gone"]
        (folder / "1-odd").write_text("\n".join(odd) + "\n")
        assert not {Path(p) for p in odd} & set(registry.registered())
    listed = registry.registered()
    assert out in listed, "a finished batch's out dir stays hidden"
    assert work not in listed and repo not in listed
    with registry.live([]):  # the next batch folds the dead entries into one list
        assert out in registry.registered()
        names = os.listdir(registry.folder())
        assert "1-odd" not in names and registry.KEPT in names
    out.rmdir()
    with registry.live([]):
        assert out not in registry.registered()
        kept = (registry.folder() / registry.KEPT).read_text()
        assert str(out) not in kept, "a folder that is gone is pruned"


def test_a_killed_batch_stays_listed_while_its_folders_exist(tmp_path: Path) -> None:
    work, out = _dirs(tmp_path, "t/runner-work", "out")
    code = (
        "import sys, time; from pathlib import Path; from runner.sandbox import registry\n"
        "with registry.live([Path(a) for a in sys.argv[1:]], keep=[]):\n"
        "    print('in', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(work), str(out)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "in\n"
        assert work in registry.registered()
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    time.sleep(0.05)
    assert {work, out} <= set(registry.registered()), "killed: still hidden"
    with registry.live([]):
        assert {work, out} <= set(registry.registered()), "folded, still hidden"
    os.rmdir(work)
    with registry.live([]):
        assert work not in registry.registered() and out in registry.registered()
    os.rmdir(out)


@pytest.fixture
def private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A registry folder of this test's own: the uid's real one is shared with every
    batch and test of the uid, so counts and bounds cannot be checked there."""
    where = tmp_path / "state" / "live"
    monkeypatch.setattr(registry, "folder", lambda: where)
    yield where


def _made(folder: Path) -> None:
    """The registry folder as `live` makes it, but with no entry of a batch in it."""
    folder.mkdir(parents=True)
    folder.chmod(0o700)


def _entry(folder: Path, name: str, *paths: Path) -> None:
    """An entry written by hand, as a killed batch leaves it (nobody holds its lock)."""
    (folder / name).write_text("".join(f"{p}\n" for p in paths))


def test_the_folder_is_made_private_and_version_follows_its_entries(private: Path) -> None:
    assert registry.registered() == () and registry.version() == frozenset()
    (work,) = _dirs(private.parent.parent, "w")
    with registry.live([work]):
        assert (os.stat(private).st_mode & 0o777) == 0o700
        assert (os.stat(private.parent).st_mode & 0o777) == 0o700
        first = registry.version()
        assert registry.registered() == (work,)
        with registry.live([]):  # a second batch adds a name, and replaces `kept`
            second = registry.version()
            assert len(second - first) == 2
        # Ending rewrites an entry in place: the version stays, and a reader that keeps
        # hiding the folders hides too much, never too little.
        assert registry.version() == second
    assert {name for name, _ in registry.version()} >= {registry.KEPT, registry.LOCK}


def test_a_live_batchs_entry_is_not_folded_and_a_finished_one_keeps_only_its_keep(
    private: Path,
) -> None:
    work, out = _dirs(private.parent.parent, "work", "out")
    with registry.live([work, out], keep=[out]):
        names = {n for n, _ in registry.version()}
        with registry.live([]):
            assert names <= {n for n, _ in registry.version()}, "held: left alone"
            assert {work, out} <= set(registry.registered())
    assert registry.registered() == (out,)
    with registry.live([]):
        assert (private / registry.KEPT).read_text() == f"{out}\n"


def test_entries_read_and_folders_kept_are_bounded(
    private: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(registry, "MAX_ENTRIES", 4)
    monkeypatch.setattr(registry, "MAX_KEPT", 2)
    dirs = _dirs(private.parent.parent, "a", "b", "c", "d", "e")
    _made(private)
    for i, d in enumerate(dirs):
        _entry(private, f"{i}-x", d)
    assert registry.registered() == tuple(dirs[:4]), "the first MAX_ENTRIES names"
    with registry.live([]):
        # The fold reads MAX_ENTRIES names too (`.lock` first among them), folds the
        # three entries it read and keeps the newest MAX_KEPT of their folders.
        kept = (private / registry.KEPT).read_text().splitlines()
        assert kept == [str(dirs[1]), str(dirs[2])]
        left = {n for n, _ in registry.version()}
        assert {"3-x", "4-x"} <= left and not {"0-x", "1-x", "2-x"} & left


def test_an_entry_is_read_only_when_a_plain_named_file(private: Path) -> None:
    a, b, c, d = _dirs(private.parent.parent, "a", "b", "c", "d")
    _made(private)
    elsewhere = private.parent.parent / "list"
    elsewhere.write_text(f"{a}\n")
    (private / "1-link").symlink_to(elsewhere)
    os.mkfifo(private / "2-fifo")  # never waited on
    _entry(private, ".3-half-made", b)
    big = registry.MAX_ENTRY_BYTES
    (private / "4-big").write_text(f"{c}\n" + "/" * big + f"\n{d}\n")
    assert registry.registered() == (c,)


def test_a_path_holding_a_newline_is_never_written(private: Path) -> None:
    (odd,) = _dirs(private.parent.parent, "x\ny")
    (x,) = _dirs(private.parent.parent, "x")
    with registry.live([odd, x]):
        assert registry.registered() == (x,)


@pytest.mark.parametrize("how", ["link", "loose", "foreign"])
def test_a_registry_folder_not_the_runners_own_is_refused(private: Path, how: str) -> None:
    private.parent.mkdir(parents=True)
    real = private.parent / "real"
    real.mkdir(mode=0o700)
    _entry(real, "1-x", private.parent)
    if how == "link":
        private.symlink_to(real)
    elif how == "loose":
        private.mkdir(mode=0o700)
        private.chmod(0o755)
        _entry(private, "1-x", private.parent)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        private.mkdir(mode=0o700)
        _entry(private, "1-x", private.parent)
        os.chown(private, 65534, 65534)
    with pytest.raises(RunnerError) as err, registry.live([]):
        pass
    assert str(err.value).startswith(f"{private}: not a folder of the runner's own with mode 0700")
    assert registry.registered() == () and registry.version() == frozenset()
