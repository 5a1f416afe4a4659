"""A smart-HTTP git remote on 127.0.0.1 (`git http-backend` behind a small server) that
demands one Basic token and can answer slowly, so a push stays in flight long enough for
another run's command to look for the token on the host."""

from __future__ import annotations

import base64
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@dataclass
class GitRemote:
    url: str
    bare: Path
    seen_auth: list[str] = field(default_factory=list)
    """The Authorization header of every request (None-free: "" when absent)."""
    seen: list[tuple[str, str, str]] = field(default_factory=list)
    """Every request as (method, path with its query, Authorization header)."""


def _handler(remote: GitRemote, token: str, delay_s: float) -> type[BaseHTTPRequestHandler]:
    want = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _serve(self) -> None:
            auth = self.headers.get("Authorization", "")
            remote.seen_auth.append(auth)
            remote.seen.append((self.command, self.path, auth))
            if auth != want:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="t"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            time.sleep(delay_s)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                body = self._dechunk()
            path, _, query = self.path.partition("?")
            env = {
                "GIT_PROJECT_ROOT": str(remote.bare.parent),
                "GIT_HTTP_EXPORT_ALL": "1",
                "REQUEST_METHOD": self.command,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
                "REMOTE_USER": "x-access-token",
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "HTTP_GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "PATH": "/usr/local/bin:/usr/bin:/bin",
            }
            out = subprocess.run(
                ["git", "http-backend"], input=body, env=env, capture_output=True, check=False
            ).stdout
            head, _, payload = out.partition(b"\r\n\r\n")
            status = 200
            headers = []
            for line in head.decode().split("\r\n"):
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                elif name:
                    headers.append((name, value.strip()))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _dechunk(self) -> bytes:
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()

        do_GET = _serve
        do_POST = _serve
        do_PUT = _serve
        do_DELETE = _serve

    return Handler


@contextmanager
def git_http_remote(dir_: Path, token: str, *, delay_s: float = 0.0) -> Iterator[GitRemote]:
    bare = dir_ / "remote.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "config", "http.receivepack", "true"], check=True)
    remote = GitRemote(url="", bare=bare)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(remote, token, delay_s))
    remote.url = f"http://127.0.0.1:{server.server_address[1]}/remote.git"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield remote
    finally:
        server.shutdown()
        server.server_close()
