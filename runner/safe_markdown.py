"""Model-written Markdown rendered for a GitHub comment, with everything that could act removed.

A review reads far better rendered than fenced, but the text is the model's and the model
read the pull request, so it can be steered into writing anything. It is therefore parsed
(markdown-it-py: CommonMark with tables and strikethrough) and rendered to HTML, which
GitHub shows as it is, under these rules:

- raw HTML is never passed on: the parser runs with HTML off, so tags show as text;
- a link or image stays only when it points into this repository on its own GitHub
  (`{server}/{owner}/{repo}/...`) or is an in-page `#anchor`; anything else is shown as
  its text followed by the address in code, which nothing turns into a link; an address
  with `.`/`..` segments (percent-encoded or not) is never kept;
- control characters and bidirectional overrides/isolates (U+202E...) become U+FFFD;
- `@user` and `@org/team` get a word joiner after the `@`, so nobody is notified;
- a cross-repository reference (`owner/repo#12`) gets a word joiner after the `#`, so the
  comment leaves no backlink in another repository's issue; this repository's own `#12`
  stays a link;
- bare addresses in text are put in code, so GitHub does not autolink them;
- no line starts with `::`, in case the text ever reaches a log (workflow commands);
- the result is one HTML block without blank lines: GitHub's Markdown pass ends an HTML
  block at a blank line, and a blank line inside a code block would hand the rest of the
  block back to Markdown (a link in "code" would become a real one);
- the source is cut at a length, with a pointer to where the full text is.
"""

from __future__ import annotations

import re
from collections.abc import MutableMapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token

_MENTION = re.compile("@")
"""Every `@`, not only one before a word: text arrives in pieces (`&#64;` and a link's text
are separate tokens), and a joiner after each costs nothing."""
_XREF = re.compile(r"(?<=[\w.-])#(?=\d)")
"""A `#` glued to a preceding word (`acme/other#12`, `other#12`): never this repository's
own `#12`, which follows a space, a line start or punctuation."""
_BARE_URL = re.compile(r"(?i)(?:[a-z][a-z0-9+.-]{0,31}://|www\.)[^\s<>\"`]*")
_COMMAND = re.compile(r"(?m)^(\s*):(?=:)")
_CONTROL = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
"""Controls, and the bidirectional overrides and isolates that make text read differently
from what it is (a right-to-left override can show `evil` as `live`): each becomes U+FFFD."""


def repo_prefix(server_url: str, repository: str) -> str:
    """The address every allowed link and image starts with: the repository on its own
    GitHub (github.com, or an Enterprise server's host)."""
    return f"{server_url.rstrip('/')}/{repository}".lower()


def allowed_url(url: str, prefix: str) -> bool:
    """Whether `url` stays inside the repository at `prefix`: https, the same host, no
    credentials or port tricks, and a path under /owner/repo. An `#anchor` stays too."""
    if url.startswith("#") and "\\" not in url:
        return True
    try:
        parts = urlsplit(url)
        want = urlsplit(prefix)
        port = parts.port
    except ValueError:
        return False
    if parts.scheme != "https" or want.scheme != "https" or "\\" in url:
        return False
    if parts.username or parts.password or port is not None:
        return False
    if (parts.hostname or "") != (want.hostname or ""):
        return False
    path = parts.path.lower()
    if _dot_segments(path):
        return False
    base = want.path.rstrip("/")
    return bool(base) and (path == base or path.startswith(base + "/"))


def _dot_segments(path: str) -> bool:
    """Whether a path holds `.` or `..` segments, however percent-encoded (`%2e%2e`,
    `%2f`, encoded twice): browsers and servers resolve them, so `/acme/demo/../../evil`
    leaves the repository while looking as if under it. Such a URL is refused outright
    rather than resolved: no honest link needs one."""
    for _ in range(5):
        if any(seg in (".", "..") for seg in re.split(r"[/\\]", path)):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # encoded five times over: nobody writes that by accident


def _text(content: str, prefix: str) -> str:
    """Plain text: escaped, mentions made inert, bare addresses put in code (GitHub's
    autolinker and ours need not agree where an address ends, so none is left to it)."""
    out = []
    last = 0
    for m in _BARE_URL.finditer(content):
        out.append(_inert(content[last : m.start()]))
        out.append(f"<code>{escapeHtml(m.group(0))}</code>")
        last = m.end()
    out.append(_inert(content[last:]))
    return "".join(out)


def _inert(content: str) -> str:
    return _XREF.sub("#\u2060", _MENTION.sub("@\u2060", escapeHtml(content)))


