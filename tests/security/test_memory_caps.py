"""Class 5 of issue 25: a model server cannot grow the runner's memory without bound.
Every response carries a big reasoning item and reports tiny usage, so nothing counted in
tokens ever stops the thread. Small byte caps from `limits:` must stop it instead, with
status `size_limit`, the work of the run kept, and bad cap values refused with the file,
line and field (exit 2)."""

from __future__ import annotations

import contextlib
import functools
import http.server
import json
import os
import resource
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import (
    TINY_USAGE,
    Reply,
    function_call_item,
    per_conversation,
    reasoning_item,
)
from tests.support.security import cli, runs

KIB = 1024


def _hostile(item_chars: int, i: int) -> Reply:
    """A reasoning item of `item_chars` characters and a tool call that writes a file."""
    call = function_call_item(
        "shell", {"command": ["bash", "-c", "echo more >> work.txt"]}, call_id=f"c{i}"
    )
    item = reasoning_item("thinking", encrypted_content="A" * item_chars)
    return Reply(output=(item, call), usage=TINY_USAGE)


def _task_file(tmp: Path, base_url: str, repo: Path, limits: str) -> Path:
    path = tmp / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        "providers:\n"
        f"  fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}\n"
        "defaults:\n"
        "  model: fake/m\n"
        "  sandbox: danger-full-access\n"
        f"  limits: {{{limits}}}\n"
        f"tasks:\n  - {{id: t, prompt: go, repo: '{repo}'}}\n"
    )
    return path


@pytest.mark.parametrize(
    ("item_chars", "limits", "what"),
    [
        # Each item fits, the history does not: the 6th response would pass 256 KiB.
        (20 * KIB, "max_requests: 30, max_history_bytes: 262144", "max_history_bytes"),
        # One item over its own cap.
        (200 * KIB, "max_requests: 30, max_item_bytes: 131072", "max_item_bytes"),
        # One streamed response over its cap.
        (200 * KIB, "max_requests: 30, max_response_bytes: 65536", "max_response_bytes"),
        # The request body: items under every other cap, bodies growing past this one.
        (
            20 * KIB,
            "max_requests: 30, max_history_bytes: 1048576, max_request_bytes: 196608",
            "max_request_bytes",
        ),
    ],
)
def test_a_server_that_reports_tiny_usage_meets_a_byte_cap(
    loopback_thread: ThreadFactory, tmp_path: Path, item_chars: int, limits: str, what: str
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: _hostile(item_chars, i)))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "out"
    task_file = _task_file(tmp_path, srv.base_url, repo, limits)
    proc = cli("run", task_file, "--out", out)
    assert proc.returncode == 1, proc.stderr
    run = runs(out)["t"]
    assert run["status"] == "size_limit", run
    assert what in run["error"], run["error"]
    assert len(srv.requests) < 30  # stopped by the cap, not by max_requests
    if what in ("max_item_bytes", "max_response_bytes"):
        assert len(srv.requests) == 1  # the first answer is refused, nothing ran
    else:
        # Tools ran before the cap: their work is kept, as for every other limit.
        result = run["result"]
        assert result and result["branch"], run
        assert "work.txt" in (out / result["patch"]).read_text()
    assert "byte cap" in (out / "junit.xml").read_text()
    assert "FAIL (size cap)" in (out / "summary.md").read_text()


def test_a_bad_cap_is_an_input_error_naming_file_line_and_field(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo")
    task_file = _task_file(tmp_path, "http://127.0.0.1:9/v1", repo, "max_item_bytes: 10")
    proc = cli("validate", task_file, "--offline")
    assert proc.returncode == 2, proc.stdout
    assert f"{task_file}:7: defaults.limits.max_item_bytes" in proc.stderr, proc.stderr
    assert "1024" in proc.stderr
    text = task_file.read_text().replace("max_item_bytes: 10", "max_history_bytes: '1M'")
    task_file.write_text(text)
    proc = cli("validate", task_file, "--offline")
    assert proc.returncode == 2
    assert "defaults.limits.max_history_bytes" in proc.stderr, proc.stderr


def test_the_report_schema_knows_size_limit() -> None:
    schema = json.loads((Path(__file__).parents[2] / "docs" / "report.schema.json").read_text())
    assert "size_limit" in json.dumps(schema)


PEAK = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)
"""Runs the runner and prints its peak RSS (KiB). A small launcher, because Linux counts
the image a child was forked from in its peak, and pytest's is large."""


