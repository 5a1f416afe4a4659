"""The one HTTP seam: every HTTP client of the runner is built here (model providers,
MCP servers over HTTP, the GitHub REST API), and httpx's exceptions become the runner's
own here (`ModelNoAnswer` for a model request, `NoAnswer` for a REST one), so no other
module imports httpx.

One client per provider keeps one pool of kept-alive connections, so a thread's requests
reuse a warm connection instead of paying a handshake each time (Codex opens a new one per
request). Tests point `base_url` at a loopback server; nothing is monkeypatched.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterator,
    Mapping,
)
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import httpx

from runner.decoding import CHUNK, Decoder
from runner.errors import (
    CONNECT_FAILED,
    BodyTooLarge,
    ModelNoAnswer,
    NoAnswer,
    RemoteError,
    StreamFailure,
)
from runner.sizes import MIB
from runner.sse import MAX_STREAM_BYTES, Framer
from runner.vocabulary import Auth

Response = httpx.Response
AsyncClient = httpx.AsyncClient
AsyncTransport = httpx.AsyncBaseTransport
HTTPError = httpx.HTTPError
"""The types callers name; they come from here, not from httpx."""

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0

MCP_BODY_BYTES = 16 * MIB
"""The most an MCP server's answer may unfold to: twice the item cap (`sizes.ITEM_BYTES`),
room for a tool result the model could still be given once JSON-escaped."""
REST_BODY_BYTES = 32 * MIB
"""The most a GitHub REST answer may unfold to: far above any page or diff it serves."""


class _Body:
    """One response's raw bytes decoded by `Decoder` a bounded piece at a time, counted
    against `cap`. The encoding is judged when the body is first read, not when the
    headers come, so an error answer's status still reaches its caller."""

    def __init__(
        self, header: str, cap: int | None, wrap: Callable[[RemoteError], Exception]
    ) -> None:
        self._header = header
        self._cap = cap
        self._wrap = wrap
        self._decoder: Decoder | None = None
        self._seen = 0

    def feed(self, raw: bytes) -> Iterator[bytes]:
        yield from self._counted(lambda d: d.feed(raw))

    def end(self) -> Iterator[bytes]:
        yield from self._counted(lambda d: d.end())

    def _counted(self, step: Callable[[Decoder], Iterator[bytes]]) -> Iterator[bytes]:
        try:
            if self._decoder is None:
                self._decoder = Decoder(self._header)
            for piece in step(self._decoder):
                self._seen += len(piece)
                if self._cap is not None and self._seen > self._cap:
                    raise BodyTooLarge(
                        f"the answer is larger than {self._cap // MIB} MiB as decoded; "
                        "the rest was not read"
                    )
                yield piece
        except RemoteError as exc:
            raise self._wrap(exc) from None


def _unwrapped(exc: RemoteError) -> Exception:
    return exc


def _take_body(headers: Any, cap: int | None, wrap: Callable[[RemoteError], Exception]) -> _Body:
    """The decoder for a response whose headers are `headers`, which from now on no longer
    name the encoding: the body the client reads is the decoded one."""
    header = ", ".join(headers.get_list("content-encoding"))
    if header:
        del headers["content-encoding"]
        headers.pop("content-length", None)
    return _Body(header, cap, wrap)


async def _pieces(raw: AsyncIterable[bytes], body: _Body) -> AsyncIterator[bytes]:
    """`raw` decoded through `body`: what both httpx and httpx2 async streams yield."""
    async for chunk in raw:
        for piece in body.feed(chunk):
            yield piece
    for piece in body.end():
        yield piece


class _DecodedAsync(httpx.AsyncByteStream):
    def __init__(self, raw: httpx.AsyncByteStream, body: _Body) -> None:
        self._raw = raw
        self._body = body

    def __aiter__(self) -> AsyncIterator[bytes]:
        return _pieces(self._raw, self._body)

    async def aclose(self) -> None:
        await self._raw.aclose()


