"""Review 2 of issue 25, item 3: the list of this user's live batches, which every
sandbox reads to leave their run directories out wherever TMPDIR put them. Only a live
batch's own `runner-work` counts: a killed batch's entry, or one naming another folder,
is not taken."""

from __future__ import annotations

import os
from pathlib import Path

from runner.sandbox import registry


def test_a_live_batch_is_listed_and_a_dead_or_odd_entry_is_not(tmp_path: Path) -> None:
    work = tmp_path / "deep" / registry.RUN_DIRS
    work.mkdir(parents=True, mode=0o700)
    dead = tmp_path / "dead" / registry.RUN_DIRS
    dead.mkdir(parents=True, mode=0o700)
    with registry.live(work):
        assert work in registry.registered()
        folder = registry.folder()
        assert (os.stat(folder).st_mode & 0o777) == 0o700
        # Written by hand, held by no one: what a killed batch leaves.
        (folder / "1-killed").write_text(str(dead))
        assert dead not in registry.registered()
        with registry.live(tmp_path / "odd"):  # not a runner-work folder: never taken
            assert tmp_path / "odd" not in registry.registered()
        assert not (folder / "1-killed").exists(), "the next batch removes a dead entry"
    assert work not in registry.registered()
