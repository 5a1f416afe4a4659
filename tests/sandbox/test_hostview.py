"""What of the host a sandbox shows: the registry's folders, resolved as realpath would,
and read again only when the registry changed (it is looked up before every command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runner.sandbox import hostview, registry


def _tree(root: Path) -> list[Path]:
    """Folders reached through links at every level: absolute, relative, chained, to a
    link's parent, dangling, and a name that does not exist."""
    (root / "real/a/b/c").mkdir(parents=True)
    (root / "other/d").mkdir(parents=True)
    os.symlink(root / "real", root / "abs")
    os.symlink("real/a", root / "rel")
    os.symlink(root / "abs", root / "chain")
    os.symlink("..", root / "real/a/up")
    os.symlink(root / "nowhere", root / "dangling")
    os.symlink("../other", root / "real/a/b/side")
    return [
        root / "real/a/b/c",
        root / "abs/a/b/c",
        root / "rel/b/c",
        root / "chain/a/b",
        root / "real/a/up/a/b",
        root / "dangling/x",
        root / "real/a/b/side/d",
        root / "real/missing/y",
        root / "abs/a",
    ]


def test_folders_resolve_as_realpath_does(tmp_path: Path) -> None:
    paths = _tree(tmp_path)
    assert hostview._real(paths) == [Path(os.path.realpath(p)) for p in paths]
    # In any order: a cached ancestor must not change what a later path resolves to.
    assert hostview._real(paths[::-1]) == [Path(os.path.realpath(p)) for p in paths[::-1]]


@pytest.mark.parametrize("count", [1, 50, 600])
def test_a_batch_registered_since_the_last_lookup_is_left_out(tmp_path: Path, count: int) -> None:
    """Looked up once, the list is cached; a batch that starts after that, or a kept list
    replaced, is seen at the next lookup, however many entries came before."""
    first = [tmp_path / f"first-{i}" for i in range(count)]
    for p in first:
        p.mkdir()
    later = tmp_path / "later"
    later.mkdir()
    with registry.live(first):
        seen = set(hostview.run_dirs())
        assert set(first) <= seen and later not in seen
        with registry.live([later], keep=[later]):
            assert later in hostview.run_dirs()
    with registry.live([]):  # folds both into `kept`: replaced whole, a new inode
        names = set(hostview.run_dirs())
        assert later in names, "a finished batch's kept folder stays left out"
        assert not set(first) & names, "a finished batch's other folders are shown again"
    later.rmdir()
    with registry.live([]):
        assert later not in hostview.run_dirs(), "a folder that is gone is not listed"


def test_the_version_changes_with_each_batch(tmp_path: Path) -> None:
    before = registry.version()
    with registry.live([tmp_path]):
        during = registry.version()
        assert during != before
    with registry.live([]):
        assert registry.version() != during


_PATHS = st.lists(st.sampled_from(["a", "b", "ab"]), max_size=4).map(lambda p: "/" + "/".join(p))


@given(places=st.lists(_PATHS, max_size=6), path=_PATHS)
def test_within_and_ancestors_agree_with_pathlib(places: list[str], path: str) -> None:
    """The host view's string lookups say what `Path.is_relative_to` and `Path.parents`
    say: a wrong answer would show a hidden place, or name one."""
    assert hostview._within(path, set(places)) == any(Path(path).is_relative_to(p) for p in places)
    assert hostview._ancestors(places) == {str(a) for p in places for a in Path(p).parents}