class _DecodedSync(httpx.SyncByteStream):
    def __init__(self, raw: httpx.SyncByteStream, body: _Body) -> None:
        self._raw = raw
        self._body = body

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._raw:
            yield from self._body.feed(chunk)
        yield from self._body.end()

    def close(self) -> None:
        self._raw.close()


def _async_hook(cap: int | None) -> Callable[[httpx.Response], Any]:
    """The response hook every async httpx client of the runner has: httpx never decodes a
    body itself (it inflates a whole network chunk at once, so a `gzip, gzip` body of 1 kB
    became gigabytes before any cap saw a byte). A hook rather than a transport, so a
    proxy the environment names is covered too."""

    async def hook(resp: httpx.Response) -> None:
        if not resp.is_stream_consumed:  # a response made in memory is already decoded
            body = _take_body(resp.headers, cap, _unwrapped)
            assert isinstance(resp.stream, httpx.AsyncByteStream)
            resp.stream = _DecodedAsync(resp.stream, body)

    return hook


def _sync_hook(cap: int | None) -> Callable[[httpx.Response], None]:
    """`_async_hook` for the blocking clients."""

    def hook(resp: httpx.Response) -> None:
        if not resp.is_stream_consumed:
            body = _take_body(resp.headers, cap, _unwrapped)
            assert isinstance(resp.stream, httpx.SyncByteStream)
            resp.stream = _DecodedSync(resp.stream, body)

    return hook


def request_headers(
    headers: Mapping[str, str] | None, api_key: str | None, **fixed: str
) -> dict[str, str]:
    """Fixed protocol headers, then the provider's own, then the key as a Bearer token
    (last, so a configured header can never replace or leak beside it)."""
    out = dict(fixed)
    out.update(headers or {})
    if api_key:
        _set_header(out, "authorization", f"Bearer {api_key}")
    return out


def _set_header(out: dict[str, str], name: str, value: str) -> None:
    """`name` (lower case) set to `value`, every other spelling of it dropped: header
    names are case-insensitive, so a configured `Authorization` left beside it would go
    out as a second value."""
    for key in [k for k in out if k.lower() == name]:
        del out[key]
    out[name] = value


def provider_headers(
    *,
    http_headers: Mapping[str, str],
    env_http_headers: Mapping[str, str],
    env_key: str | None,
    auth: Auth,
    env: Mapping[str, str],
) -> tuple[dict[str, str], str | None]:
    """A provider's headers in this environment, and the key to send as a Bearer token.

    `env_http_headers` maps a header to an environment variable, sent only when the
    variable is set and not empty (as Codex does, so `OpenAI-Organization` appears only
    for users who have one). Azure takes its key in an `api-key` header instead of
    `Authorization`; it goes last so no configured header can replace it.
    """
    out = dict(http_headers)
    for header, var in env_http_headers.items():
        value = env.get(var)
        if value:
            out[header] = value
    key = env.get(env_key) if env_key and auth != "none" else None
    if auth == "api-key":
        if key:
            _set_header(out, "api-key", key)
        return out, None
    return out, key or None


def make_client(
    *,
    headers: Mapping[str, str] | None = None,
    max_connections: int = 32,
    transport: AsyncTransport | None = None,
    base_url: str = "",
) -> httpx.AsyncClient:
    # A client only ever talks to its provider's base URL (redirects are not followed):
    # for a plain-http one (local engines, proxies on loopback) no TLS context is needed,
    # and loading the CA bundle for it costs ~60 ms of every start.
    plain = base_url.startswith("http://")
    return httpx.AsyncClient(
        verify=not plain,
        headers={"accept-encoding": ACCEPT_ENCODING, **(headers or {})},
        timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S),
        limits=httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        ),
        transport=transport,
        trust_env=False,
        follow_redirects=False,
        event_hooks={"response": [_async_hook(None)]},
    )


ACCEPT_ENCODING = "gzip, deflate"
"""What `body_chunks` undoes: httpx would offer br and zstd too when they are installed."""


