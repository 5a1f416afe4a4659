"""The REST client of the Action's steps, against the loopback fake GitHub: what it resends,
what it gives up on, and how each failure is named."""

from __future__ import annotations

import socket
import time

import pytest

from runner.errors import GitHubError, ModelError
from runner.github.rest import GitHub
from tests.support.gha import PAT, FakeGitHub


def test_rest_resends_a_503_after_the_wait_retry_after_asks(github: FakeGitHub) -> None:
    github.faults.append((503, {"retry-after": "1"}))
    gh = GitHub(github.url, PAT, base_delay_s=0.001)
    started = time.monotonic()
    try:
        assert gh.request("GET", "/user") == {"login": "octo-bot", "type": "User"}
    finally:
        gh.close()
    assert time.monotonic() - started >= 0.95  # not the 1 ms backoff
    assert [c[1] for c in github.log] == ["/user", "/user"]


def test_rest_gives_up_after_its_attempts_with_the_last_status(github: FakeGitHub) -> None:
    github.faults += [(503, {}), (429, {}), (502, {})]
    gh = GitHub(github.url, PAT, base_delay_s=0.001)
    try:
        with pytest.raises(GitHubError, match=r"^GitHub GET /user: HTTP 502 fault 502$"):
            gh.request("GET", "/user")
        # A refusal is final at once: it is not resent.
        github.faults.append((422, {}))
        with pytest.raises(GitHubError, match=r"^GitHub POST /x: HTTP 422 fault 422$"):
            gh.request("POST", "/x", json_body={})
        # On GitHub a 409 is a real conflict (a ref moved, a merge failed), not a busy server.
        github.faults.append((409, {}))
        with pytest.raises(GitHubError, match=r"^GitHub POST /y: HTTP 409 fault 409$"):
            gh.request("POST", "/y", json_body={})
    finally:
        gh.close()
    assert [c[:2] for c in github.log] == [
        *[("GET", "/user")] * 3,
        ("POST", "/x"),
        ("POST", "/y"),
    ]


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_rest_resends_the_statuses_model_requests_resend(github: FakeGitHub, status: int) -> None:
    github.faults.append((status, {}))
    gh = GitHub(github.url, PAT, base_delay_s=0.001)
    try:
        assert gh.request("GET", "/user") == {"login": "octo-bot", "type": "User"}
    finally:
        gh.close()
    assert len(github.log) == 2


def test_rest_body_that_cannot_be_decoded_is_named_and_not_resent(github: FakeGitHub) -> None:
    """A body not in its content-encoding (the seam decodes every answer itself, with a
    cap) is named as such, and not resent: over TLS a corrupt body is the server's doing."""
    github.faults += [(200, {"content-encoding": "gzip"})] * 3
    gh = GitHub(github.url, PAT, base_delay_s=0.001)
    try:
        with pytest.raises(GitHubError, match=r"^GitHub GET /user: the gzip body is corrupt"):
            gh.request("GET", "/user")
    finally:
        gh.close()
    assert len(github.log) == 1


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (200, b"<html>rate limited</html>", r"HTTP 200 answer is not JSON \(application/json\)$"),
        (200, b"[" * 100_000, r"HTTP 200 answer is not JSON \(application/json\)$"),
        (404, b"<html>gone</html>", r"HTTP 404$"),
        (404, b"[1, 2]", r"HTTP 404$"),
    ],
    ids=["html", "too deep", "error html", "error list"],
)
def test_rest_answer_that_is_not_json_names_the_call(
    github: FakeGitHub, status: int, body: bytes, says: str
) -> None:
    github.faults.append((status, {}, body))
    gh = GitHub(github.url, PAT, base_delay_s=0.001)
    try:
        with pytest.raises(GitHubError, match=r"^GitHub GET /user: " + says):
            gh.request("GET", "/user")
    finally:
        gh.close()
    assert len(github.log) == 1


def test_rest_network_failure_is_a_github_error_not_a_model_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    gh = GitHub(f"http://127.0.0.1:{port}", PAT, base_delay_s=0.001)
    try:
        with pytest.raises(GitHubError, match=r"^GitHub GET /user: ConnectError$") as info:
            gh.request("GET", "/user")
    finally:
        gh.close()
    assert not isinstance(info.value, ModelError)
