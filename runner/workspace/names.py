"""Branch names from templates, and the scope rules on changed paths. Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from string import Formatter

from runner.errors import WorkspaceError
from runner.workspace.git import DEFAULT_FORBIDDEN, MAX_COMPONENT, TEMPLATE_FIELDS

_BAD_CHARS = re.compile(r"[^A-Za-z0-9._+-]+")


def component(text: str) -> str:
    """One ref path component that `git check-ref-format` accepts: ASCII letters, digits
    and `._+-`; no `..`, no leading `.` or `-`, no trailing `.`, no `.lock` ending."""
    s = _BAD_CHARS.sub("-", text)
    s = re.sub(r"\.{2,}", ".", s)
    s = re.sub(r"-{2,}", "-", s)
    s = s.strip(".-")[:MAX_COMPONENT].rstrip(".-")
    while s.lower().endswith(".lock"):
        s = s[:-5].rstrip(".-") + "-lock"
    return s or "_"


def branch_name(template: str, fields: Mapping[str, str]) -> str:
    """Render a branch template (`{batch}`, `{name}`, `{task}`, `{model}`, `{repeat}`) into a valid
    branch name. A field's value never adds hierarchy (`openai/gpt-5` becomes
    `openai-gpt-5`), so two runs cannot collide as a file and a directory; the template's
    own `/` do."""
    parts: list[str] = []
    allowed = ", ".join(f"{{{f}}}" for f in sorted(TEMPLATE_FIELDS))
    try:
        pieces = list(Formatter().parse(template))
    except ValueError:  # an unbalanced brace
        raise WorkspaceError(
            f"branch template {template!r}: unbalanced braces; fields are "
            f"written {allowed}, and a literal brace cannot be part of a "
            "branch name"
        ) from None
    for literal, field, spec, conv in pieces:
        parts.append(literal)
        if field is None:
            continue
        if field not in TEMPLATE_FIELDS:
            raise WorkspaceError(
                f"branch template {template!r}: unknown field {{{field}}}; use {allowed}"
            )
        if spec or conv:
            raise WorkspaceError(
                f"branch template {template!r}: {{{field}}} takes no format spec or "
                "conversion (`:...`, `!r`); write it bare"
            )
        if field not in fields:
            raise WorkspaceError(f"branch template {template!r}: no value for {{{field}}}")
        parts.append(component(fields[field]))
    comps = [component(c) for c in "".join(parts).split("/") if c.strip()]
    name = "/".join(comps) or "runner"
    return "runner-HEAD" if name == "HEAD" else name


def check_scope(
    changed_paths: Iterable[str],
    *,
    allowed: list[str] | None,
    forbidden: list[str],
    max_diff_lines: int | None,
    diff_lines: int,
) -> list[str]:
    """Violations of a run's scope, one sentence each; empty when the run is in scope.

    Patterns are matched against the whole repository-relative path: `*` and `?` stay
    within one directory, `**` spans any number of them (`**/x`, `a/**`, `a/**/b`), and a
    trailing `/` means everything below. `allowed=None` allows every path. The
    `DEFAULT_FORBIDDEN` patterns apply too, unless an allowed pattern that starts with a
    literal (not a wildcard) matches the path: `.github/**` allows a workflow, `**` does not.
    """
    allow = [(p, _glob(p)) for p in allowed] if allowed is not None else None
    deny = [(p, _glob(p)) for p in forbidden]
    default_deny = [(p, _glob(p)) for p in DEFAULT_FORBIDDEN]
    out: list[str] = []
    for path in dict.fromkeys(changed_paths):
        hit = next((p for p, rx in deny if rx.fullmatch(path)), None)
        if hit is not None:
            out.append(f"{path}: matches forbidden pattern {hit!r}")
            continue
        if allow is not None and not any(rx.fullmatch(path) for _, rx in allow):
            out.append(f"{path}: outside the allowed paths ({', '.join(allowed or [])})")
            continue
        hit = next((p for p, rx in default_deny if rx.fullmatch(path)), None)
        if hit is not None and not any(
            rx.fullmatch(path) and not _starts_with_wildcard(p) for p, rx in allow or []
        ):
            out.append(
                f"{path}: matches {hit!r}, which needs an explicit allowed pattern such as {hit!r}"
            )
    if max_diff_lines is not None and diff_lines > max_diff_lines:
        out.append(f"diff has {diff_lines} changed lines; the limit is {max_diff_lines}")
    return out


def _starts_with_wildcard(pattern: str) -> bool:
    p = _normalise_pattern(pattern)
    return not p or p[0] in "*?["


def _normalise_pattern(pattern: str) -> str:
    p = pattern.strip()
    while p.startswith("./"):
        p = p[2:]
    p = p.lstrip("/")
    return p + "**" if p.endswith("/") else p


def _glob(pattern: str) -> re.Pattern[str]:
    p = _normalise_pattern(pattern)
    out: list[str] = []
    i = 0
    while i < len(p):
        if p.startswith("**", i):
            if p.startswith("**/", i):
                out.append("(?:.*/)?")
                i += 3
            else:
                out.append(".*")
                i += 2
        elif p[i] == "*":
            out.append("[^/]*")
            i += 1
        elif p[i] == "?":
            out.append("[^/]")
            i += 1
        elif p[i] == "[" and (end := p.find("]", i + 2)) != -1:
            body = p[i + 1 : end]
            neg = body[0] in "!^"
            body = body[1:] if neg else body
            out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(p[i]))
            i += 1
    return re.compile("".join(out), re.DOTALL)
