"""A scripted OpenAI Responses server on 127.0.0.1, owned by the benchmarks.

Why bench has its own: the benchmarks must not lean on the test suite's support code
(issue 29), and they need little of it. This one streams what the real API streams
(created, in_progress, each item's added, deltas and done, completed), keeps connections
alive, counts them, notes when each request arrived and its reply was written, and
accounts a prompt cache by exact prefix. It does not check bodies against the SDK's
types nor inject faults: the tests' server does that.

The cache accounting re-encodes every item of every request, ~10 ms a request on a
2,000-item thread, so only the thread server does it; the process server (the CPU
benchmarks') reports the body's bytes // 4 as input and nothing cached.

Cache accounting, as the tests' server does it: a request's segments are its
`instructions`, each tool, each input item; `input_tokens` is their UTF-8 bytes // 4 and
`cached_tokens` the bytes of the segments equal, in order, to the previous request with
the same `prompt_cache_key` and model, // 4. Segments are compared as compact JSON
re-encoded from the parsed body, so a change of key order breaks the cache here, a
change of spacing or escapes does not.

In a thread: ``with ThreadedServer(script) as srv:``; in its own process, so its CPU is
not the client's: ``with ProcessServer("bench.scripts:batch") as srv:``. A script is
``(request, index) -> Reply`` (or an awaitable of one).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import importlib
import inspect
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeAlias

JSON: TypeAlias = dict[str, Any]
DELTA_CHARS = 16


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Reply:
    """One answer: a generated stream of `output` (the default), a verbatim event-stream
    `sse_body`, or a plain HTTP `status` with `body` when `status` is not 200."""

    output: tuple[JSON, ...] = ()
    usage: JSON | None = None
    """Replaces the computed usage's top-level keys."""
    sse_body: bytes | None = None
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()


def message_item(text: str) -> JSON:
    return {
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "text": text}],
        "role": "assistant",
    }


