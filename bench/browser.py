"""A headless Chromium driven over the DevTools protocol: report.html's tests
(tests/support/chromium.py) and its timing (bench/reports.py) use this one driver.

The protocol runs over a pipe (`--remote-debugging-pipe`: fd 3 to the browser, fd 4 back,
each message JSON ended by a NUL), so no port is opened and none has to be free. Calls are
synchronous with a deadline; events that arrive meanwhile are kept in `events`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _high(fd: int) -> int:
    """`fd` moved to 100 or above, so putting the pipes on 3 and 4 clobbers neither."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    os.close(fd)
    return high


class Browser:
    def __init__(
        self, profile: Path, downloads: Path | None = None, *, exe: str | None = None
    ) -> None:
        exe = exe or find_chromium()
        if exe is None:
            raise RuntimeError("no Chromium: `make chromium` installs Debian's package")
        to_r, to_w = (_high(fd) for fd in os.pipe())
        from_r, from_w = (_high(fd) for fd in os.pipe())

        def on_3_and_4() -> None:
            os.dup2(to_r, 3)
            os.dup2(from_w, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--window-size=1200,900",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=on_3_and_4,
        )
        os.close(to_r)
        os.close(from_w)
        self._out, self._in = to_w, from_r
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        if downloads is not None:
            self.call(
                "Browser.setDownloadBehavior",
                {"behavior": "allow", "downloadPath": str(downloads), "eventsEnabled": True},
            )

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise EOFError("Chromium closed its pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = False,
        timeout: float = 60,
    ) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        """The first event `method` not yet taken, waiting for it if needed."""
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._message(deadline))

    def js(self, expression: str, timeout: float = 60) -> Any:
        """The value of `expression` in the page (awaited if it is a promise)."""
        reply = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=True,
            timeout=timeout,
        )
        if "exceptionDetails" in reply:
            raise AssertionError(f"{expression}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(TimeoutError, EOFError, OSError, RuntimeError):
            self.call("Browser.close", timeout=10)
        os.close(self._out)
        os.close(self._in)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
