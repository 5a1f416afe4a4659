"""`runner.decoding`: a body's Content-Encoding undone in bounded pieces, and what it
refuses. Pure: bytes in, bytes out."""

from __future__ import annotations

import gzip
import zlib

import pytest

from runner.decoding import CHUNK, Decoder
from runner.errors import EncodingRefused, StreamFailure

TEXT = b"event: x\ndata: {}\n\n" * 50_000


def _decode(header: str, body: bytes, step: int = 4096) -> list[bytes]:
    dec = Decoder(header)
    pieces = [p for at in range(0, len(body), step) for p in dec.feed(body[at : at + step])]
    return pieces + list(dec.end())


def _raw_deflate(data: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return z.compress(data) + z.flush()


@pytest.mark.parametrize(
    ("header", "body"),
    [
        ("", TEXT),
        ("identity", TEXT),
        ("gzip", gzip.compress(TEXT)),
        ("X-GZIP", gzip.compress(TEXT)),
        ("deflate", zlib.compress(TEXT)),
        ("deflate", _raw_deflate(TEXT)),  # without the zlib header, as some servers send
        ("gzip", gzip.compress(TEXT[:1000]) + gzip.compress(TEXT[1000:])),  # two members
    ],
)
def test_what_a_real_server_sends_is_decoded_whole(header: str, body: bytes) -> None:
    pieces = _decode(header, body)
    assert b"".join(pieces) == TEXT
    assert max(map(len, pieces)) <= CHUNK


def test_a_bomb_comes_out_one_bounded_piece_at_a_time() -> None:
    """One small network chunk inflating to 100 MiB yields it in CHUNK-sized pieces, and
    the next piece is only made when asked for."""
    body = gzip.compress(b"\0" * (100 * 1024 * 1024))
    assert len(body) < 200_000
    pieces = Decoder("gzip").feed(body)
    first = next(pieces)
    assert len(first) == CHUNK
    assert sum(len(p) for p in pieces) + len(first) == 100 * 1024 * 1024


@pytest.mark.parametrize("header", ["gzip, gzip", "deflate,gzip", "br", "zstd", "compress"])
def test_other_encodings_and_second_layers_are_refused_by_name(header: str) -> None:
    with pytest.raises(EncodingRefused, match="Content-Encoding") as exc:
        Decoder(header)
    assert repr(header) in str(exc.value)
    assert exc.value.code == "content_encoding" and not exc.value.request_fault


def test_a_corrupt_body_is_a_stream_error() -> None:
    with pytest.raises(StreamFailure, match="gzip body is corrupt"):
        _decode("gzip", b"\x1f\x8b\x08\x00garbage-not-deflate" * 10)
