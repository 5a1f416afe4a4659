"""A small GitHub REST client over the HTTP seam (bearer token, JSON, pagination, a few
resends for the transient failures hosted runners see) and the calls the action makes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from runner import http
from runner.errors import GitHubError, NoAnswer, RemoteError
from runner.github.context import ACTIONS_BOT, API_VERSION, MARKER, WRITE_PERMISSIONS
from runner.providers.refusals import retryable_status
from runner.providers.retry import backoff_s, decide
from runner.reports.fmt import truncate

BASE_DELAY_S = 1.0
MAX_WAIT_S = 30.0
"""The longest wait before a resend, whatever Retry-After asks: a workflow step that
sleeps for an hour looks hung."""


def _resendable(exc: BaseException) -> bool:
    return isinstance(exc, RemoteError) and decide(exc) is not None


class GitHub:
    """A small REST client: bearer token, JSON, pagination, and a few resends for the
    transient failures (connection errors, 5xx, 408, 409, 429) that hosted runners see.
    Resends follow the model providers' rules: the same statuses, Retry-After reading and
    retry decision."""

    def __init__(
        self, api_url: str, token: str, *, attempts: int = 3, base_delay_s: float = BASE_DELAY_S
    ) -> None:
        self._attempts = attempts
        self._base_delay_s = base_delay_s
        self._client = http.rest_client(
            api_url.rstrip("/"),
            {
                "Authorization": f"Bearer {token}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "User-Agent": "runner-action",
            },
        )

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: Mapping[str, str] | None = None,
        ok: Sequence[int] = (),
        media: str = "",
    ) -> Any:
        """JSON of a 2xx answer (None for 204); a status in `ok` returns None too. With
        `media` (e.g. application/vnd.github.diff) that is asked for instead, and a 2xx
        answer is returned as text."""
        retrying = Retrying(
            retry=retry_if_exception(_resendable),
            stop=stop_after_attempt(self._attempts),
            wait=self._wait,
            reraise=True,
        )
        return retrying(self._once, method, path, json_body, params, ok, media)

    def _once(
        self,
        method: str,
        path: str,
        json_body: Any,
        params: Mapping[str, str] | None,
        ok: Sequence[int],
        media: str,
    ) -> Any:
        headers = {"Accept": media} if media else None
        try:
            resp = http.rest_request(
                self._client, method, path, json=json_body, params=params, headers=headers
            )
        except NoAnswer as exc:
            raise GitHubError(f"GitHub {method} {path}: {exc}", retryable=exc.retryable) from None
        status = resp.status_code
        if status in ok:
            return None
        if media and status < 300:
            return resp.text
        try:
            answer = resp.json() if resp.content else None
        except (ValueError, RecursionError):
            if status < 300:
                kind = resp.headers.get("content-type", "no content-type")
                raise GitHubError(
                    f"GitHub {method} {path}: HTTP {status} answer is not JSON ({kind[:100]})"
                ) from None
            answer = None
        if status >= 300:
            message = str(answer.get("message", "")) if isinstance(answer, dict) else ""
            raise GitHubError(
                f"GitHub {method} {path}: HTTP {status} {truncate(message, 200)}".rstrip(),
                # 409 is a real conflict on GitHub (a ref or a merge), not a busy server.
                retryable=retryable_status(status) and status != 409,
                retry_after_s=http.retry_after_s(resp.headers),
            )
        return answer

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        retry = decide(exc) if isinstance(exc, RemoteError) else None
        asked = retry.asked_s if retry else 0.0
        return min(MAX_WAIT_S, max(backoff_s(state.attempt_number, self._base_delay_s), asked))

    def paginate(
        self, path: str, params: Mapping[str, str] | None = None, max_pages: int = 50
    ) -> list[Any]:
        items: list[Any] = []
        for page in range(1, max_pages + 1):
            got = self.request(
                "GET", path, params={**(params or {}), "per_page": "100", "page": str(page)}
            )
            if not isinstance(got, list):
                raise GitHubError(f"GitHub GET {path}: expected a list")
            items += got
            if len(got) < 100:
                break
        return items


def token_login(gh: GitHub) -> str:
    """The account the token writes as: `GET /user` for a personal access token; the
    workflow's GITHUB_TOKEN (an installation token) is refused there and writes as
    github-actions[bot]. Another App's token is refused too: pass `comment-author`."""
    try:
        me = gh.request("GET", "/user", ok=(401, 403, 404))
    except GitHubError:
        me = None
    login = me.get("login") if isinstance(me, dict) else None
    return login if isinstance(login, str) and login else ACTIONS_BOT


def has_write_access(gh: GitHub, repo: str, user: str) -> bool:
    """The collaborator-permission endpoint, which counts teams, organisation roles and
    base permissions (an `author_association` of MEMBER or COLLABORATOR does not imply
    write access). A user who is not a collaborator is a 404: no access."""
    got = gh.request(
        "GET", f"/repos/{repo}/collaborators/{quote(user, safe='')}/permission", ok=(404,)
    )
    return isinstance(got, dict) and got.get("permission") in WRITE_PERMISSIONS


def upsert_comment(
    gh: GitHub, repo: str, number: int, body: str, *, author: str, marker: str = MARKER
) -> tuple[str, int]:
    """Edit our comment on the PR if it is there, else create it: ("patched"|"created", id).

    Ours means: the body starts with `marker` (one per `comment-tag`) and `author` (the
    token's account) wrote it, so a comment that merely quotes the marker is never taken
    over, and two tags never edit each other's comment."""
    for c in gh.paginate(f"/repos/{repo}/issues/{number}/comments"):
        login = (c.get("user") or {}).get("login", "")
        if str(c.get("body", "")).startswith(marker) and login == author:
            gh.request(
                "PATCH", f"/repos/{repo}/issues/comments/{c['id']}", json_body={"body": body}
            )
            return "patched", int(c["id"])
    return "created", add_comment(gh, repo, number, body)


def add_comment(gh: GitHub, repo: str, number: int, body: str) -> int:
    """A new comment on the issue or PR; its id."""
    made = gh.request("POST", f"/repos/{repo}/issues/{number}/comments", json_body={"body": body})
    return int(made["id"])


def pulls_from(gh: GitHub, repo: str, head: str, base: str) -> list[dict[str, Any]]:
    """Every pull request (open, closed, merged) from branch `head` into `base`, newest
    first."""
    owner = repo.split("/", 1)[0]
    found = gh.paginate(
        f"/repos/{repo}/pulls", {"state": "all", "head": f"{owner}:{head}", "base": base}
    )
    prs = [p for p in found if isinstance(p, dict) and isinstance(p.get("number"), int)]
    return sorted(prs, key=lambda p: int(p["number"]), reverse=True)


def upsert_pull_request(
    gh: GitHub, repo: str, *, head: str, base: str, title: str, body: str
) -> tuple[str, str]:
    """("updated"|"created", url): the open PR from `head`, or a new one."""
    owner = repo.split("/", 1)[0]
    found = gh.request(
        "GET",
        f"/repos/{repo}/pulls",
        params={"state": "open", "head": f"{owner}:{head}", "base": base},
    )
    if isinstance(found, list) and found:
        number = found[0]["number"]
        pr = gh.request(
            "PATCH", f"/repos/{repo}/pulls/{number}", json_body={"title": title, "body": body}
        )
        return "updated", str(pr["html_url"])
    pr = gh.request(
        "POST",
        f"/repos/{repo}/pulls",
        json_body={"title": title, "head": head, "base": base, "body": body},
    )
    return "created", str(pr["html_url"])
