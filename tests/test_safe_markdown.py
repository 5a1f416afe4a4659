"""Hostile Markdown through the comment renderer: what GitHub would show must not act.

Each output is checked the way GitHub would read it: first as Markdown (it must be a
single HTML block, so none of the model's Markdown is interpreted a second time), then
as HTML (only plain formatting tags; every link and image inside the repository; no
live mention; no line that is a workflow command)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from runner.safe_markdown import allowed_url, cut, render

SERVER, REPO = "https://github.test", "octo/widgets"
OURS = f"{SERVER}/{REPO}"
TAGS = {
    "div",
    "p",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "em",
    "strong",
    "s",
    "code",
    "pre",
    "ul",
    "ol",
    "li",
    "blockquote",
    "hr",
    "br",
    "a",
    "img",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ATTRS = {
    ("a", "href"),
    ("img", "src"),
    ("img", "alt"),
    ("code", "class"),
    ("ol", "start"),
    ("th", "style"),
    ("td", "style"),
}

HOSTILE = f"""# Review @octocat

Ping @octo-org/security-team and &#64;entity-user, or @{{}}nobody.
<img src=x onerror=alert(1)> <script>alert(1)</script> <details open>hidden</details>
<!-- runner:summary --> <a href="https://evil.test">html link</a>
[inside]({OURS}/blob/main/a.py#L3) [outside](https://evil.test/x "title")
[userinfo](https://github.test@evil.test/{REPO}) [other repo]({SERVER}/octo/other)
[js](javascript:alert(1)) [data](data:text/html,hi) [proto](//evil.test/{REPO})
[backslash](https:\\\\evil.test) [port](https://github.test:8443/{REPO})
![pixel](https://evil.test/p.png) ![ours]({OURS}/raw/main/logo.png)
<https://evil.test/auto> and bare https://evil.test/bare and www.evil.test too
[ref][1] and [![nested](https://evil.test/n.png)](https://evil.test/n)
::set-output name=x::y
  ::add-mask::secret

```
code with [a link](https://evil.test/code)

::error::from a code block
```

| col | @team |
|---|---|
| [x](https://evil.test/t) | ![i](https://evil.test/i.png) |

[1]: https://evil.test/ref
"""


class Seen(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []
        self.text: list[str] = []
        self.in_code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]
        self.in_code += tag in ("code", "pre")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(tag, k, v or "") for k, v in attrs]

    def handle_endtag(self, tag: str) -> None:
        self.in_code -= tag in ("code", "pre")

    def handle_data(self, data: str) -> None:
        if not self.in_code:
            self.text.append(data)


def assert_inert(out: str) -> Seen:
    # GitHub's Markdown pass sees one HTML block, so it interprets nothing inside.
    if not out:
        return Seen()
    blocks = [t for t in MarkdownIt("commonmark", {"html": True}).parse(out) if t.level == 0]
    assert [t.type for t in blocks] == ["html_block"], out
    assert not re.search(r"\n\s*\n", out)
    assert not re.search(r"(?m)^\s*::", out)
    seen = Seen()
    seen.feed(out)
    seen.close()
    assert set(seen.tags) <= TAGS, set(seen.tags) - TAGS
    for tag, name, value in seen.attrs:
        assert (tag, name) in ATTRS, (tag, name)
        if name in ("href", "src"):
            assert value.startswith(f"{OURS}/") or value.startswith("#"), value
    text = "".join(seen.text)
    assert not re.search(r"@[A-Za-z0-9_]", text), text
    assert not re.search(r"(?i)(https?://|www\.)", text), text  # addresses only in code
    return seen


def test_hostile_markdown_renders_but_cannot_act() -> None:
    out = render(HOSTILE, server_url=SERVER, repository=REPO)
    seen = assert_inert(out)
    # Rendered, not fenced: a heading, a table, a code block and the repository's own link
    # and image survive.
    assert {"h1", "table", "pre", "a", "img"} <= set(seen.tags)
    assert ("a", "href", f"{OURS}/blob/main/a.py#L3") in seen.attrs
    assert ("img", "src", f"{OURS}/raw/main/logo.png") in seen.attrs
    assert [v for t, k, v in seen.attrs if k in ("href", "src")] == [
        f"{OURS}/blob/main/a.py#L3",
        f"{OURS}/raw/main/logo.png",
    ]
    # What was taken out is still there to read, as text or code.
    assert "&lt;script&gt;" in out and "<code>https://evil.test/x</code>" in out
    assert "[image: pixel]" in out and "&lt;!-- runner:summary --&gt;" in out
    assert "@\u2060octo-org/security-team" in out and "@\u2060entity-user" in out


def test_length_cap_points_to_the_full_text() -> None:
    long = "\n".join(f"- finding {i}: @user see https://evil.test/{i}" for i in range(2000))
    out = render(
        long,
        server_url=SERVER,
        repository=REPO,
        limit=5000,
        more=f'Full text: <a href="{OURS}/actions/runs/1">the run</a>.',
    )
    assert_inert(out)
    assert len(out) < 12_000 and "Cut at 5,000 characters. Full text:" in out
    assert "finding 0:" in out and "finding 1999" not in out
    assert cut("abc\ndef", 5) == ("abc", True) and cut("abc", 5) == ("abc", False)


def test_allowed_url() -> None:
    prefix = OURS
    assert allowed_url(f"{OURS}/pull/3", prefix) and allowed_url(OURS, prefix)
    assert allowed_url(f"{SERVER}/OCTO/Widgets/issues/1", prefix.lower())
    assert allowed_url("#section", prefix)
    for bad in (
        f"{SERVER}/octo/widgets-evil/x",
        f"http://github.test/{REPO}",
        f"https://github.test.evil.test/{REPO}",
        f"https://u:p@github.test/{REPO}",
        f"https://github.test:444/{REPO}",
        "https://evil.test",
        "/octo/widgets/x",
        "mailto:a@b.c",
        "javascript:alert(1)",
        f"https://github.test\\@evil/{REPO}",
        "https://[bad",
    ):
        assert not allowed_url(bad, prefix), bad


FRAGMENTS = [
    "@octocat",
    "@org/team",
    "<b>",
    "</div>",
    "<!--",
    "-->",
    "[x](",
    "https://e.test",
    ")",
    "![i](",
    "]",
    "[",
    "`",
    "```",
    "\n",
    "\n\n",
    "    ",
    "::",
    "&#64;",
    "|",
    "---",
    "*",
    "<https://e.test/a>",
    "www.e.test",
    f"{OURS}/x",
    "\\",
    "#",
    "> ",
    "1. ",
    "- ",
    "&lt;",
    "\u2060",
    "<pre>",
    "</pre>",
    "word",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40), st.integers(40, 400))
def test_any_mix_of_hostile_pieces_stays_inert(parts: list[str], limit: int) -> None:
    assert_inert(render("".join(parts), server_url=SERVER, repository=REPO, limit=limit))


def test_cross_repository_references_leave_no_backlink() -> None:
    src = (
        "Same as acme/other#12 and *acme/other&#35;7*, see also `acme/x#3` in code;\n"
        "this repository's own #45 and (#46) stay links.\n\n- acme/other#8: again\n"
    )
    out = render(src, server_url=SERVER, repository=REPO)
    assert_inert(out)
    # Code is never a reference on GitHub: left as written.
    assert not re.search(r"[\w.-]/[\w.-]+#\d", out.replace("<code>acme/x#3</code>", "")), out
    assert "acme/other#\u206012" in out and "acme/other#\u20607" in out
    assert "acme/other#\u20608" in out
    assert " #45 " in out and "(#46)" in out


def test_dot_segments_cannot_leave_the_repository() -> None:
    """`/octo/widgets/../../evil` starts with the repository's path but a browser resolves
    it to `/evil`: refused however the dots and slashes are encoded."""
    for bad in (
        f"{OURS}/../../evil/repo",
        f"{OURS}/%2e%2e/%2E%2E/evil/repo",
        f"{OURS}/.%2e/evil",
        f"{OURS}%2f..%2f..%2fevil/repo",
        f"{OURS}/./x",
        f"{OURS}/%252e%252e/%252e%252e/evil",
        f"{OURS}/..%5c..%5cevil",
    ):
        assert not allowed_url(bad, OURS), bad
    assert allowed_url(f"{OURS}/blob/main/a..b/.github/x.py", OURS)
    src = (
        f"[a]({OURS}/../../evil/repo) [b]({OURS}/%2e%2e/%2e%2e/evil/repo)\n\n"
        f"![g]({OURS}/../../evil/r/raw/main/p.png)\n"
    )
    out = render(src, server_url=SERVER, repository=REPO)
    assert_inert(out)
    assert "<a " not in out and "<img" not in out
    assert f"<code>{OURS}/../../evil/repo</code>" in out


def test_bidi_controls_are_neutralised() -> None:
    src = "Looks fine: \u202eexe.txt and \u2066isolated\u2069 \u200f\n"
    out = render(src, server_url=SERVER, repository=REPO)
    assert not re.search("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]", out)
    assert "\ufffdexe.txt" in out


def test_a_quoted_address_keeps_its_quotes_out_of_the_code() -> None:
    out = render('See "https://x.test/p.png" here', server_url=SERVER, repository=REPO)
    assert "<code>https://x.test/p.png</code>" in out and "&quot;</code>" not in out


def test_a_long_word_renders_at_once_and_a_url_after_it_stays_code() -> None:
    """A final message is the model's: a run of letters once cost the bare-address search
    the square of its length (3 s at 20,000 letters), trying every letter as the start of
    a scheme: 200,000 letters (under a raised length cap) would take minutes."""
    word = "a" * 100_000
    text = f"{word} {word}http://evil.test/x"
    out = render(text, server_url=SERVER, repository=REPO, limit=len(text))
    assert "<code>" in out and "http://evil.test/x</code>" in out
    assert 'href="http://evil' not in out