def _keys_event(pairs: int) -> bytes:
    """One `output_item.done` whose item maps `pairs` distinct one-character keys beyond
    U+FFFF to as many values: 14 bytes sent a pair, ~300 held once parsed."""
    body = ",".join(f'"{chr(0x10000 + n)}":"{chr(0x10000 + n)}"' for n in range(pairs))
    item = '{"type":"reasoning","id":"rs_1","summary":[],"x":{' + body + "}}"
    data = '{"type":"response.output_item.done","output_index":0,"item":' + item + "}"
    return f"event: response.output_item.done\ndata: {data}\n\n".encode()


@pytest.mark.parametrize(
    ("pairs", "said"),
    [
        (600_000, "larger than 2 MiB"),  # 8 MiB: past the event cap the item cap implies
        (130_000, "refusing to parse it"),  # 1.8 MiB: under it, but costly to parse
    ],
)
def test_an_event_of_many_tiny_values_is_refused_before_parsing(
    loopback_thread: ThreadFactory, tmp_path: Path, pairs: int, said: str
) -> None:
    """The attack review's event: under the event cap and the old value count, it cost
    the runner 389 MB to parse before the item cap could see it."""
    event = _keys_event(pairs)
    srv = loopback_thread(per_conversation(lambda req, i: Reply(sse_body=event)))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "out"
    task_file = _task_file(tmp_path, srv.base_url, repo, "max_item_bytes: 1048576")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PEAK,
            sys.executable,
            "-m",
            "runner",
            "run",
            task_file,
            "--out",
            out,
        ],
        env={**os.environ, "FAKE_API_KEY": "k" * 20},
        capture_output=True,
        text=True,
        timeout=120,
    )
    peak_mb = int(proc.stdout.split()[-1]) // 1024
    run = runs(out)["t"]
    assert run["status"] == "size_limit", run
    assert said in run["error"], run["error"]
    assert len(srv.requests) == 1
    assert peak_mb < 100, f"the runner's peak RSS was {peak_mb} MB"


GIB = 1024 * 1024 * 1024


