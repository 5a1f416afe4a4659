"""Removes known secret values from anything that leaves the runner: events, reports,
progress lines, commit messages and the files of a commit.

Secrets are registered by value (provider keys, push tokens and the task file's
`secrets:`, read from the environment); the plain value and its common encodings are
replaced, because a model that prints a key through `base64`, `xxd -p`, a URL or a JSON
string has leaked it just the same.
"""

from __future__ import annotations

import base64
import builtins
import json
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import Any

MASK = "[REDACTED]"
MIN_SECRET_LEN = 8
"""Shorter values are not redacted: they would match ordinary text everywhere."""


def forms(secret: str) -> set[str]:
    """The spellings of `secret` worth looking for."""
    raw = secret.encode()
    out = {
        secret,
        secret[::-1],  # `rev`: the cheapest disguise of all
        raw.hex(),
        raw.hex().upper(),
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
    }
    # A JSON string inside a JSON string, up to three deep (report.html holds a transcript
    # item's arguments, a JSON string, inside the item's JSON, inside the page's data), and
    # each as report.html embeds it (`<`, `>` and `&` as `\\u` escapes).
    level = {secret}
    for _ in range(3):
        level = {json.dumps(t, ensure_ascii=a)[1:-1] for t in level for a in (True, False)}
        for text in level:
            out.add(text)
            out.add(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        out |= {whole, whole.rstrip("=")}
        # Inside a longer text the secret may start at any offset modulo 3; the
        # characters that depend on its bytes alone are the same whatever surrounds it.
        for k in (0, 1, 2):
            enc = encode(b"\0" * k + raw).decode().rstrip("=")
            core = enc[(4 if k else 0) : len(enc) - 4]
            if len(core) >= MIN_SECRET_LEN:
                out.add(core)
    return {f for f in out if len(f) >= MIN_SECRET_LEN}


class Redactor:
    def __init__(self, secrets: list[str] | None = None) -> None:
        self._needles: list[str] = []
        self._bneedles: list[bytes] = []
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_LEN:
            return
        self._needles = sorted(set(self._needles) | forms(secret), key=len, reverse=True)
        self._bneedles = [n.encode() for n in self._needles]

    def __call__(self, text: str) -> str:
        for needle in self._needles:
            if needle in text:
                text = text.replace(needle, MASK)
        return text

    def data(self, value: Any) -> Any:
        """Every string in a JSON-like structure (keys too) redacted: value by value, so
        a secret holding a quote or a backslash, escaped in JSON text, is still found."""
        if isinstance(value, str):
            return self(value)
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, dict):
            return {self.data(k): self.data(v) for k, v in value.items()}
        return value

    def bytes(self, data: bytes) -> bytes:
        """The same for file contents and names, whatever their encoding."""
        mask = MASK.encode()
        for needle in self._bneedles:
            if needle in data:
                data = data.replace(needle, mask)
        return data

    def stream(self, chunks: Iterable[builtins.bytes]) -> Iterator[builtins.bytes]:
        """`bytes` over a file read in chunks, in memory bounded by the chunk size: a
        secret split across two chunks is held back until it can be seen whole."""
        keep = max((len(n) for n in self._bneedles), default=1) - 1
        pending = b""
        for chunk in chunks:
            pending += chunk
            cut = self._safe_cut(pending, len(pending) - keep)
            if cut > 0:
                yield self.bytes(pending[:cut])
                pending = pending[cut:]
        if pending:
            yield self.bytes(pending)

    def contains(self, chunks: Iterable[builtins.bytes]) -> bool:
        """Whether a file read in chunks holds a secret, in bounded memory."""
        keep = max((len(n) for n in self._bneedles), default=1) - 1
        prev = b""
        for chunk in chunks:
            buf = prev + chunk
            if any(n in buf for n in self._bneedles):
                return True
            prev = buf[max(0, len(buf) - keep) :] if keep else b""
        return False

    def _safe_cut(self, data: builtins.bytes, cut: int) -> int:
        """`cut` moved back until no needle straddles it."""
        moved = cut > 0
        while moved:
            moved = False
            for n in self._bneedles:
                s = data.find(n, max(0, cut - len(n) + 1), cut + len(n) - 1)
                if s != -1 and s < cut < s + len(n):
                    cut, moved = s, True
        return max(cut, 0)

    def __bool__(self) -> bool:
        return bool(self._needles)
