"""The one place an `httpx.AsyncClient` is built.

One client per provider keeps one pool of kept-alive connections, so a thread's requests
reuse a warm connection instead of paying a handshake each time (Codex opens a new one per
request). Tests point `base_url` at a loopback server; nothing is monkeypatched.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0


def make_client(
    *,
    headers: Mapping[str, str] | None = None,
    max_connections: int = 32,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        headers=dict(headers or {}),
        timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        limits=httpx.Limits(max_connections=max_connections,
                            max_keepalive_connections=max_connections),
        transport=transport,
        trust_env=False,
        follow_redirects=False,
    )
