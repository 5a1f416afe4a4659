"""The one HTTP seam (runner/http.py): the headers a request carries, the wait a server
asks for, httpx's failures turned into the runner's own errors (naming where, never a
secret of the URL), and bodies read within their caps, against a real loopback server."""

from __future__ import annotations

import email.utils
import gzip

import httpx
import pytest

from runner import http
from runner.errors import CONNECT_FAILED, ModelError, ModelNoAnswer, NoAnswer
from runner.http import provider_headers, request_headers, retry_after_s
from tests.support.fixtures import LoopbackFactory, ThreadFactory
from tests.support.loopback import reply_http_error, reply_raw

BODY = {"model": "m", "input": [], "stream": True}
"""A request the loopback server takes (it answers anything else with a 400)."""


def test_retry_after_forms() -> None:
    assert retry_after_s(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s(httpx.Headers({"retry-after": "7"})) == 7.0
    date = email.utils.formatdate(1000.0 + 30, usegmt=True)
    assert retry_after_s(httpx.Headers({"retry-after": date}), now=1000.0) == 30.0
    assert retry_after_s(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after_s(httpx.Headers({})) is None
    # retry-after-ms wins: it is the more precise of the two.
    assert retry_after_s(httpx.Headers({"retry-after-ms": "10", "retry-after": "9"})) == 0.01


def test_auth_none_sends_no_key_and_key_beats_configured_header() -> None:
    assert provider_headers(
        http_headers={"x": "1"}, env_http_headers={}, env_key="K", auth="none", env={"K": "secret"}
    ) == ({"x": "1"}, None)
    headers, _ = provider_headers(
        http_headers={"api-key": "spoof"},
        env_http_headers={},
        env_key="K",
        auth="api-key",
        env={"K": "real"},
    )
    assert headers == {"api-key": "real"}


def test_the_key_replaces_a_configured_header_in_any_case() -> None:
    """A configured `Authorization` went out beside the key's, as a second value."""
    out = request_headers({"Authorization": "Bearer spoof", "x-a": "1"}, "real", accept="a")
    assert httpx.Headers(out).get_list("authorization") == ["Bearer real"]
    assert out["x-a"] == "1" and out["accept"] == "a"
    assert request_headers({"Authorization": "Bearer own"}, None) == {"Authorization": "Bearer own"}
    headers, bearer = provider_headers(
        http_headers={"API-KEY": "spoof"},
        env_http_headers={"OpenAI-Project": "PROJ"},
        env_key="K",
        auth="api-key",
        env={"K": "real", "PROJ": ""},
    )
    assert httpx.Headers(headers).get_list("api-key") == ["real"] and bearer is None
    assert "OpenAI-Project" not in headers  # set but empty: not sent


def test_a_failed_connection_names_the_request_without_the_urls_secrets() -> None:
    request = httpx.Request("POST", "http://user:pw-123@h.invalid/v1/responses?key=q-456")
    err = http.transport_error(
        httpx.ConnectError("All connection attempts failed", request=request)
    )
    assert isinstance(err, ModelNoAnswer) and err.code == CONNECT_FAILED and err.retryable
    assert str(err) == (
        "ConnectError: All connection attempts failed (POST http://h.invalid/v1/responses)"
    )
    loose = http.transport_error(httpx.ReadTimeout("timed out"))  # no request attached
    assert str(loose) == "ReadTimeout: timed out" and loose.code is None


@pytest.mark.anyio
async def test_a_connection_closed_unanswered_may_be_resent_at_once(
    loopback: LoopbackFactory,
) -> None:
    srv = await loopback([reply_raw(b"")], strict=False)
    client = http.make_client(base_url=srv.base_url)
    try:
        with pytest.raises(ModelNoAnswer) as info:
            async with http.stream(client, "POST", srv.responses_url, json=BODY):
                pass
    finally:
        await client.aclose()
    assert info.value.code == http.CLOSED_UNREAD
    assert f"(POST {srv.responses_url})" in str(info.value)


@pytest.mark.anyio
async def test_error_bodies_are_read_decoded_and_capped(loopback: LoopbackFactory) -> None:
    huge = b"e" * (3 * http.ERROR_BODY_BYTES)
    srv = await loopback(
        [
            reply_http_error(500, huge),
            reply_http_error(502, gzip.compress(huge), {"content-encoding": "gzip"}),
            reply_http_error(503, b"\x00\x01", {"content-encoding": "br"}),
        ],
        strict=False,
    )
    client = http.make_client(base_url=srv.base_url)
    got = []
    try:
        for _ in range(3):
            async with http.stream(client, "POST", srv.responses_url, json=BODY) as resp:
                got.append((resp.status_code, await http.read_capped(resp)))
    finally:
        await client.aclose()
    assert got[0] == (500, "e" * http.ERROR_BODY_BYTES)
    assert got[1] == (502, "e" * http.ERROR_BODY_BYTES)  # decoded, then capped
    assert got[2][0] == 503 and "[error body not read:" in got[2][1] and "'br'" in got[2][1]


@pytest.mark.anyio
async def test_read_limited_stops_past_its_limit(loopback: LoopbackFactory) -> None:
    srv = await loopback(
        [reply_http_error(200, b"x" * 1000), reply_http_error(200, b"x" * 1001)], strict=False
    )
    client = http.make_client(base_url=srv.base_url)
    try:
        bodies = []
        for _ in range(2):
            async with http.stream(client, "POST", srv.responses_url, json=BODY) as resp:
                bodies.append(await http.read_limited(resp, 1000))
    finally:
        await client.aclose()
    assert bodies == [b"x" * 1000, None]


def test_a_rest_call_without_an_answer_is_no_answer_not_a_model_error(
    loopback_thread: ThreadFactory,
) -> None:
    srv = loopback_thread(
        [reply_raw(b""), reply_http_error(404, {"message": "Not Found"})], strict=False
    )
    with http.rest_client(srv.base_url, {"authorization": "token t"}) as client:
        with pytest.raises(NoAnswer) as info:
            http.rest_request(client, "POST", "/responses", json=BODY)
        assert not isinstance(info.value, ModelError) and info.value.retryable
        assert str(info.value) == "RemoteProtocolError"
        resp = http.rest_request(client, "POST", "/responses", json=BODY)
    assert resp.status_code == 404 and resp.json() == {"message": "Not Found"}