async def body_chunks(resp: httpx.Response) -> AsyncGenerator[bytes, None]:
    """A response's body, decoded, in pieces of at most `decoding.CHUNK` bytes.

    Every body the runner reads from a model server comes through here, never through
    httpx's own decoding (`aiter_bytes`), which inflates a whole network chunk at once:
    the caps count these pieces, so a compressed bomb meets them before it meets memory.
    An encoding the runner does not undo raises `EncodingRefused`. The clients made here
    have decoded it already (`_async_hook`); a client made elsewhere has not. (A response
    made in memory, as tests' mock transports make them, arrives already read and
    decoded.)"""
    if resp.is_stream_consumed:
        for at in range(0, len(resp.content), CHUNK):
            yield resp.content[at : at + CHUNK]
        return
    decoder = Decoder(resp.headers.get("content-encoding", ""))
    async for raw in resp.aiter_raw():
        for piece in decoder.feed(raw):
            yield piece
    for piece in decoder.end():
        yield piece


CLOSED_UNREAD = "closed_unread"
"""`ModelNoAnswer.code` for a connection the server closed before answering (a kept-alive
connection it had dropped): the request never reached it, so it may be sent again at once."""


def transport_error(exc: httpx.RequestError) -> ModelNoAnswer:
    """The runner's error for `exc`, naming the URL it was sent to (httpx's own message
    names neither the URL nor the host: "All connection attempts failed")."""
    unread = isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" in str(exc)
    code = CLOSED_UNREAD if unread else None
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        code = CONNECT_FAILED  # refused, DNS, TLS handshake: no answer from anyone
    where = ""
    with contextlib.suppress(RuntimeError):  # a request is attached to every send error
        url = exc.request.url.copy_with(query=None, userinfo=b"")
        where = f" ({exc.request.method} {url})"
    return ModelNoAnswer(f"{type(exc).__name__}: {exc}{where}", code=code)


@asynccontextmanager
async def stream(
    client: httpx.AsyncClient, method: str, url: str, **kwargs: Any
) -> AsyncIterator[httpx.Response]:
    """`client.stream(...)`, with every network failure (sending, or reading the body
    inside the block) raised as a `ModelNoAnswer`."""
    try:
        async with client.stream(method, url, **kwargs) as resp:
            yield resp
    except httpx.RequestError as exc:
        raise transport_error(exc) from exc


