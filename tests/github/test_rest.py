"""The REST client of the Action's steps, against the loopback fake GitHub: what it resends,
what it gives up on, how each failure is named; and the calls the steps make with it
(who the token is, write access, the sticky comment, pull requests)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from runner.errors import GitHubError, ModelError
from runner.github import ACTIONS_BOT, MARKER
from runner.github.rest import (
    GitHub,
    add_comment,
    has_write_access,
    pulls_from,
    token_login,
    upsert_comment,
    upsert_pull_request,
)
from tests.support.gha import GITHUB_TOKEN, PAT, REPO, FakeGitHub


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


@pytest.fixture
def gh(github: FakeGitHub) -> Iterator[GitHub]:
    client = GitHub(github.url, PAT, base_delay_s=0.001)
    yield client
    client.close()


def test_the_token_writes_as_its_user_or_as_the_actions_bot(github: FakeGitHub) -> None:
    for token, login in ((PAT, "octo-bot"), (GITHUB_TOKEN, ACTIONS_BOT), ("unknown", ACTIONS_BOT)):
        client = GitHub(github.url, token, base_delay_s=0.001)
        try:
            assert token_login(client) == login
        finally:
            client.close()


def test_write_access_is_the_collaborator_permission(github: FakeGitHub, gh: GitHub) -> None:
    github.permissions.update({"m": "maintain", "r": "read", "admin": "admin"})
    assert has_write_access(gh, REPO, "alice") and has_write_access(gh, REPO, "m")
    assert not has_write_access(gh, REPO, "r") and not has_write_access(gh, REPO, "nobody")
    # A login is one path segment, whatever it holds: it cannot reach another endpoint.
    assert not has_write_access(gh, REPO, "../../admin/x?y")
    assert github.log[-1][1] == f"/repos/{REPO}/collaborators/..%2F..%2Fadmin%2Fx%3Fy/permission"


def test_only_our_own_marked_comment_is_edited(github: FakeGitHub, gh: GitHub) -> None:
    quoted = add_comment(gh, REPO, 7, f"> {MARKER} quoted by someone")
    other = GitHub(github.url, GITHUB_TOKEN, base_delay_s=0.001)
    try:
        theirs = add_comment(other, REPO, 7, f"{MARKER}\nby the actions bot")
    finally:
        other.close()
    assert upsert_comment(gh, REPO, 7, f"{MARKER}\none", author="octo-bot")[0] == "created"
    how, number = upsert_comment(gh, REPO, 7, f"{MARKER}\ntwo", author="octo-bot")
    assert how == "patched" and github.comments[number]["body"] == f"{MARKER}\ntwo"
    assert github.comments[quoted]["body"].startswith("> ")
    assert github.comments[theirs]["body"] == f"{MARKER}\nby the actions bot"
    tagged = upsert_comment(gh, REPO, 7, "x", author="octo-bot", marker="<!-- runner:summary:t -->")
    assert tagged[0] == "created" and len(github.comments) == 4


def test_the_comments_are_read_page_by_page(github: FakeGitHub, gh: GitHub) -> None:
    for i in range(101):
        add_comment(gh, REPO, 3, f"filler {i}")
    add_comment(gh, REPO, 3, f"{MARKER}\nmine")
    how, _ = upsert_comment(gh, REPO, 3, f"{MARKER}\nnew", author="octo-bot")
    assert how == "patched"
    assert len(github.calls("GET", r"/issues/3/comments$")) == 2


def test_pull_requests_from_a_branch_newest_first(github: FakeGitHub, gh: GitHub) -> None:
    args = {"head": "runner/a", "base": "main", "title": "t", "body": "b"}
    assert upsert_pull_request(gh, REPO, **args)[0] == "created"
    github.pulls[0]["state"] = "closed"
    how, url = upsert_pull_request(gh, REPO, **{**args, "title": "t2"})
    assert (how, url) == ("created", f"https://github.test/{REPO}/pull/2")
    how, _ = upsert_pull_request(gh, REPO, **{**args, "body": "b3"})
    assert how == "updated" and github.pulls[1]["body"] == "b3"
    assert [p["number"] for p in pulls_from(gh, REPO, "runner/a", "main")] == [2, 1]
    assert pulls_from(gh, REPO, "runner/other", "main") == []
