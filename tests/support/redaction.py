"""What a redacted text must no longer hold, computed here and not by the code under test
(the secret-handling tests and runner/redact.py's own use it)."""

from __future__ import annotations

import base64


def b64_cores(raw: bytes) -> list[str]:
    """What base64 of a text holding `raw` at any offset must contain (computed here, not
    by the code under test)."""
    out = []
    for k in range(3):
        enc = base64.b64encode(b"ab"[:k] + raw).decode().rstrip("=")
        out.append(enc[4 if k else 0 : len(enc) - 4])
    return out
