"""Authenticating git's HTTP requests inside the runner, so no child ever holds the token.

Under `danger-full-access` another run's command is a process of the same user: it can
read `/proc/<pid>/environ` and open `/proc/<pid>/fd/*` of every git the runner starts
(git re-executes itself, so nothing can make those processes non-dumpable). A token in a
git child's environment, config, argv, pipe or credential helper is therefore readable.
Instead git talks plain HTTP to a one-request-per-connection forwarder on 127.0.0.1 that
lives in the runner (non-dumpable, see `secret_env`), and only the forwarder adds the
`Authorization` header on the way to the real remote.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial

import anyio
from anyio.abc import SocketStream

from runner.http import AsyncClient, HTTPError, forwarding_client

_MAX_HEAD = 64 * 1024
_PASSED_REQUEST = ("content-type", "content-encoding", "accept", "accept-encoding", "git-protocol")
_PASSED_RESPONSE = ("content-type", "content-encoding", "cache-control", "www-authenticate")
_GIT_USER_AGENT = "git/runner-forwarder"


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: bytes
    stderr: bytes


def basic_auth(token: str) -> str:
    """The header value GitHub and most hosts accept for a token over HTTPS."""
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


def is_http(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def run_git_via_forwarder(
    argv_for: Callable[[str], list[str]],
    *,
    url: str,
    token: str,
    cwd: str | None,
    env: dict[str, str],
    timeout: float | None,
) -> tuple[Finished, str]:
    """Run git (argv from `argv_for(local_url)`) against a forwarder for `url`; returns
    git's result and the local URL it was given (to take out of messages)."""
    result: list[Finished] = []
    local: list[str] = []
    anyio.run(
        _serve_and_run,
        argv_for,
        url.rstrip("/"),
        basic_auth(token),
        cwd,
        env,
        timeout,
        result,
        local,
    )
    return result[0], local[0]


async def _serve_and_run(
    argv_for: Callable[[str], list[str]],
    upstream: str,
    auth: str,
    cwd: str | None,
    env: dict[str, str],
    limit_s: float | None,
    result: list[Finished],
    local: list[str],
) -> None:
    prefix = "/" + secrets.token_hex(16)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    local.append(f"http://127.0.0.1:{port}{prefix}")
    client = forwarding_client()
    async with client, listener, anyio.create_task_group() as tg:
        handler = partial(_forward, client=client, upstream=upstream, auth=auth, prefix=prefix)
        tg.start_soon(listener.serve, handler)
        argv = argv_for(local[0])
        try:
            with anyio.fail_after(limit_s):
                proc = await anyio.run_process(argv, cwd=cwd, env=env, check=False)
            result.append(Finished(proc.returncode, proc.stdout, proc.stderr))
        except TimeoutError:
            result.append(Finished(-1, b"", b"timeout"))
        tg.cancel_scope.cancel()


async def _read_head(stream: SocketStream) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > _MAX_HEAD:
            raise ValueError("request head too large")
        buf += await stream.receive()
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


async def _body(stream: SocketStream, rest: bytes, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The request body, de-chunked, streamed (a pushed pack may be large)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        buf = rest
        while True:
            while b"\r\n" not in buf:
                buf += await stream.receive()
            size_line, _, buf = buf.partition(b"\r\n")
            size = int(size_line.split(b";")[0], 16)
            while len(buf) < size + 2:
                buf += await stream.receive()
            if size == 0:
                return
            yield buf[:size]
            buf = buf[size + 2 :]
    left = int(headers.get("content-length", "0") or 0)
    if rest:
        yield rest[:left]
        left -= len(rest[:left])
    while left > 0:
        chunk = await stream.receive()
        yield chunk[:left]
        left -= len(chunk)


async def _forward(
    stream: SocketStream, *, client: AsyncClient, upstream: str, auth: str, prefix: str
) -> None:
    async with stream:
        try:
            head, rest = await _read_head(stream)
            line, *lines = head.decode("latin-1").split("\r\n")
            method, target, _ = line.split(" ", 2)
            headers = {}
            for h in lines:
                name, _, value = h.partition(":")
                headers[name.strip().lower()] = value.strip()
        except (ValueError, anyio.EndOfStream, anyio.BrokenResourceError):
            return
        if not target.startswith(prefix + "/") or method not in ("GET", "POST"):
            await stream.send(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n")
            return
        if headers.get("expect", "").lower() == "100-continue":
            await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        out = {k: v for k, v in headers.items() if k in _PASSED_REQUEST}
        out["authorization"] = auth
        out["user-agent"] = headers.get("user-agent", _GIT_USER_AGENT)
        body = _body(stream, rest, headers) if method == "POST" else None
        request = client.build_request(
            method, upstream + target[len(prefix) :], headers=out, content=body
        )
        try:
            response = await client.send(request, stream=True)
        except HTTPError as exc:
            msg = f"forwarding to the remote failed: {type(exc).__name__}".encode()
            await stream.send(
                b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Type: text/plain\r\n"
                b"Content-Length: " + str(len(msg)).encode() + b"\r\n\r\n" + msg
            )
            return
        try:
            status = f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n"
            kept = [f"{k}: {v}\r\n" for k, v in response.headers.items() if k in _PASSED_RESPONSE]
            await stream.send((status + "".join(kept) + "Connection: close\r\n\r\n").encode())
            async for chunk in response.aiter_raw():
                await stream.send(chunk)
        except (anyio.BrokenResourceError, HTTPError):
            return
        finally:
            await response.aclose()


def local_urls(text: str, locals_: Sequence[str], url: str) -> str:
    """git's messages with the forwarder's address put back to the remote's."""
    for loc in locals_:
        text = text.replace(loc, url)
    return text
