"""Removes known secret values from anything that leaves the runner (events, reports).

Secrets are registered by value (provider keys read from the environment); the plain
value and its common encodings are replaced, because a model that prints a key through
`base64` or a URL has leaked it just the same.
"""

from __future__ import annotations

import base64
import urllib.parse

MASK = "[REDACTED]"
MIN_SECRET_LEN = 8


class Redactor:
    def __init__(self, secrets: list[str] | None = None) -> None:
        self._needles: list[str] = []
        for s in secrets or []:
            self.add(s)

    def add(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_LEN:
            return
        raw = secret.encode()
        forms = {secret, urllib.parse.quote(secret, safe=""), raw.hex(),
                 base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
        # base64 of the secret at another alignment inside a longer text: strip padding.
        forms |= {f.rstrip("=") for f in forms}
        self._needles = sorted(set(self._needles) | {f for f in forms if f}, key=len,
                               reverse=True)

    def __call__(self, text: str) -> str:
        for needle in self._needles:
            if needle in text:
                text = text.replace(needle, MASK)
        return text

    def __bool__(self) -> bool:
        return bool(self._needles)
