"""The forwarder that authenticates git's HTTP requests: only git's smart-HTTP routes,
spelled exactly, and the token only ever on the way out to the one remote."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest

from runner.workspace.authproxy import (
    ROUTES,
    basic_auth,
    local_urls,
    route,
    run_git_via_forwarder,
)
from runner.workspace.git import PUSH_PROTOCOLS, git_argv, git_env
from tests.support.fixtures import git, make_git_repo
from tests.support.git_http import git_http_remote

TOKEN = "ghp_authproxy_unit_0a1b2c3d"
PREFIX = "/" + "ab" * 16


def test_each_smart_http_route_is_its_suffix() -> None:
    for method, rest in ROUTES:
        assert route(method, PREFIX + rest, PREFIX) == rest


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("GET", "/" + "cd" * 16 + "/info/refs?service=git-upload-pack"),  # another prefix
        ("GET", PREFIX + "/../other.git/info/refs?service=git-upload-pack"),
        ("GET", PREFIX + "/%2e%2e/other.git/info/refs?service=git-upload-pack"),
        ("GET", PREFIX + "//info/refs?service=git-upload-pack"),
        ("GET", PREFIX + "/info/refs?service=git-upload-pack&x=1"),
        ("GET", PREFIX + "/info/refs?service=git-upload-archive"),
        ("GET", PREFIX + "/HEAD"),
        ("PUT", PREFIX + "/git-receive-pack"),
        ("GET", PREFIX + "/git-receive-pack"),
        ("GET", PREFIX[:-1]),
        ("GET", ""),
    ],
)
def test_any_other_spelling_is_refused(method: str, target: str) -> None:
    assert route(method, target, PREFIX) is None


def test_the_header_is_basic_with_the_token_as_password() -> None:
    scheme, _, value = basic_auth(TOKEN).partition(" ")
    assert scheme == "Basic"
    assert base64.b64decode(value).decode() == f"x-access-token:{TOKEN}"


def test_local_urls_are_put_back_to_the_remote_s() -> None:
    text = "fatal: unable to access 'http://127.0.0.1:4242/abc/': 401\nhttp://127.0.0.1:4242/abc"
    shown = local_urls(text, ["http://127.0.0.1:4242/abc"], "https://example.org/o/r.git")
    assert shown.count("https://example.org/o/r.git") == 2 and "4242" not in shown


def ls_remote(local: str) -> list[str]:
    return git_argv(["ls-remote", "--heads", local])


def test_git_reaches_the_remote_through_the_forwarder_with_the_token_as_a_header(
    tmp_path: Path,
) -> None:
    repo = make_git_repo(tmp_path / "repo")
    with git_http_remote(tmp_path / "remote", TOKEN) as remote:
        git(repo, "push", "-q", str(remote.bare), "main")
        argvs: list[list[str]] = []

        def argv_for(local: str) -> list[str]:
            argvs.append(ls_remote(local))
            return argvs[-1]

        done, local = run_git_via_forwarder(
            argv_for,
            url=remote.url,
            token=TOKEN,
            cwd=str(repo),
            env=git_env(protocols=PUSH_PROTOCOLS),
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith("\trefs/heads/main\n")
    assert local.startswith("http://127.0.0.1:") and argvs == [ls_remote(local)]
    assert TOKEN not in json.dumps(argvs) and TOKEN not in local
    assert remote.seen and all(auth == basic_auth(TOKEN) for auth in remote.seen_auth)
    assert [(method, path) for method, path, _ in remote.seen] == [
        ("GET", "/remote.git/info/refs?service=git-upload-pack"),
        ("POST", "/remote.git/git-upload-pack"),  # protocol v2's ls-refs
    ]


def test_a_request_off_the_routes_is_answered_404_and_never_forwarded(tmp_path: Path) -> None:
    """Even from the process the forwarder started: the route is checked first."""
    probe = (
        "import sys, urllib.request, urllib.error\n"
        "try:\n"
        "    urllib.request.urlopen(sys.argv[1] + '/../../api/v3/user', timeout=10)\n"
        "except urllib.error.HTTPError as e:\n"
        "    print(e.code)\n"
    )
    with git_http_remote(tmp_path / "remote", TOKEN) as remote:
        done, _ = run_git_via_forwarder(
            lambda local: [sys.executable, "-c", probe, local],
            url=remote.url,
            token=TOKEN,
            cwd=None,
            env=git_env(),
            timeout=60,
        )
    assert done.stdout == b"404\n", done.stderr
    assert remote.seen == []
