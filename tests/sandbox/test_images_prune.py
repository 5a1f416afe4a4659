"""`runner images prune` removes the images runner built for this user on this host and
nothing else: not another user's, not one an older runner labelled without a user, not one
a live batch built, uses or listed as one it will use, not the base image nor anyone's
own; `--dry-run` lists what would go and what stays, and why. A batch's start removes the
untagged build images of dead batches only. Run against podman storage of the test's own,
so no image of this machine is touched."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import uuid
from pathlib import Path

import anyio
import pytest

from runner.sandbox.engine import BATCH_LABEL, HOST_LABEL, OWNER, OWNER_LABEL, Engine
from runner.sandbox.images import BASE_IMAGE, reap_builds
from runner.sandbox.orphans import UID_LABEL, live_batch
from tests.support.cli import run_cli
from tests.support.environments import engine_answers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]


def tiny_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"hi\n"))
    return buf.getvalue()


@pytest.fixture
def storage(tmp_path: Path) -> dict[str, str]:
    conf = tmp_path / "storage.conf"
    conf.write_text(
        f'[storage]\ndriver = "vfs"\nrunroot = "{tmp_path}/run"\ngraphroot = "{tmp_path}/root"\n'
    )
    return {"CONTAINERS_STORAGE_CONF": str(conf)}


def podman(env: dict[str, str], *args: str, stdin: bytes | None = None) -> str:
    engine = Engine("podman", extra_env=env)
    done = subprocess.run(
        engine.argv(list(args)), env=engine.env(), input=stdin, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def built(env: dict[str, str], name: str | None, **labels: str) -> str:
    """An image labelled as given (its labels make its id its own); its id."""
    changes = [a for k, v in labels.items() for a in ("--change", f"LABEL {k}={v}")]
    out = podman(env, "import", *changes, "-", *([name] if name else []), stdin=tiny_tar())
    return out.strip().splitlines()[-1].removeprefix("sha256:")


def mine(batch: str) -> dict[str, str]:
    return {
        OWNER_LABEL: OWNER,
        UID_LABEL: str(os.geteuid()),
        HOST_LABEL: os.uname().nodename,
        BATCH_LABEL: batch,
    }


def names(env: dict[str, str]) -> set[str]:
    return set(podman(env, "images", "--format", "{{.Repository}}:{{.Tag}}").split())


def test_prune_removes_only_this_users_images_no_live_batch_uses(
    storage: dict[str, str],
) -> None:
    dead, live, lister = (f"test-{w}-{uuid.uuid4().hex[:8]}" for w in ("dead", "live", "list"))
    built(storage, "localhost/runner-build:dead", **mine(dead))
    leftover = built(storage, None, **mine(dead))
    built(storage, "localhost/runner-build:live", **mine(live))
    built(storage, "localhost/runner-build:listed", **mine(dead), x="listed")
    built(storage, "localhost/runner-build:other", **{**mine(dead), UID_LABEL: "4242"})
    built(storage, "localhost/runner-build:far", **{**mine(dead), HOST_LABEL: "elsewhere"})
    built(storage, "localhost/runner-build:old", **{OWNER_LABEL: OWNER})
    built(storage, BASE_IMAGE, **{OWNER_LABEL: OWNER})
    built(storage, "localhost/someone-else:1")
    kept = {
        "localhost/runner-build:live": f"built by batch {live}, which is running",
        "localhost/runner-build:listed": "a live batch uses it",
        "localhost/runner-build:other": "built by another user (uid 4242)",
        "localhost/runner-build:far": "built on 'elsewhere'",
        "localhost/runner-build:old": "built by an older runner",
    }
    env = {**os.environ, **storage}
    with live_batch(live), live_batch(lister) as mark:
        mark.uses(["localhost/runner-build:listed"])
        dry = run_cli("images", "prune", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        lines = dry.stdout.splitlines()
        assert "would remove localhost/runner-build:dead: yours, and no live batch uses it" in lines
        assert f"would remove {leftover[:12]}: left untagged by batch {dead}'s build" in dry.stdout
        for name, why in kept.items():
            assert any(line.startswith(f"kept {name}: {why}") for line in lines), (name, lines)
        assert "someone-else" not in dry.stdout and BASE_IMAGE not in dry.stdout
        assert "would remove 2 image(s) runner built; kept 5" in lines
        assert "localhost/runner-build:dead" in names(storage)

        done = run_cli("images", "prune", env=env)
        assert done.returncode == 0, done.stderr
        assert "removed 2 image(s) runner built; kept 5" in done.stdout
        assert names(storage) == {*kept, BASE_IMAGE, "localhost/someone-else:1"}
    # The live batch is over: its images go.
    again = run_cli("images", "prune", env=env)
    assert "removed 2 image(s) runner built; kept 3" in again.stdout, again.stdout
    assert "localhost/runner-build:live" not in names(storage)


def test_a_batch_start_removes_only_dead_batches_untagged_build_images(
    storage: dict[str, str],
) -> None:
    dead, live = (f"test-{w}-{uuid.uuid4().hex[:8]}" for w in ("dead", "live"))
    left = built(storage, None, **mine(dead))
    building = built(storage, None, **mine(live))
    tagged = built(storage, "localhost/runner-build:cached", **mine(dead))
    other = built(storage, None, **{**mine(dead), UID_LABEL: "4242"})
    engine = Engine("podman", extra_env=storage)
    with live_batch(live):
        gone = anyio.run(reap_builds, engine)
    assert gone == [f"image {left[:12]}"]
    ids = podman(storage, "images", "-q", "--no-trunc").split()
    assert {i.removeprefix("sha256:") for i in ids} == {building, tagged, other}