def function_call_item(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> JSON:
    args = arguments if isinstance(arguments, str) else _dumps(dict(arguments))
    return {
        "type": "function_call",
        "status": "completed",
        "arguments": args,
        "call_id": call_id,
        "name": name,
    }


def reasoning_item(summary: str = "", encrypted_content: str | None = None) -> JSON:
    enc = encrypted_content
    if enc is None:
        enc = "gAAAA" + base64.b64encode(summary.encode()).decode()
    parts = [{"type": "summary_text", "text": summary}] if summary else []
    return {"type": "reasoning", "summary": parts, "encrypted_content": enc}


def reply_message(text: str) -> Reply:
    return Reply(output=(message_item(text),))


def reply_function_call(
    name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None
) -> Reply:
    return Reply(output=(function_call_item(name, arguments, call_id),))


TINY_USAGE: JSON = {
    "input_tokens": 10,
    "input_tokens_details": {"cached_tokens": 0},
    "output_tokens": 1,
    "output_tokens_details": {"reasoning_tokens": 0},
    "total_tokens": 11,
}
"""Usage that never triggers anything token-based (compaction, budgets)."""


@dataclass(eq=False)
class Request:
    """One request as received: its parsed body (unless bodies are not kept) and times."""

    index: int
    prompt_cache_key: Any
    json: JSON
    received_at: float
    replied_at: float = 0.0
    input_tokens: int = 0
    cached_tokens: int = 0

    def record(self) -> JSON:
        return {
            "index": self.index,
            "prompt_cache_key": self.prompt_cache_key,
            "received_at": self.received_at,
            "replied_at": self.replied_at,
        }


Script: TypeAlias = Callable[[Request, int], "Reply | Awaitable[Reply]"]


def per_conversation(script: Script) -> Script:
    """`index` counted per prompt_cache_key, so one script drives many threads alike."""
    counts: dict[Any, int] = {}

    def run(request: Request, index: int, /) -> Reply | Awaitable[Reply]:
        turn = counts.get(request.prompt_cache_key, 0)
        counts[request.prompt_cache_key] = turn + 1
        return script(request, turn)

    return run


def _pieces(text: str) -> list[str]:
    return [text[i : i + DELTA_CHARS] for i in range(0, len(text), DELTA_CHARS)]


def _item_events(item: JSON, idx: int) -> Iterator[JSON]:
    at = {"item_id": item.get("id"), "output_index": idx}
    kind = item.get("type")
    if kind == "message":
        yield {
            "type": "response.output_item.added",
            "output_index": idx,
            "item": {**item, "status": "in_progress", "content": []},
        }
        for k, part in enumerate(item.get("content") or []):
            text = str(part.get("text", ""))
            yield {
                "type": "response.content_part.added",
                **at,
                "content_index": k,
                "part": {**part, "text": ""},
            }
            for d in _pieces(text):
                yield {"type": "response.output_text.delta", **at, "content_index": k, "delta": d}
            yield {"type": "response.output_text.done", **at, "content_index": k, "text": text}
            yield {"type": "response.content_part.done", **at, "content_index": k, "part": part}
    elif kind == "function_call":
        text = str(item.get("arguments", ""))
        yield {
            "type": "response.output_item.added",
            "output_index": idx,
            "item": {**item, "status": "in_progress", "arguments": ""},
        }
        for d in _pieces(text):
            yield {"type": "response.function_call_arguments.delta", **at, "delta": d}
        yield {"type": "response.function_call_arguments.done", **at, "arguments": text}
    else:
        yield {"type": "response.output_item.added", "output_index": idx, "item": item}
    yield {"type": "response.output_item.done", "output_index": idx, "item": item}


def _encode(ev: JSON, seq: int) -> bytes:
    kind = ev["type"]
    body = {"type": kind, "sequence_number": seq, **{k: v for k, v in ev.items() if k != "type"}}
    return f"event: {kind}\ndata: {_dumps(body)}\n\n".encode()


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _head(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Server:
    """The server on the running asyncio loop; `ThreadedServer`/`ProcessServer` host it."""

    def __init__(self, script: Script, *, keep_bodies: bool = True, cache: bool = True) -> None:
        self.script = script
        self.keep_bodies = keep_bodies
        self.cache = cache
        self.requests: list[Request] = []
        self.connections_opened = 0
        self.port = 0
        self._ids = itertools.count(1)
        self._last: dict[tuple[Any, Any], list[str]] = {}
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections_opened += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                length = int(headers.get("content-length", "0") or 0)
                raw = await reader.readexactly(length) if length else b""
                await self._answer(raw, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _answer(self, raw: bytes, writer: asyncio.StreamWriter) -> None:
        received = time.monotonic()
        body: JSON = json.loads(raw) if raw else {}
        req = Request(
            index=len(self.requests),
            prompt_cache_key=body.get("prompt_cache_key"),
            json={},
            received_at=received,
        )
        if self.cache:
            self._account(req, body)
        else:
            req.input_tokens = len(raw) // 4
        self.requests.append(req)
        req.json = body
        reply = self.script(req, req.index)
        if inspect.isawaitable(reply):
            reply = await reply
        if not self.keep_bodies:
            req.json = {}
        assert isinstance(reply, Reply)
        if reply.status != 200:
            hdrs = [*reply.headers, ("content-length", str(len(reply.body)))]
            writer.write(_head(reply.status, hdrs) + reply.body)
        else:
            if reply.sse_body is not None:
                payload = [reply.sse_body]
            else:
                events = self._events(req, reply, str(body.get("model", "m")))
                payload = [_encode(ev, n) for n, ev in enumerate(events)]
            hdrs = [
                ("content-type", "text/event-stream"),
                ("cache-control", "no-cache"),
                *reply.headers,
                ("transfer-encoding", "chunked"),
            ]
            writer.write(_head(200, hdrs) + b"".join(_chunk(p) for p in payload) + b"0\r\n\r\n")
        await writer.drain()
        req.replied_at = time.monotonic()

    def _account(self, req: Request, body: JSON) -> None:
        segments = [_dumps(body["instructions"])] if "instructions" in body else []
        segments += [_dumps(t) for t in body.get("tools") or []]
        items = body.get("input")
        segments += [_dumps(i) for i in items] if isinstance(items, list) else [_dumps(items)]
        sizes = [len(s.encode()) for s in segments]
        key = (req.prompt_cache_key, body.get("model"))
        prev = self._last.get(key, [])
        same = 0
        for n, (a, b) in enumerate(zip(prev, segments, strict=False)):
            if a != b:
                break
            same += sizes[n]
        self._last[key] = segments
        req.input_tokens = sum(sizes) // 4
        req.cached_tokens = same // 4

    def _events(self, req: Request, reply: Reply, model: str) -> list[JSON]:
        items = []
        for item in reply.output:
            out: JSON = {"id": f"item_{next(self._ids):06d}"}
            for k, v in item.items():
                out[k] = f"call_{next(self._ids):06d}" if k == "call_id" and v is None else v
            items.append(out)
        base: JSON = {
            "id": f"resp_{next(self._ids):06d}",
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
        }
        pending = {**base, "status": "in_progress", "output": [], "usage": None}
        events: list[JSON] = [
            {"type": "response.created", "response": pending},
            {"type": "response.in_progress", "response": pending},
        ]
        out_tokens = reasoning = 0
        for n, item in enumerate(items):
            events.extend(_item_events(item, n))
            cost = max(1, len(_dumps({k: v for k, v in item.items() if k != "id"}).encode()) // 4)
            out_tokens += cost
            reasoning += cost if item.get("type") == "reasoning" else 0
        usage: JSON = {
            "input_tokens": req.input_tokens,
            "input_tokens_details": {"cached_tokens": req.cached_tokens},
            "output_tokens": out_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": req.input_tokens + out_tokens,
            **(reply.usage or {}),
        }
        final = {**base, "status": "completed", "output": items, "usage": usage}
        events.append({"type": "response.completed", "response": final})
        return events


class ThreadedServer:
    """The server on its own event loop in a daemon thread, for synchronous callers and
    for a runner started in this process or as a subprocess."""

    def __init__(self, script: Script, *, keep_bodies: bool = True) -> None:
        self.server = Server(script, keep_bodies=keep_bodies)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.port}/v1"

    @property
    def requests(self) -> list[Request]:
        return self.server.requests

    @property
    def connections_opened(self) -> int:
        return self.server.connections_opened

    def __enter__(self) -> ThreadedServer:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                await self.server.start()
            finally:
                ready.set()
            await self._stop.wait()
            await self.server.aclose()

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        ready.wait(10)
        if not self.server.port:
            raise RuntimeError("the bench loopback server did not start")
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)


class ProcessServer:
    """The server in a child process (`script` named "module:attr"); its requests' times
    and connection count come back on exit. The child stops when its stdin closes."""

    def __init__(
        self, script: str, *, env: Mapping[str, str] | None = None, keep_bodies: bool = False
    ) -> None:
        self.script = script
        self.env = env
        self.keep_bodies = keep_bodies
        self.port = 0
        self.requests: list[Request] = []
        self.connections_opened = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ProcessServer:
        self._dir = Path(tempfile.mkdtemp(prefix="bench-loopback-"))
        port_file = self._dir / "port"
        cmd = [sys.executable, str(Path(__file__).resolve()), self.script, str(self._dir)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, env=None if self.env is None else dict(self.env)
        )
        deadline = time.monotonic() + 20
        while not port_file.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self._proc.kill()
                raise RuntimeError("the bench loopback process did not start")
            time.sleep(0.01)
        self.port = int(port_file.read_text())
        return self

    def stop(self) -> None:
        if self._proc is None or self._dir is None:
            return
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        record = self._dir / "record.json"
        data = json.loads(record.read_text()) if record.exists() else None
        shutil.rmtree(self._dir, ignore_errors=True)
        self._proc = self._dir = None
        if data is None:
            raise RuntimeError("the bench loopback process left no record")
        self.connections_opened = data["connections_opened"]
        self.requests = [Request(json={}, **r) for r in data["requests"]]

    def __enter__(self) -> ProcessServer:
        return self.start()

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


async def _child(script: Script, out: Path) -> None:
    server = Server(script, keep_bodies=False, cache=False)
    await server.start()
    (out / "port.tmp").write_text(str(server.port))
    (out / "port.tmp").rename(out / "port")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.buffer.read)  # until the parent closes it
    await server.aclose()
    record = {
        "connections_opened": server.connections_opened,
        "requests": [r.record() for r in server.requests],
    }
    (out / "record.json").write_text(json.dumps(record))


def main() -> None:
    ap = argparse.ArgumentParser(description="the bench loopback server, in its own process")
    ap.add_argument("script", help="module:attr of a script or of a function making one")
    ap.add_argument("dir", type=Path, help="where to write the port and, on exit, the record")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    module, _, attr = args.script.partition(":")
    obj = getattr(importlib.import_module(module), attr)
    required = [
        p
        for p in inspect.signature(obj).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    script = obj if required else obj()  # a script, or a function that makes one
    # The scripts build replies with bench.loopback's Reply, not this __main__'s.
    served: Any = importlib.import_module("bench.loopback")
    asyncio.run(served._child(script, args.dir))


if __name__ == "__main__":
    main()
