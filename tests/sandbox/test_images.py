"""Images: the apt mirror found in both source formats, build folders keyed by their
content (links refused) and by the images their `FROM` lines name, a folder built once and
then reused (real podman and docker), and built again when its base image is."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from runner.errors import EnvironmentFault, UnsafeFileError
from runner.sandbox.images import (
    BUILD_REPO,
    Builder,
    apt_mirror,
    context_hash,
    from_refs,
    image_id,
    image_labels,
    parse_deb822,
    parse_one_line,
)
from tests.support.environments import CONTAINER_BACKENDS, Backend, base_image, engine_answers


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


def test_from_refs_names_the_images_built_on() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=localhost/runner-base:bookworm\n"
        "ARG TAG\n"
        "FROM --platform=linux/amd64 ${BASE} AS build\n"
        "RUN make \\\n"
        "  FROM not-an-instruction\n"
        "FROM build AS test\n"
        "FROM scratch\n"
        "from python:${TAG:-3.12}-slim\n"
        "FROM $UNSET/x\n"
        "COPY --from=build /a /a\n"
    )
    assert from_refs(text) == [
        "localhost/runner-base:bookworm",
        "python:3.12-slim",
        "$UNSET/x",
    ]
    assert from_refs("") == []


@pytest.mark.anyio
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here")
async def test_rebuilding_the_base_rebuilds_what_is_built_on_it(tmp_path: Path) -> None:
    from runner.sandbox.engine import Engine

    engine = Engine("podman")
    base = await base_image(engine)
    mine = f"localhost/runner-test-base-{uuid.uuid4().hex[:12]}:1"
    folder = tmp_path / "base"
    folder.mkdir()
    task = tmp_path / "task"
    task.mkdir()
    (task / "Dockerfile").write_text(f"FROM {mine}\nRUN cat /version > /seen\n")
    made: list[str] = []
    try:
        for version in ("one", "two"):
            (folder / "Dockerfile").write_text(f"FROM {base}\nRUN echo {version} > /version\n")
            await engine.check(["build", "-q", "--network", "none", "-t", mine, str(folder)])
            made.append(str(await image_id(engine, mine)))
        assert made[0] != made[1]
        # Back to the first base: a build FROM it, then the same folder FROM the second.
        await engine.check(["tag", made[0], mine])
        builder = Builder(engine, network="none")
        first = await builder.image(task)
        made.append(first)
        assert builder.built == [first]
        assert await Builder(engine).image(task) == first  # found, not built
        await engine.check(["tag", made[1], mine])
        second = await builder.image(task)
        made.append(second)
        assert second != first and builder.built == [first, second]
        seen = await engine.check(["run", "--rm", second, "cat", "/seen"])
        assert seen.text == "two"
    finally:
        await engine.call(["rmi", "-f", *made[2:], mine, *made[:2]])
