"""Headless Chromium over the DevTools protocol on a pipe, for timing report.html.

The pipe (`--remote-debugging-pipe`: the browser reads fd 3 and writes fd 4, messages end
with a NUL) needs no free port. Calls block until their answer or a deadline; events
read meanwhile wait in `events`.
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


def _above_100(fd: int) -> int:
    """Moved out of the way of fds 3 and 4, which the child's pipes take."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, profile: Path) -> None:
        exe = shutil.which("chromium") or shutil.which("chromium-browser")
        if exe is None:
            raise RuntimeError("no Chromium on PATH")
        child_in, self._out = (_above_100(fd) for fd in os.pipe())
        self._in, child_out = (_above_100(fd) for fd in os.pipe())

        def wire() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
        self.proc = subprocess.Popen(
            [exe, *flags, "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=wire,
        )
        os.close(child_in)
        os.close(child_out)
        self._pending = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            data = os.read(self._in, 1 << 20)
            if not data:
                raise EOFError("Chromium closed its pipe")
            self._pending += data
        message, self._pending = self._pending.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(message)
        return parsed

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        session: bool = False,
        timeout: float = 60,
    ) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            got = self._read(deadline)
            if got.get("id") != self._next_id:
                self.events.append(got)
                continue
            if "error" in got:
                raise RuntimeError(f"{method}: {got['error']}")
            result: dict[str, Any] = got.get("result", {})
            return result

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            for n, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(n)
            self.events.append(self._read(deadline))

    def js(self, expression: str, timeout: float = 60) -> Any:
        """The expression's value in the page, a promise awaited."""
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        got = self.call("Runtime.evaluate", params, session=True, timeout=timeout)
        if "exceptionDetails" in got:
            raise RuntimeError(f"{expression}: {got['exceptionDetails']}")
        return got["result"].get("value")

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
