"""Fixtures of more than one test module of the GitHub Action's steps."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.gha import FakeGitHub, serve_fake_github


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """The loopback fake GitHub API, with its default permissions."""
    yield from serve_fake_github()
