"""The runner's peak memory against a hostile model server (issue 25, point 5).

A loopback server (its own process) answers every request with a huge reasoning item and
a cheap tool call, and reports almost no usage, so nothing token-based ever stops the
thread. The runner CLI runs one thread against it; its own peak RSS (from `wait4`, so
neither the server nor git counts) is printed with its share of the 300 MB budget.

Scenarios:
- `issue`: a 12 MiB reasoning item in every response (what issue 25 reproduced);
- `under-caps`: items just under the item cap, two per response, as many responses as
  the history cap lets through, one of each pair with a character beyond U+FFFF (a
  string Python stores with 4 bytes per character): the most the caps let in;
- `objects`: items of empty lists (`[[],[],...]`), just under the item cap;
- `keys`: the attack review's event: one `response.output_item.done` of 15.8 MB (under
  the old 16 MiB event cap) whose item holds ~720k distinct short keys and values, each
  with a character beyond U+FFFF (the costliest JSON per byte we found: ~17x);
- `keys-one`: 999k single-character keys beyond U+FFFF (14 bytes a pair);
- `keys-under`: the same kind of item, as large as the parse check lets through, two per
  response until the history cap stops the thread;
- `wide-event`: one event just under the event cap, one 4-byte character then ASCII, so
  its decoded text alone is 4 bytes a character;
- `gzip-stream`, `gzip-error`: the attack review's compressed bomb, 3 GiB of SSE comments
  gzipped twice (about 5 kB) and sent as `Content-Encoding: gzip, gzip`, on a 200 event
  stream and on a 400 error body (httpx's own decoding took the runner to 3.1 GB);
- `gzip-one`: the same 3 GiB gzipped once (3 MB), which the runner does undo.

Measures the CLI process's memory; it imports only the caps and the item encoder
directly (runner.sizes, runner.items): no public API gives it.

    .venv/bin/python bench/hostile_server.py [--scenario all] [--requests 40]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gitrepo import make_git_repo  # noqa: E402
from bench.loopback import (  # noqa: E402
    JSON,
    TINY_USAGE,
    ProcessServer,
    Reply,
    Request,
    function_call_item,
    reasoning_item,
)
from runner.items import dumps  # noqa: E402
from runner.sizes import SizeCaps  # noqa: E402

BUDGET_MB = 300
MIB = 1024 * 1024
ITEM_CAP = SizeCaps().item_bytes
EVENT_CAP = SizeCaps().event_bytes
PARSE_CAP = SizeCaps().parse_bytes
WIDE = "\U0001f600"


def _reasoning(size: int, wide: bool) -> JSON:
    # One 4-byte character makes Python store the whole string 4 bytes per character.
    filler = ("\U0001f600" if wide else "") + "A" * (size - (4 if wide else 0))
    return reasoning_item("thinking", encrypted_content=filler)


def _call(i: int) -> JSON:
    return function_call_item("shell", {"command": ["true"]}, call_id=f"c{i}")


def issue(req: Request, i: int, /) -> Reply:
    """Issue 25's stream: 12 MiB of reasoning per response, tiny usage."""
    return Reply(output=(_reasoning(12 * MIB, False), _call(i)), usage=TINY_USAGE)


