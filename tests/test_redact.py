"""Redaction (runner/redact.py): a registered secret is masked in every spelling a model
could print it in, in text, JSON-like data and bytes, and in files read in chunks where a
secret may straddle two of them."""

from __future__ import annotations

import base64
import json
import urllib.parse

import pytest

from runner.redact import MASK, MIN_SECRET_LEN, Redactor, forms
from runner.reports.viewer_data import embed_json
from tests.support.redaction import b64_cores

SECRET = "s3cr3t-Value/with+chars&more=="


@pytest.mark.parametrize("prefix", ["", "x", "xy", "xyz"])
def test_every_encoding_is_redacted(prefix: str) -> None:
    r = Redactor([SECRET])
    raw = (prefix + SECRET + " tail").encode()
    texts = [
        SECRET,
        SECRET.encode().hex(),
        SECRET.encode().hex().upper(),
        urllib.parse.quote(SECRET, safe=""),
        urllib.parse.quote_plus(SECRET),
        json.dumps({"k": SECRET + '"'})[7:-2],
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
    ]
    for text in texts:
        out = r(f"before {text} after")
        assert MASK in out, text
        for core in b64_cores(SECRET.encode()):
            assert core not in out
        assert SECRET not in out
    assert r.bytes(b"\xff\xfe" + SECRET.encode() + b"\x00") == b"\xff\xfe" + MASK.encode() + b"\x00"


def test_short_values_and_plain_text_are_left_alone() -> None:
    r = Redactor(["short", ""])
    assert not r
    assert r("short text") == "short text"
    r = Redactor([SECRET])
    assert r("nothing secret here, commit 0123456789abcdef") == (
        "nothing secret here, commit 0123456789abcdef"
    )


def test_a_secret_with_json_and_html_characters_is_masked_as_report_html_embeds_it() -> None:
    """report.html embeds run data as JSON with `<`, `>` and `&` escaped, and a transcript
    holds tool arguments as a JSON string inside JSON: every spelling must be masked."""
    secret = 'pa"ss<w>&rd\\x-\u00e9-0123456789'
    data = {
        "final": f"the key is {secret}",
        "arguments": json.dumps({"cmd": f"echo '{secret}'"}),
        "nested": json.dumps(json.dumps(secret)),
    }
    for page in (embed_json(data), json.dumps(data), json.dumps(data, ensure_ascii=False)):
        masked = Redactor([secret])(page)
        back = json.loads(masked)
        texts = [back["final"], json.loads(back["arguments"])["cmd"], back["nested"]]
        texts.append(json.loads(json.loads(back["nested"])))
        assert all(secret not in t for t in texts), masked
        assert "[REDACTED]" in back["final"]


def test_the_reversed_secret_and_data_keys_are_masked() -> None:
    r = Redactor()
    r.add("short")
    assert not r
    r.add(SECRET)
    assert r(f"rev: {SECRET[::-1]}") == f"rev: {MASK}"
    data = {SECRET: [1, f"x{SECRET}", {"k": None}], "n": 3}
    assert r.data(data) == {MASK: [1, f"x{MASK}", {"k": None}], "n": 3}
    assert all(len(f) >= MIN_SECRET_LEN for f in forms("abcdefgh"))


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 3, 7, 64])
def test_a_secret_split_across_chunks_is_still_masked(size: int) -> None:
    r = Redactor([SECRET])
    data = b"head " + SECRET.encode() + b" mid \xff " + SECRET.encode().hex().encode() + b" end"
    out = b"".join(r.stream(chunked(data, size)))
    assert out == b"head " + MASK.encode() + b" mid \xff " + MASK.encode() + b" end"
    assert r.contains(chunked(data, size))
    assert not r.contains(chunked(b"head mid end" * 20, size))


def test_stream_holds_back_no_more_than_the_longest_spelling() -> None:
    r = Redactor([SECRET])
    keep = max(len(f.encode()) for f in forms(SECRET))
    pieces = list(r.stream([b"a" * 1000, b"b" * 1000]))
    assert len(pieces[0]) >= 1000 - keep and b"".join(pieces) == b"a" * 1000 + b"b" * 1000
    assert b"".join(Redactor().stream([b"x", b"y"])) == b"xy"  # nothing registered
