"""Images: the apt mirror found in both source formats, build folders keyed by their
content (links refused), and a folder built once and then reused (real podman and
docker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.errors import EnvironmentFault, UnsafeFileError
from runner.sandbox.images import (
    BUILD_REPO,
    Builder,
    apt_mirror,
    context_hash,
    image_labels,
    parse_deb822,
    parse_one_line,
)
from tests.support.environments import CONTAINER_BACKENDS, Backend, base_image


def test_one_line_sources() -> None:
    text = (
        "# deb http://old.example/debian bookworm main\n"
        "deb-src http://src.example/debian bookworm main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main # x\n"
    )
    assert [(s.uri, s.suites) for s in parse_one_line(text)] == [
        ("http://mirror.example/debian", ("bookworm",))
    ]


def test_deb822_sources() -> None:
    text = (
        "Types: deb-src\nURIs: http://src.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://off.example/debian\nSuites: bookworm\nEnabled: no\n\n"
        "Types: deb\n# a comment\nURIs: http://a.example/debian http://b.example/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert [s.uri for s in parse_deb822(text)] == [
        "http://a.example/debian",
        "http://b.example/debian",
    ]


def test_the_mirror_is_the_first_serving_the_suite(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text("deb http://other.example/ubuntu noble main\n")
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://deb.example/debian\nSuites: bookworm\n"
    )
    assert apt_mirror("bookworm", tmp_path) == "http://deb.example/debian"
    with pytest.raises(EnvironmentFault, match="trixie"):
        apt_mirror("trixie", tmp_path)


def test_context_hash_follows_content_and_refuses_links(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    (ctx / "sub").mkdir(parents=True)
    (ctx / "Dockerfile").write_text("FROM scratch\n")
    (ctx / "sub" / "a.sh").write_text("echo a\n")
    first = context_hash(ctx)
    assert context_hash(ctx) == first
    (ctx / "sub" / "a.sh").chmod(0o755)
    assert context_hash(ctx) != first
    (ctx / "sub" / "a.sh").chmod(0o644)
    assert context_hash(ctx) == first
    (ctx / "sub" / "b").write_text("")
    assert context_hash(ctx) != first
    with pytest.raises(UnsafeFileError, match="more than 2 files"):
        context_hash(ctx, max_files=2)
    with pytest.raises(UnsafeFileError, match="over 3 bytes"):
        context_hash(ctx, max_bytes=3)
    (ctx / "secret").symlink_to("/etc/shadow")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        context_hash(ctx)


@pytest.mark.anyio
@pytest.mark.timeout(900)
@pytest.mark.parametrize("backend", CONTAINER_BACKENDS, indirect=True)
async def test_a_folder_is_built_once_and_reused(backend: Backend, tmp_path: Path) -> None:
    engine = backend.engine
    assert engine is not None
    base = await base_image(engine)
    ctx = tmp_path / "task"
    ctx.mkdir()
    # A content no other run has: the first build is a real one.
    (ctx / "Dockerfile").write_text(f"FROM {base}\nRUN echo {tmp_path.name} > /built\n")
    builder = Builder(engine, network="none")
    tag = await builder.image(ctx)
    try:
        assert tag.startswith(f"{BUILD_REPO}:") and builder.built == [tag]
        assert await builder.image(ctx) == tag and builder.built == [tag]
        again = Builder(engine)  # a later batch finds it built
        assert await again.image(ctx) == tag and again.built == []
        labels = await image_labels(engine, tag)
        assert labels is not None and labels["io.runner.owner"] == "runner"
        (ctx / "Dockerfile").write_text("FROM localhost/no-such-image:x\n")
        with pytest.raises(EnvironmentFault, match="build failed"):
            await builder.image(ctx)
    finally:
        await engine.call(["rmi", "-f", tag])