def under_caps(req: Request, i: int, /) -> Reply:
    """Items just under the item cap, two per response: one plain, one wide (where
    Python holds 4 bytes a character, the caps count 4, so it has a quarter of the
    characters)."""
    narrow = ITEM_CAP // 2 - 8192  # held twice: the parsed item and its wire text
    return Reply(
        output=(_reasoning(narrow // 4, True), _reasoning(narrow, False), _call(i)),
        usage=TINY_USAGE,
    )


def objects(req: Request, i: int, /) -> Reply:
    """Items made of tiny JSON values (`[[],[],...]`, 67 bytes held for 3 sent), two per
    response, each just under the item cap."""
    item = reasoning_item("thinking")
    item["x"] = [[]] * (ITEM_CAP // 70)
    return Reply(output=(item, item, _call(i)), usage=TINY_USAGE)


def _keys_item(pairs: int, one: bool = False) -> str:
    """A reasoning item whose `x` maps `pairs` distinct short keys, each with a 4-byte
    character, to as many distinct values (~24 bytes sent for ~400 held while parsing);
    `one`: each key and value is a single distinct character beyond U+FFFF (14 bytes)."""
    if one:
        body = ",".join(f'"{chr(0x10000 + n)}":"{chr(0x10000 + n)}"' for n in range(pairs))
    else:
        body = ",".join(f'"{n:x}{WIDE}":"{WIDE}{n:x}"' for n in range(pairs))
    head = dumps(reasoning_item("thinking"))[:-1]
    return f'{head},"x":{{{body}}}}}'


def _stream(items: list[str], i: int) -> bytes:
    """A response as raw SSE: each item (JSON text) as `output_item.added` then `.done`
    (two events to parse, as a real server sends them), a tool call, and a
    `response.completed` that leaves the output out (so the server stays light)."""
    events: list[tuple[str, str]] = []
    for n, it in enumerate([*items, dumps(_call(i) | {"id": f"fc{i}"})]):
        for kind in ("response.output_item.added", "response.output_item.done"):
            events.append((kind, f'{{"type":"{kind}","output_index":{n},"item":{it}}}'))
    completed = dumps(
        {"type": "response.completed", "response": {"id": f"r{i}", "usage": TINY_USAGE}}
    )
    events.append(("response.completed", completed))
    return "".join(f"event: {e}\ndata: {d}\n\n" for e, d in events).encode()


_MEMO: dict[str, bytes] = {}


def _cached(name: str, make: Callable[[], list[str]], i: int) -> Reply:
    if name not in _MEMO:
        _MEMO[name] = _stream(make(), 0)
    return Reply(sse_body=_MEMO[name].replace(b'"c0"', f'"c{i}"'.encode()))


def keys(req: Request, i: int, /) -> Reply:
    """The review's event: ~700k pairs, just under the old 16 MiB event cap."""
    return _cached("keys", lambda: [_keys_item((16 * MIB - 64 * 1024) // 24)], i)


def keys_one(req: Request, i: int, /) -> Reply:
    """999k one-character keys (U+10000 on), 14 MB: under the old million-values check."""
    return _cached("keys-one", lambda: [_keys_item(999_000, one=True)], i)


def keys_under(req: Request, i: int, /) -> Reply:
    """Key items just under what the parse check admits, two per response: a pair is
    ~18 characters held at 4 bytes, counted twice, plus 200 bytes for its `:` and `,`."""
    pairs = PARSE_CAP // 560
    return _cached("keys-under", lambda: [_keys_item(pairs)] * 2, i)


def wide_event(req: Request, i: int, /) -> Reply:
    """One event just under the event cap: a 4-byte character, then ASCII."""
    filler = WIDE + "A" * (EVENT_CAP - 64 * 1024)
    item = dumps(reasoning_item("thinking", encrypted_content=filler))
    return _cached("wide-event", lambda: [item], i)


@functools.cache
def _bomb(layers: int) -> bytes:
    """3 GiB of `: keepalive` comments, gzipped `layers` times."""
    gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b": keepalive\n\n" * (16 * MIB // 13)
    data = b"".join(gz.compress(block) for _ in range(3 * 1024 * MIB // len(block)))
    data += gz.flush()
    for _ in range(layers - 1):
        gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        data = gz.compress(data) + gz.flush()
    return data


def gzip_stream(req: Request, i: int, /) -> Reply:
    return Reply(sse_body=_bomb(2), headers=(("content-encoding", "gzip, gzip"),))


def gzip_error(req: Request, i: int, /) -> Reply:
    return Reply(status=400, body=_bomb(2), headers=(("content-encoding", "gzip, gzip"),))


def gzip_one(req: Request, i: int, /) -> Reply:
    return Reply(sse_body=_bomb(1), headers=(("content-encoding", "gzip"),))


SCENARIOS = {
    "issue": "bench.hostile_server:issue",
    "under-caps": "bench.hostile_server:under_caps",
    "objects": "bench.hostile_server:objects",
    "keys": "bench.hostile_server:keys",
    "keys-one": "bench.hostile_server:keys_one",
    "keys-under": "bench.hostile_server:keys_under",
    "wide-event": "bench.hostile_server:wide_event",
    "gzip-stream": "bench.hostile_server:gzip_stream",
    "gzip-error": "bench.hostile_server:gzip_error",
    "gzip-one": "bench.hostile_server:gzip_one",
}


def run_one(script: str, requests: int, tmp: Path) -> tuple[float, str, int]:
    """Peak RSS (MB) of the runner, its run's status, and the requests it sent."""
    repo = tmp / "repo"
    if not repo.exists():
        make_git_repo(repo, {"README.md": "# bench\n"})
    with ProcessServer(script) as srv:
        tasks = tmp / "tasks.yaml"
        tasks.write_text(
            "version: 1\n"
            f"providers: {{hostile: {{base_url: '{srv.base_url}', env_key: HOSTILE_KEY}}}}\n"
            "defaults:\n"
            "  model: hostile/m\n"
            "  sandbox: danger-full-access\n"
            f"  limits: {{max_requests: {requests}}}\n"
            f"tasks:\n  - {{id: t, prompt: go, repo: '{repo}'}}\n"
        )
        out = tmp / f"out-{script.rsplit(':', 1)[1]}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
            env={**os.environ, "HOSTILE_KEY": "k" * 20},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        err = proc.stderr.read().decode(errors="replace")
        _, _, rusage = os.wait4(proc.pid, 0)
        proc.returncode = 0  # reaped by wait4
    sent = len(srv.requests)
    report = out / "report.json"
    status = json.loads(report.read_text())["runs"][0]["status"] if report.exists() else err[-300:]
    return rusage.ru_maxrss / 1024, status, sent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    ap.add_argument("--requests", type=int, default=40, help="max_requests of the thread")
    args = ap.parse_args()
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    with tempfile.TemporaryDirectory(prefix="runner-bench-hostile-server-", dir="/var/tmp") as d:
        for name in names:
            peak, status, sent = run_one(SCENARIOS[name], args.requests, Path(d))
            print(
                f"{name}: runner peak RSS {peak:.0f} MB = {peak / BUDGET_MB:.2f} of the "
                f"{BUDGET_MB} MB budget; {sent} request(s); run status {status}"
            )


if __name__ == "__main__":
    main()
