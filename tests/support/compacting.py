"""The loopback server with the Responses API's compaction endpoint, for the tests of
remote compaction and of the client that calls it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from tests.support.loopback import LoopbackServer, RecordedRequest


class CompactingServer(LoopbackServer):
    """The loopback server plus `POST /v1/responses/compact`, answered by `compact`."""

    def __init__(
        self,
        script: Any,
        compact: Callable[[dict[str, Any]], tuple[int, Any]],
    ) -> None:
        super().__init__(script)
        self.compact = compact
        self.compact_requests: list[RecordedRequest] = []

    def _reject(
        self,
        req: RecordedRequest,
        writer: asyncio.StreamWriter,
        status: int,
        code: str,
        message: str,
        keep_alive: bool,
    ) -> bool:
        if req.path != "/v1/responses/compact" or req.method != "POST":
            return super()._reject(req, writer, status, code, message, keep_alive)
        req.body = json.loads(req.raw)
        self.compact_requests.append(req)
        status, answer = self.compact(req.body)
        self._write_json(writer, status, answer, not keep_alive)
        return keep_alive