@functools.cache
@functools.cache
def _gzip_bomb(layers: int, fill: bytes = b": keepalive\n\n") -> bytes:
    """1 GiB of `fill` (SSE comments by default), gzipped `layers` times: two layers
    make about 2 kB, the attack review's body. Made once per session (about 1 MB kept):
    deflating the gigabyte costs seconds."""
    gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = fill * (16 * 1024 * 1024 // len(fill))
    data = b"".join(gz.compress(block) for _ in range(GIB // len(block))) + gz.flush()
    for _ in range(layers - 1):
        gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        data = gz.compress(data) + gz.flush()
    return data


def _peak_run(tmp_path: Path, base_url: str) -> tuple[int, dict[str, object]]:
    """The runner's peak RSS (MB) for one run against `base_url`, and the run's entry."""
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "out"
    task_file = _task_file(tmp_path, base_url, repo, "max_turns: 3")
    argv = [sys.executable, "-c", PEAK, sys.executable, "-m", "runner", "run", task_file]
    proc = subprocess.run(
        [*map(str, argv), "--out", str(out)],
        env={**os.environ, "FAKE_API_KEY": "k" * 20},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return int(proc.stdout.split()[-1]) // 1024, runs(out)["t"]


@pytest.mark.parametrize(
    ("where", "encoding", "status", "said"),
    [
        # The review's bomb: two layers on a 200 stream, and on a 400 error body.
        ("stream", "gzip, gzip", "error", "Content-Encoding 'gzip, gzip'"),
        ("error", "gzip, gzip", "failed", "Content-Encoding 'gzip, gzip'"),
        # One layer is undone, a bounded piece at a time, and meets the response cap...
        ("stream", "gzip", "size_limit", "max_response_bytes"),
        # ... or the error body's 64 KiB.
        ("error", "gzip", "failed", "HTTP 400: : keepalive"),
        # What the runner does not undo is refused by name.
        ("stream", "br", "error", "Content-Encoding 'br'"),
    ],
)
def test_a_compressed_bomb_is_decoded_within_the_caps(
    loopback_thread: ThreadFactory,
    tmp_path: Path,
    where: str,
    encoding: str,
    status: str,
    said: str,
) -> None:
    """Attack review of issue 25, finding 2: httpx inflated each network chunk whole
    before the byte caps saw it, so a 2 kB body sent as `gzip, gzip` took the runner to
    3.1 GB; here 1 GiB inside, to stay kind to the machine."""
    body = _gzip_bomb(2 if "," in encoding else 1)
    hdrs = (("content-encoding", encoding),)
    if where == "stream":
        reply = Reply(sse_body=body, headers=hdrs)
    else:
        reply = Reply(kind="http", status=400, body=body, headers=hdrs)
    srv = loopback_thread(per_conversation(lambda req, i: reply))
    peak_mb, run = _peak_run(tmp_path, srv.base_url)
    assert peak_mb < 150, f"the runner's peak RSS was {peak_mb} MB"
    assert run["status"] == status, run
    assert said in str(run["error"]), run["error"]


@contextlib.contextmanager
def _bomb_server(body: bytes, encoding: str) -> Iterator[str]:
    """A server that answers every POST and GET with `body` as JSON, sent in `encoding`;
    the URL of its `/mcp`."""

    class Bomb(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-encoding", encoding)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST

        def do_DELETE(self) -> None:
            self.send_error(405)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bomb)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("encoding", "said"),
    [
        # The review's bomb: 1 GiB of JSON text gzipped twice (~2 kB).
        ("gzip, gzip", "Content-Encoding 'gzip, gzip'"),
        # One layer is undone a piece at a time and meets the MCP answer's cap.
        ("gzip", "larger than 16 MiB as decoded"),
    ],
)
def test_an_mcp_server_over_http_cannot_send_a_compressed_bomb(
    loopback_thread: ThreadFactory, tmp_path: Path, encoding: str, said: str
) -> None:
    """Second attack review of issue 25: the MCP SDK's client decoded through httpx, so a
    1,143-byte answer in `gzip, gzip` took the runner to 5.6 GB, and a pydantic traceback
    reached stderr."""
    body = _gzip_bomb(2 if "," in encoding else 1, fill=b"[" * 1024)
    srv = loopback_thread(per_conversation(lambda req, i: Reply(output=())))
    repo = make_git_repo(tmp_path / "repo")
    out = tmp_path / "out"
    with _bomb_server(body, encoding) as url:
        task_file = tmp_path / "tasks.yaml"
        task_file.write_text(
            "version: 1\n"
            f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
            "defaults:\n"
            "  model: fake/m\n"
            "  sandbox: danger-full-access\n"
            f"  mcp_servers: {{bomb: {{url: '{url}', startup_timeout_s: 60}}}}\n"
            f"tasks:\n  - {{id: t, prompt: go, repo: '{repo}'}}\n"
        )
        argv = [sys.executable, "-c", PEAK, sys.executable, "-m", "runner", "run", task_file]
        proc = subprocess.run(
            [*map(str, argv), "--out", str(out)],
            env={**os.environ, "FAKE_API_KEY": "k" * 20},
            capture_output=True,
            text=True,
            timeout=120,
        )
    peak_mb = int(proc.stdout.split()[-1]) // 1024
    assert "Traceback" not in proc.stderr, proc.stderr
    run = runs(out)["t"]
    assert run["status"] == "error", run
    assert said in str(run["error"]), run["error"]
    assert "\n" not in str(run["error"])
    assert not srv.requests, "the thread started without the server's tools"
    assert peak_mb < 150, f"the runner's peak RSS was {peak_mb} MB"


@pytest.mark.parametrize(
    ("encoding", "said"),
    [("gzip, gzip", "Content-Encoding 'gzip, gzip'"), ("gzip", "larger than 32 MiB as decoded")],
)
def test_the_github_rest_client_cannot_be_sent_a_compressed_bomb(encoding: str, said: str) -> None:
    """The same seam serves the Action's GitHub REST calls: a bomb there is one final
    `GitHubError`, not a resend, and no gigabyte in memory."""
    from runner.errors import GitHubError
    from runner.github.rest import GitHub

    body = _gzip_bomb(2 if "," in encoding else 1, fill=b"[" * 1024)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with _bomb_server(body, encoding) as url:
        gh = GitHub(url.removesuffix("/mcp"), "t" * 20, base_delay_s=0)
        try:
            with pytest.raises(GitHubError) as caught:
                gh.request("GET", "/repos/o/r/pulls/1")
        finally:
            gh.close()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
    assert said in str(caught.value) and not caught.value.retryable, caught.value
    assert grown_mb < 100, f"the test's peak RSS grew by {grown_mb} MB"
