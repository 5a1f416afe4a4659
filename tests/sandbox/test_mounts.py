"""bubblewrap's mount table as one value (runner/sandbox/mounts.py): the order that makes
the most specific rule win, and what each kind of path becomes. Nothing is started; the
sandbox itself is tested in test_bwrap.py and tests/security."""

from __future__ import annotations

from pathlib import Path

from runner.sandbox.mounts import HOME, OBJECTS_AT, Layout, mount_args
from runner.sandbox.policy import Policy

WS = Path("/srv/runs/r1/work")


def triples(args: list[str]) -> list[tuple[str, ...]]:
    """The args cut into their options, each with its operands."""
    arity = {"--symlink": 2, "--bind": 2, "--ro-bind": 2, "--ro-bind-try": 2}
    arity |= {"--ro-bind-data": 2, "--remount-ro": 1, "--tmpfs": 1, "--dir": 1, "--dev": 1}
    arity |= {"--proc": 1, "--perms": 1, "--size": 1}
    out, i = [], 0
    while i < len(args):
        n = arity[args[i]]
        out.append(tuple(args[i : i + n + 1]))
        i += n + 1
    return out


def test_the_workspace_is_writable_only_in_workspace_write_and_its_git_read_only_after() -> None:
    layout = Layout(protected=(WS / ".git",))
    writes = triples(mount_args(Policy("workspace-write", WS), layout, alternates_fd=None))
    reads = triples(mount_args(Policy("read-only", WS), layout, alternates_fd=None))
    assert ("--bind", str(WS), str(WS)) in writes
    assert ("--ro-bind", str(WS), str(WS)) in reads
    assert ("--bind", str(WS), str(WS)) not in reads
    git = ("--ro-bind", str(WS / ".git"), str(WS / ".git"))
    assert writes.index(git) > writes.index(("--bind", str(WS), str(WS)))


def test_private_places_come_first_and_everything_is_sealed_read_only_last() -> None:
    args = mount_args(Policy("read-only", WS), Layout(), alternates_fd=None, tmp_bytes=7)
    cut = triples(args)
    assert cut[:2] == [("--dev", "/dev"), ("--proc", "/proc")]
    assert ("--size", "7") in cut and cut[cut.index(("--size", "7")) + 1] == ("--tmpfs", "/tmp")
    assert ("--dir", HOME) in cut
    assert cut[-2:] == [("--remount-ro", "/run"), ("--remount-ro", "/")]


def test_a_masked_folder_is_an_empty_sealed_tmpfs_and_a_masked_file_is_dev_null() -> None:
    secret_dir, secret_file = Path("/home/u/.ssh"), Path("/home/u/.netrc")
    layout = Layout(masked=((secret_dir, True), (secret_file, False)), host=(Path("/home"),))
    cut = triples(mount_args(Policy("read-only", WS), layout, alternates_fd=None))
    assert ("--tmpfs", str(secret_dir)) in cut
    assert ("--ro-bind", "/dev/null", str(secret_file)) in cut
    assert ("--remount-ro", str(secret_dir)) in cut
    # the host's /home first, then the masks inside it
    home = cut.index(("--ro-bind-try", "/home", "/home"))
    assert home < cut.index(("--tmpfs", str(secret_dir)))


def test_object_stores_show_at_fixed_paths_and_alternates_come_from_the_fd() -> None:
    store = Path("/home/u/repo/.git/objects")
    layout = Layout(objects=(store, Path("/other/objects")))
    cut = triples(mount_args(Policy("workspace-write", WS), layout, alternates_fd=9))
    assert ("--ro-bind", str(store), f"{OBJECTS_AT}/0") in cut
    assert ("--ro-bind", "/other/objects", f"{OBJECTS_AT}/1") in cut
    alternates = str(WS / ".git/objects/info/alternates")
    at = cut.index(("--ro-bind-data", "9", alternates))
    assert cut[at - 1] == ("--perms", "0444")
    # every folder above a mount that no bind provides is made, traversable, first
    runner_dir = cut.index(("--dir", str(Path(OBJECTS_AT).parent)))
    assert cut[runner_dir - 1] == ("--perms", "0755")
    assert runner_dir < cut.index(("--ro-bind", str(store), f"{OBJECTS_AT}/0"))


def test_resolv_conf_under_run_is_shown_only_with_the_network() -> None:
    resolv = Path("/run/systemd/resolve/stub-resolv.conf")
    bind = ("--ro-bind", str(resolv), str(resolv))
    offline = Policy("workspace-write", WS)
    online = Policy("workspace-write", WS, network_access=True)
    assert bind not in triples(mount_args(offline, Layout(resolv=resolv), alternates_fd=None))
    assert bind in triples(mount_args(online, Layout(resolv=resolv), alternates_fd=None))


def test_host_links_stay_links_and_a_mount_asked_twice_is_made_once() -> None:
    layout = Layout(
        host=(Path("/usr"), Path("/usr")),
        links=((Path("/bin"), "usr/bin"),),
        mounted=((Path("/var/skills/a"), Path("/tmp/.skills/a")),),
    )
    cut = triples(mount_args(Policy("read-only", WS), layout, alternates_fd=None))
    assert ("--symlink", "usr/bin", "/bin") in cut
    assert cut.count(("--ro-bind-try", "/usr", "/usr")) == 1
    assert ("--ro-bind", "/var/skills/a", "/tmp/.skills/a") in cut