_SCHEME = re.compile(r":(?=//)")
_WWW = re.compile(r"(?i)www\.")


def inert_line(escaped: str) -> str:
    """One line of Markdown-escaped text (a list item or table cell, escaped by
    `reports.fmt.inline`) that GitHub cannot act on: no mention (`@user`), no
    cross-repository reference (`acme/victim#1` would leave a backlink in that issue), no
    autolinked address (`www.x`, `https://x`, `a@b.c`). An invisible word joiner splits
    each one, after the `@`, the `#`, the scheme's `:` or `www`."""
    text = _XREF.sub("#\u2060", _MENTION.sub("@\u2060", escaped))
    return _WWW.sub("www\u2060.", _SCHEME.sub(":\u2060", text))


def inert_text(markdown: str) -> str:
    """Markdown whose run-derived parts are already escaped (`reports.fmt.inline` /
    `cell`), made inert line by line for the job summary: `inert_line` on every line,
    controls replaced, and no line starting with `::` (a workflow command, should the
    text be printed to a log)."""
    text = _CONTROL.sub("\ufffd", markdown)
    lines = [inert_line(line) for line in text.split("\n")]
    return _COMMAND.sub("\\1:\u200b", "\n".join(lines))


def _address(url: str) -> str:
    if not url:
        return ""
    short = url if len(url) <= 120 else url[:119] + "\u2026"
    return f" (<code>{escapeHtml(short)}</code>)"


class _Rules:
    """markdown-it render rules; `env["prefix"]` is the repository's address and
    `env["links"]` the stack of open links (their address, or None when kept)."""

    @staticmethod
    def text(
        renderer: Any,
        tokens: Sequence[Token],
        idx: int,
        options: Any,
        env: MutableMapping[str, Any],
    ) -> str:
        return _text(tokens[idx].content, env["prefix"])

    @staticmethod
    def link_open(
        renderer: Any,
        tokens: Sequence[Token],
        idx: int,
        options: Any,
        env: MutableMapping[str, Any],
    ) -> str:
        href = str(tokens[idx].attrGet("href") or "")
        if allowed_url(href, env["prefix"]):
            env["links"].append(None)
            return f'<a href="{escapeHtml(href)}">'
        env["links"].append(href)
        return ""

    @staticmethod
    def link_close(
        renderer: Any,
        tokens: Sequence[Token],
        idx: int,
        options: Any,
        env: MutableMapping[str, Any],
    ) -> str:
        href = env["links"].pop() if env["links"] else None
        return "</a>" if href is None else _address(href)

    @staticmethod
    def image(
        renderer: Any,
        tokens: Sequence[Token],
        idx: int,
        options: Any,
        env: MutableMapping[str, Any],
    ) -> str:
        token = tokens[idx]
        src = str(token.attrGet("src") or "")
        alt = "".join(c.content for c in token.children or [] if c.content)
        if allowed_url(src, env["prefix"]):
            return f'<img src="{escapeHtml(src)}" alt="{escapeHtml(alt)}" />'
        return f"[image: {_text(alt, env['prefix'])}]{_address(src)}"


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    for name in ("text", "link_open", "link_close", "image"):
        md.add_render_rule(name, getattr(_Rules, name))
    return md


_MD = _parser()


def cut(text: str, limit: int) -> tuple[str, bool]:
    """At most `limit` characters, cut at a line end when one is near: (text, was it cut)."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    nl = head.rfind("\n")
    return (head[:nl] if nl > limit // 2 else head).rstrip(), True


def render(
    markdown: str, *, server_url: str, repository: str, limit: int = 20_000, more: str = ""
) -> str:
    """Safe HTML for a GitHub comment. `more` (HTML) is shown when the text was cut:
    where the full text is (e.g. the report artifact of the workflow run)."""
    text, was_cut = cut(_CONTROL.sub("\ufffd", markdown), limit)
    env: dict[str, Any] = {"prefix": repo_prefix(server_url, repository), "links": []}
    html = _MD.render(text, env)
    if was_cut:
        html += f"<p><em>Cut at {limit:,} characters.{(' ' + more) if more else ''}</em></p>\n"
    html = _COMMAND.sub("\\1:\u200b", html)
    # No blank line anywhere (see the module docstring); a zero-width space keeps the gap
    # visible inside code blocks.
    html = re.sub(r"\n(?=\s*\n)", "\n&#8203;", html.strip())
    return f"<div>\n{html}\n</div>" if html else ""
