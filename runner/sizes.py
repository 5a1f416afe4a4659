"""Byte caps on what a model server can make the runner hold (issue 25).

Token counts come from the server, so nothing measured in tokens can bound memory: a
server may report ten tokens for a 12 MiB item. These caps are counted in bytes the
runner sees, and a run that reaches one ends with status `size_limit`, its work kept.
The defaults sit far above real threads (a 1M-token context is about 4 MiB of text;
128k output tokens stream as about 40 MB of events) and keep one thread well under
300 MB of resident memory whatever a server sends (bench/hostile_server.py).
"""

from __future__ import annotations

from runner.errors import SizeLimitReached
from runner.frozen import frozen

MIB = 1024 * 1024

RESPONSE_BYTES = 64 * MIB
ITEM_BYTES = 8 * MIB
HISTORY_BYTES = 32 * MIB
REQUEST_BYTES = 48 * MIB
ENVELOPE_BYTES = 1 * MIB
"""What an event may carry beside its items: ids, usage, status, a text summary."""
PATCH_FILE_MAX_BYTES = 16 * MIB
"""A changed file bigger than this is left out of a run's patch file (a branch still holds
it): git builds a file's diff in memory and takes seconds per 100 MiB."""
PATCH_MAX_BYTES = 64 * MIB
"""The whole diff an environment hands back (sandbox/changes.py), held in memory once."""


@frozen
class SizeCaps:
    response_bytes: int = RESPONSE_BYTES
    """One response as streamed (every event, deltas included)."""
    item_bytes: int = ITEM_BYTES
    """One output item (a message, a call, a reasoning item) as it is sent back."""
    history_bytes: int = HISTORY_BYTES
    """Every item of the thread, as sent back."""
    request_bytes: int = REQUEST_BYTES
    """One request body."""

    @property
    def event_bytes(self) -> int:
        """The largest SSE event worth reading. An item keeps its text twice (parsed and
        as wire text), so its raw JSON is about half what it holds: even
        `response.completed`, which repeats the response's output, fits two items at
        their cap in this. A bigger event could only bring items the caps refuse."""
        return self.item_bytes + ENVELOPE_BYTES

    @property
    def parse_bytes(self) -> int:
        """What parsing one event may cost (its text and every object made of it),
        estimated before parsing: the two items `event_bytes` allows, and no more."""
        return 2 * self.item_bytes + ENVELOPE_BYTES

    def check_item(self, nbytes: int) -> None:
        if nbytes > self.item_bytes:
            raise SizeLimitReached(
                f"the server sent an item of {size(nbytes)}, over max_item_bytes "
                f"({size(self.item_bytes)})"
            )

    def check_output(self, nbytes: int, history: int) -> None:
        """A response's items so far (`nbytes`) on top of the history's (`history`)."""
        if history + nbytes > self.history_bytes:
            raise SizeLimitReached(
                f"the history would grow to {size(history + nbytes)}, over "
                f"max_history_bytes ({size(self.history_bytes)})"
            )

    def check_request(self, nbytes: int) -> None:
        if nbytes > self.request_bytes:
            raise SizeLimitReached(
                f"the request body would be {size(nbytes)}, over max_request_bytes "
                f"({size(self.request_bytes)})"
            )


def size(n: int) -> str:
    """Bytes as people read them: `12.0 MiB`, `512 bytes`."""
    if n >= MIB:
        return f"{n / MIB:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} bytes"
