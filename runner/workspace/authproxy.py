"""Authenticating git's HTTP requests inside the runner, so no child ever holds the token.

Under `danger-full-access` another run's command is a process of the same user: it can
read `/proc/<pid>/environ` and open `/proc/<pid>/fd/*` of every git the runner starts
(git re-executes itself, so nothing can make those processes non-dumpable). A token in a
git child's environment, config, argv, pipe or credential helper is therefore readable.
Instead git talks plain HTTP to a one-request-per-connection forwarder on 127.0.0.1 that
lives in the runner (non-dumpable, see `secret_env`), and only the forwarder adds the
`Authorization` header on the way to the real remote.

The forwarder carries the token for one repository and one protocol, and nothing else: it
answers only git's smart-HTTP requests (`ROUTES`), compared with the request target as
sent, byte for byte, and it builds the upstream URL by appending that fixed suffix to the
configured URL. Any other path (`..`, `%2e`, `//`, an extra query parameter, the host's
API) is refused before anything is sent. And it answers only connections made by the git
it started (`peer`), since its address is in git's argv, readable by a same-user process.
"""

from __future__ import annotations

import base64
import hmac
import secrets
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

import anyio
from anyio.abc import SocketStream

from runner.errors import StreamFailure
from runner.frozen import frozen
from runner.workspace.peer import served_by_tree

if TYPE_CHECKING:
    from runner.http import AsyncClient

_MAX_HEAD = 64 * 1024
_PASSED_REQUEST = ("content-type", "content-encoding", "accept", "accept-encoding", "git-protocol")
_PASSED_RESPONSE = ("content-type", "content-encoding", "cache-control", "www-authenticate")
_GIT_USER_AGENT = "git/runner-forwarder"

ROUTES = frozenset(
    {
        ("GET", "/info/refs?service=git-upload-pack"),
        ("GET", "/info/refs?service=git-receive-pack"),
        ("POST", "/git-upload-pack"),
        ("POST", "/git-receive-pack"),
    }
)
"""The requests of git's smart HTTP protocol, as (method, target after the repository).
Nothing else needs the token: the dumb protocol, LFS and the host's API are not ours."""


def route(method: str, target: str, prefix: str) -> str | None:
    """The suffix to append to the remote's URL for this request, or None to refuse it.
    `target` is the request target exactly as received: nothing is decoded or normalised
    first, so an exact match leaves no spelling of another path (`/../`, `%2e%2e`,
    `%2f`, `//`, `\\`, `?service=x&y`) a way through."""
    head, rest = target[: len(prefix)], target[len(prefix) :]
    if not hmac.compare_digest(head.encode(), prefix.encode()):
        return None
    return rest if (method, rest) in ROUTES else None


@frozen
class Finished:
    returncode: int
    stdout: bytes
    stderr: bytes


def basic_auth(token: str) -> str:
    """The header value GitHub and most hosts accept for a token over HTTPS."""
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


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
    # httpx is loaded only when a push goes through the forwarder: `validate` and
    # runs that never push do not pay for it (about 35 ms).
    from runner.http import forwarding_client

    client = forwarding_client()
    git_pid: list[int] = []
    async with client, listener, anyio.create_task_group() as tg:
        handler = partial(
            _forward, client=client, upstream=upstream, auth=auth, prefix=prefix, git_pid=git_pid
        )
        tg.start_soon(listener.serve, handler)
        try:
            with anyio.fail_after(limit_s):
                result.append(await _run(argv_for(local[0]), cwd, env, git_pid))
        except TimeoutError:
            result.append(Finished(-1, b"", b"timeout"))
        tg.cancel_scope.cancel()


async def _run(argv: list[str], cwd: str | None, env: dict[str, str], pid: list[int]) -> Finished:
    """`anyio.run_process`, with git's pid known to the forwarder before git connects."""
    out: list[bytes] = []
    err: list[bytes] = []
    async with await anyio.open_process(argv, cwd=cwd, env=env) as proc:
        pid.append(proc.pid)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        await proc.stdin.aclose()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, proc.stdout, out)
            tg.start_soon(_drain, proc.stderr, err)
        code = await proc.wait()
    return Finished(code, b"".join(out), b"".join(err))


async def _drain(stream: anyio.abc.ByteReceiveStream, into: list[bytes]) -> None:
    async for chunk in stream:
        into.append(chunk)


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
    stream: SocketStream,
    *,
    client: AsyncClient,
    upstream: str,
    auth: str,
    prefix: str,
    git_pid: list[int],
) -> None:
    from runner.http import HTTPError

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
        suffix = route(method, target, prefix)
        if suffix is None:
            await stream.send(b"HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n")
            return
        if not _from_git(stream, git_pid):
            await stream.send(b"HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\n")
            return
        if headers.get("expect", "").lower() == "100-continue":
            await stream.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        out = {k: v for k, v in headers.items() if k in _PASSED_REQUEST}
        out["authorization"] = auth
        out["user-agent"] = headers.get("user-agent", _GIT_USER_AGENT)
        body = _body(stream, rest, headers) if method == "POST" else None
        request = client.build_request(method, upstream + suffix, headers=out, content=body)
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
        except (anyio.BrokenResourceError, HTTPError, StreamFailure):
            return  # git sees the answer cut short (a refused encoding: runner/http.py)
        finally:
            await response.aclose()


def _from_git(stream: SocketStream, git_pid: list[int]) -> bool:
    client_port = stream.extra(anyio.abc.SocketAttribute.remote_port)
    server_port = stream.extra(anyio.abc.SocketAttribute.local_port)
    return bool(git_pid) and served_by_tree(client_port, server_port, git_pid[0])


def local_urls(text: str, locals_: Sequence[str], url: str) -> str:
    """git's messages with the forwarder's address put back to the remote's."""
    for loc in locals_:
        text = text.replace(loc, url)
    return text
