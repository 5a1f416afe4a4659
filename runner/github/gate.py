"""The `can-write` step: who may make the Action spend the API key.

Why apart: it is the first step and the security boundary of every event but those only
a writer can cause; its rules (people and bots, the pull requests an event names,
pull_request_target refused, allow-users '*' only when acknowledged) are read as one.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from runner.errors import RunnerError
from runner.github.context import (
    EXEMPT_EVENTS,
    Context,
    bot_allowed,
    is_bot,
    parse_names,
    summary_marker,
)
from runner.github.rest import GitHub, has_write_access
from runner.github.workflow_io import annotate, append_summary, github_token, write_outputs
from runner.reports.fmt import inline

ANY_USER_ACK = "i-understand"
"""The value of `allow-any-user` that lets `allow-users: "*"` (or no gate) stand."""
PULL_REQUEST_TARGET = (
    "pull_request_target is refused: it runs with this repository's secrets and a "
    "write token while the pull request's author decides the code and the text the "
    "agent reads; use `on: pull_request` (a fork's pull request then gets no secrets "
    "and is skipped with a notice)"
)


def _refuse_anyone(allow_users: set[str], mode: str, ack: str) -> None:
    """`allow-users: "*"` and `require-write-access: false` let anyone who can open an
    issue or comment spend the key and steer the agent: only with the acknowledgement."""
    if ack.strip() not in ("", ANY_USER_ACK):
        raise RunnerError(f"allow-any-user must be empty or {ANY_USER_ACK!r}; got {ack!r}")
    opened = "allow-users: '*'" if "*" in allow_users else "require-write-access: false"
    if ("*" in allow_users or mode == "false") and ack.strip() != ANY_USER_ACK:
        raise RunnerError(
            f"{opened} lets anyone who can open an issue, a pull request or a comment run "
            "the agent with your API key and steer it; list logins in allow-users "
            f"instead, or set allow-any-user: {ANY_USER_ACK} to accept that"
        )


def cmd_can_write(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """`allowed=true|false` in $GITHUB_OUTPUT. Every event is gated except those only a
    writer can cause (EXEMPT_EVENTS): everyone in `Context.people` (the sender and the
    authors of what the event is about) must have write, maintain or admin permission,
    or be named in allow-users (people) or allow-bots (bots). An event that names
    nobody, and any API failure, count as no. `pull_request_target` is refused outright (exit 2)."""
    ctx = Context.from_env(env)
    mode = args.mode.strip().lower()
    if mode not in ("auto", "true", "false"):
        raise RunnerError(f"require-write-access must be auto, true or false; got {args.mode!r}")
    if ctx.event_name == "pull_request_target":
        raise RunnerError(PULL_REQUEST_TARGET)
    summary_marker(args.comment_tag)  # a bad tag stops here, before the key is spent
    allow_users = parse_names(args.allow_users)
    allow_bots = parse_names(args.allow_bots)
    if "*" in allow_bots:
        raise RunnerError(
            "allow-bots takes bot names (e.g. dependabot, renovate[bot]); '*' "
            "would let any app's bot spend the API key"
        )
    _refuse_anyone(allow_users, mode, args.allow_any_user)
    allowed, why = _gate(ctx, mode, allow_users, allow_bots, env, args.token_env)
    print(f"write access: {'yes' if allowed else 'no'} ({why})")
    values = {"allowed": "true" if allowed else "false"}
    if not allowed:
        annotate("notice", "runner", f"not run: {why}")
        append_summary(f"**runner** did not run: {inline(why)}.\n", env)
        values["reason"] = why
    write_outputs(values, env)
    return 0


def _gate(
    ctx: Context,
    mode: str,
    allow_users: set[str],
    allow_bots: set[str],
    env: Mapping[str, str],
    token_env: str,
) -> tuple[bool, str]:
    """(allowed, why) for the event in `ctx`; see cmd_can_write."""
    if mode == "false":
        return True, "not required (require-write-access: false)"
    if mode == "auto" and ctx.event_name in EXEMPT_EVENTS:
        return True, f"not required: only a writer can cause {ctx.event_name}"
    people = list(ctx.people)
    if ctx.event_name == "merge_group" and not ctx.linked_prs:
        return False, "the merge_group event names no pull request in its head_ref"
    unnamed = not (ctx.linked_prs or ctx.fork_head)
    if ctx.event_name == "workflow_run" and ctx.foreign_code and unnamed:
        return False, "the workflow_run of another repository's code names no pull request"
    if ctx.linked_prs or ctx.fork_head:
        gh = GitHub(ctx.api_url, github_token(env, token_env))
        try:
            people += _pr_authors(gh, ctx)
        except RunnerError as exc:
            return False, f"who wrote the pull request is unknown ({exc})"
        finally:
            gh.close()
    allowed, why = _check(ctx, people, allow_users, allow_bots, env, token_env)
    if not allowed:
        return allowed, why
    try:
        owners = _head_owners(ctx, env, token_env)
    except RunnerError as exc:
        return False, f"whose repository holds the pull request's head is unknown ({exc})"
    named = {str(u["login"]).lower() for u in people}
    owners = [o for o in owners if str(o["login"]).lower() not in named]
    if not owners:
        return allowed, why
    ok, owner_why = _check(ctx, owners, allow_users, allow_bots, env, token_env)
    if not ok:
        return False, f"the pull request's head is in another owner's repository: {owner_why}"
    return True, f"{why}; so may the owner of the pull request's head repository"


def _head_owners(ctx: Context, env: Mapping[str, str], token_env: str) -> list[Mapping[str, Any]]:
    """The owner of the repository a pull request's head is in, when that is not this
    repository: whoever can push there decides the code the agent reads, whoever opened
    the PR. From the payload, or (a comment on a PR, whose payload has no head) from
    REST. A head repository that is gone (null) names nobody: the fork was deleted."""
    pr: Mapping[str, Any] = ctx.pull_request
    if not pr and ctx.pr_number is not None and ctx.event_name != "merge_group":
        gh = GitHub(ctx.api_url, github_token(env, token_env))
        try:
            answer = gh.request("GET", f"/repos/{ctx.repository}/pulls/{ctx.pr_number}")
        finally:
            gh.close()
        pr = answer if isinstance(answer, dict) else {}
    head = pr.get("head")
    repo = head.get("repo") if isinstance(head, dict) else None
    if not isinstance(repo, dict) or repo.get("full_name") == ctx.repository:
        return []
    owner = repo.get("owner")
    if isinstance(owner, dict) and owner.get("login"):
        return [owner]
    name = str(repo.get("full_name") or "")
    if "/" not in name.strip("/"):
        raise RunnerError(f"the head repository {name!r} names no owner")
    return [{"login": name.split("/", 1)[0]}]  # GitHub's full_name is owner/name


def _check(
    ctx: Context,
    people: list[Mapping[str, Any]],
    allow_users: set[str],
    allow_bots: set[str],
    env: Mapping[str, str],
    token_env: str,
) -> tuple[bool, str]:
    """(allowed, why) for `people`: each a writer, or named in allow-users / allow-bots."""
    users = sorted({str(u["login"]) for u in people})
    bots = sorted({str(u["login"]) for u in people if is_bot(u)})
    refused = [b for b in bots if not bot_allowed(b, allow_bots)]
    if refused:
        return False, f"{', '.join(refused)} is a bot; list it in allow-bots to run for it"
    if not users:
        return False, f"the {ctx.event_name or 'unnamed'} event names no user to check"
    humans = [u for u in users if u not in bots]
    asked = [u for u in humans if "*" not in allow_users and u.lower() not in allow_users]
    if not asked:
        return True, f"{', '.join(users)} allowed by allow-users / allow-bots"
    gh = GitHub(ctx.api_url, github_token(env, token_env))
    try:
        lacking = [u for u in asked if not has_write_access(gh, ctx.repository, u)]
    except RunnerError as exc:
        annotate("warning", "runner can-write", str(exc))
        lacking = asked
    finally:
        gh.close()
    if lacking:
        return False, (
            f"{', '.join(lacking)} {'has' if len(lacking) == 1 else 'have'} no write "
            f"access to {ctx.repository} and {'is' if len(lacking) == 1 else 'are'} not in "
            "allow-users"
        )
    return True, f"{', '.join(users)} may write"


def _pr_authors(gh: GitHub, ctx: Context) -> list[Mapping[str, Any]]:
    """The authors of the pull requests an event names only by number or by head branch
    (Context.linked_prs, Context.fork_head); a PR that cannot be found is an error (the
    gate then refuses)."""
    found: list[Any] = []
    for number in ctx.linked_prs:
        pr = gh.request("GET", f"/repos/{ctx.repository}/pulls/{number}")
        found.append(pr.get("user") if isinstance(pr, dict) else None)
    if ctx.fork_head:
        prs = gh.paginate(f"/repos/{ctx.repository}/pulls", {"state": "all", "head": ctx.fork_head})
        if not prs:
            raise RunnerError(f"no pull request from {ctx.fork_head}")
        found += [p.get("user") for p in prs if isinstance(p, dict)]
    users: list[Mapping[str, Any]] = [u for u in found if isinstance(u, dict) and u.get("login")]
    if len(users) != len(found):
        raise RunnerError("a pull request without an author")
    return users
