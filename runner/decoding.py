"""A response body's `Content-Encoding` undone a bounded piece at a time (issue 25).

httpx decodes each network chunk whole before the caller sees a byte of it: a 2.7 kB
body sent as `gzip, gzip` took the runner to 3.1 GB before any byte cap could count it.
So the runner reads the raw bytes and decodes them here, never more than `CHUNK` bytes
of output per step, and the caps of `sizes` count what comes out. Only one layer of
`gzip` or `deflate` is undone (what real servers send); any other encoding, or a second
layer, is refused by name: decoding more buys nothing and only widens the bomb.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

from runner.errors import EncodingRefused, StreamFailure

CHUNK = 64 * 1024
"""The most decoded bytes one step makes; what the caller holds at once."""

_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW = -zlib.MAX_WBITS


def codings(header: str) -> list[str]:
    """The encodings of a `Content-Encoding` value, in the order they were applied,
    `identity` and empty entries left out."""
    names = [c.strip().lower() for c in header.split(",")]
    return [c for c in names if c and c != "identity"]


class Decoder:
    """Undoes one response's encoding; `feed` each raw chunk, then `end`."""

    def __init__(self, header: str) -> None:
        found = codings(header)
        if len(found) > 1 or (found and found[0] not in ("gzip", "x-gzip", "deflate")):
            raise EncodingRefused(
                f"the server sent a body in Content-Encoding {header[:100]!r}; the runner "
                "undoes at most one layer of gzip or deflate"
            )
        self._kind = found[0] if found else None
        self._z: zlib._Decompress | None = None
        if self._kind in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(_GZIP)
        elif self._kind == "deflate":
            self._z = zlib.decompressobj(_ZLIB)
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded bytes of `data`, in pieces of at most `CHUNK` bytes; the next piece
        is only made when the caller asks for it."""
        if self._z is None:
            for at in range(0, len(data), CHUNK):
                yield data[at : at + CHUNK]
            return
        while data:
            try:
                out = self._z.decompress(data, CHUNK)
            except zlib.error as exc:
                if self._kind == "deflate" and not self._started:
                    # "deflate" without its zlib header, as some servers send it.
                    self._z = zlib.decompressobj(_RAW)
                    self._started = True
                    continue
                raise StreamFailure(f"the {self._kind} body is corrupt: {exc}") from exc
            self._started = True
            data = self._z.unconsumed_tail
            if self._z.eof and self._z.unused_data:
                data = self._next_member()
            if out:
                yield out

    def _next_member(self) -> bytes:
        """A gzip body may be several members back to back; each is decoded in turn."""
        assert self._z is not None
        rest = self._z.unused_data
        if self._kind == "deflate":
            return b""  # bytes after the end of a deflate stream are not ours to read
        self._z = zlib.decompressobj(_GZIP)
        return rest

    def end(self) -> Iterator[bytes]:
        """What the decoder still holds once the body has ended, in bounded pieces."""
        if self._z is None:
            return
        while not self._z.eof:
            out = self._z.decompress(self._z.unconsumed_tail, CHUNK)
            if not out:
                break
            yield out