def retry_after_s(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a server asks for: `retry-after-ms`, else `Retry-After` in seconds or as an
    HTTP date. None when absent or unreadable."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


async def sse_events(
    resp: httpx.Response,
    *,
    max_event_bytes: int,
    idle_s: float,
    finished: Callable[[], bool],
    max_stream_bytes: int = MAX_STREAM_BYTES,
    from_item_cap: bool = False,
) -> AsyncGenerator[tuple[str, str], None]:
    """The (event, data) pairs of a streamed body, framed with bounded event sizes. The idle
    clock restarts only on a real event, so a server sending nothing but `: keepalive`
    comments still times out (a retryable `StreamFailure`), unless `finished()` says the
    answer is already complete. Both wires read their streams through this."""
    framer = Framer(
        max_event_bytes=max_event_bytes,
        max_stream_bytes=max_stream_bytes,
        from_item_cap=from_item_cap,
    )
    idle_at = anyio.current_time() + idle_s
    async with aclosing(body_chunks(resp)) as chunks:
        while True:
            with anyio.CancelScope(deadline=idle_at) as idle:
                chunk = await anext(chunks, None)
            if idle.cancelled_caught:
                if finished():
                    return
                raise StreamFailure(
                    f"idle timeout: no event for {idle_s:g} s", code="idle_timeout", retryable=True
                )
            if chunk is None:
                return
            events = framer.feed(chunk)
            if events:
                idle_at = anyio.current_time() + idle_s
            for event in events:
                yield event


ERROR_BODY_BYTES = 64 * 1024
"""How much of an error answer is read: enough for any real message, bounded for any other."""


async def read_capped(resp: httpx.Response) -> str:
    """The start of an error answer, however long the answer is."""
    buf = bytearray()
    try:
        async with aclosing(body_chunks(resp)) as chunks:
            async for chunk in chunks:
                buf += chunk
                if len(buf) >= ERROR_BODY_BYTES:
                    break
    except StreamFailure as exc:  # an encoding refused, or a corrupt body: say so instead
        buf += f" [error body not read: {exc}]".encode()
    return bytes(buf[:ERROR_BODY_BYTES]).decode("utf-8", "replace")


async def read_limited(resp: httpx.Response, limit: int) -> bytes | None:
    """A whole unary answer, or None once it passes `limit` bytes (the rest is not read)."""
    buf = bytearray()
    async with aclosing(body_chunks(resp)) as chunks:
        async for chunk in chunks:
            buf += chunk
            if len(buf) > limit:
                return None
    return bytes(buf)


@functools.cache
def _mcp_parts() -> tuple[Callable[[RemoteError], Exception], type]:
    """httpx2's side of `_async_hook`, made on first use (httpx2 is imported only when a
    run has an MCP server over HTTP).

    The SDK turns only httpx2's stream and SSE errors into a JSON-RPC error for the
    waiting request; anything else it logs and drops, and the session waits out its
    startup timeout. So a refused body is raised as both, carrying the runner's message,
    and the session fails at once saying why."""
    import httpx2

    class Refused(httpx2.SSEError, httpx2.StreamError):
        pass

    class Decoded(httpx2.AsyncByteStream):
        def __init__(self, raw: httpx2.AsyncByteStream, body: _Body) -> None:
            self._raw = raw
            self._body = body

        def __aiter__(self) -> AsyncIterator[bytes]:
            return _pieces(self._raw, self._body)

        async def aclose(self) -> None:
            await self._raw.aclose()

    return (lambda exc: Refused(str(exc))), Decoded


@asynccontextmanager
async def mcp_client(headers: Mapping[str, str]) -> AsyncIterator[Any]:
    """The client the MCP SDK's streamable HTTP transport talks through (the SDK takes an
    httpx2 client; it leaves closing it to its owner, so this owns it). Its answers are
    decoded here, bounded by `MCP_BODY_BYTES`."""
    import httpx2

    refused, decoded = _mcp_parts()

    async def hook(resp: httpx2.Response) -> None:
        if not resp.is_stream_consumed:
            body = _take_body(resp.headers, MCP_BODY_BYTES, refused)
            resp.stream = decoded(resp.stream, body)

    async with httpx2.AsyncClient(
        headers={"accept-encoding": ACCEPT_ENCODING, **headers},
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"response": [hook]},
    ) as client:
        yield client


def rest_client(
    base_url: str, headers: Mapping[str, str], *, timeout_s: float = 30.0
) -> httpx.Client:
    """A blocking client for a REST API (the GitHub Action's steps are plain scripts).
    Unlike the model clients it honours proxy variables: hosted runners may need them."""
    return httpx.Client(
        base_url=base_url,
        timeout=timeout_s,
        headers={"accept-encoding": ACCEPT_ENCODING, **headers},
        follow_redirects=False,
        event_hooks={"response": [_sync_hook(REST_BODY_BYTES)]},
    )


def rest_request(client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    """One request; a failure to get a whole answer (the same httpx errors a model request
    turns into a `ModelNoAnswer`) is a `NoAnswer`, not a model provider's error. A body
    past `REST_BODY_BYTES`, refused or corrupt is one too, not worth resending."""
    try:
        return client.request(method, path, **kwargs)
    except httpx.RequestError as exc:
        raise NoAnswer(type(exc).__name__) from exc
    except (BodyTooLarge, StreamFailure) as exc:
        err = NoAnswer(str(exc))
        err.retryable = False
        raise err from None


def forwarding_client() -> httpx.AsyncClient:
    """For the git forwarder (`workspace.authproxy`): redirects are passed back to git,
    never followed with the token."""
    timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
    return httpx.AsyncClient(
        timeout=timeout,
        follow_redirects=False,
        event_hooks={"response": [_async_hook(None)]},
    )
