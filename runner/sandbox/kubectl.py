"""kubectl as a bounded call: every invocation has a timeout and at most two retries.

A call to the API server hangs or drops now and then (Inspect's users saw about one in a
thousand and added a timeout and two retries to every call), so a call that hangs, or that
kubectl says never reached the server, is made again. An answer, even a refusal, is final.
Callers retry only calls that are safe to repeat: `get`, `delete`, `wait`, a `create` of a
fixed name, an `exec` whose command never started.

kubectl gets a minimal environment (how to reach the cluster, nothing else), so the
runner's secrets never reach it or the cluster's audit log.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import field

from runner.errors import EnvironmentFault
from runner.frozen import frozen
from runner.sandbox.cli_call import Bounded, Sink, run_once

CALL_TIMEOUT_S = 60.0
RETRIES = 2
OUTPUT_CAP = 4 << 20
"""Bytes of stdout a plain call keeps (`get pods -o json` of a namespace's runner Pods)."""
STDERR_CAP = 64 << 10

_PASSED = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TMPDIR",
    "KUBECONFIG",
    "KUBERNETES_SERVICE_HOST",
    "KUBERNETES_SERVICE_PORT",
    "XDG_CONFIG_HOME",
    "XDG_RUNTIME_DIR",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)
# What kubectl prints when the request, or the exec stream, never reached a working server.
_TRANSIENT = re.compile(
    r"unable to connect to the server|connection refused|connection reset|i/o timeout"
    r"|tls handshake timeout|the server is currently unable|etcdserver: request timed out"
    r"|http2: client connection lost|unable to upgrade connection|error dialing backend"
    r"|too many requests",
    re.IGNORECASE,
)


@frozen
class Done:
    code: int | None
    """None: the call outlived its timeout and was killed."""
    stderr: bytes
    duration_s: float

    @property
    def said(self) -> str:
        return self.stderr.decode(errors="replace").strip()[-2000:]

    @property
    def transient(self) -> bool:
        return self.code is None or (self.code != 0 and bool(_TRANSIENT.search(self.said)))


@frozen
class Called:
    code: int
    stdout: bytes
    said: str


@frozen
class Kubectl:
    """kubectl, named by its executable (`kubectl` on PATH, or a path), and an optional
    kubeconfig context."""

    executable: str = "kubectl"
    context: str | None = None
    call_timeout_s: float = CALL_TIMEOUT_S
    retries: int = RETRIES
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in self.base_env.items() if k in _PASSED}
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        context = ["--context", self.context] if self.context else []
        return [self.executable, *context, *args]

    async def once(
        self,
        args: Sequence[str],
        *,
        stdout: Sink,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
    ) -> Done:
        """One attempt: stdout streams into `stdout`, stderr is kept (bounded)."""
        limit = timeout_s if timeout_s is not None else self.call_timeout_s
        start = time.monotonic()
        err = Bounded(STDERR_CAP)
        # stdin is a pipe closed at once when there is nothing to send, so kubectl reads
        # an end of file; on a timeout the whole group goes: kubectl may run a credential
        # plugin of its own.
        code = await run_once(
            self.argv(args),
            self.env(),
            stdin=stdin or b"",
            stdout=stdout,
            stderr=err,
            limit=limit,
            kill_group=True,
            what=f"kubectl {self.executable!r}",
        )
        return Done(code, bytes(err.data), time.monotonic() - start)

    async def call(
        self,
        args: Sequence[str],
        *,
        stdin: bytes | None = None,
        timeout_s: float | None = None,
        retry: bool = True,
        cap: int = OUTPUT_CAP,
    ) -> Called:
        """Run `kubectl args` to completion, again (at most `retries` times) while it hangs
        or cannot reach the server. Raises EnvironmentFault when no attempt got an answer."""
        attempts = 1 + (self.retries if retry else 0)
        done: Done | None = None
        for _ in range(attempts):
            out = Bounded(cap)
            done = await self.once(args, stdout=out, stdin=stdin, timeout_s=timeout_s)
            if not done.transient:
                assert done.code is not None
                return Called(done.code, bytes(out.data), done.said)
        assert done is not None
        what = f"`kubectl {' '.join(args[:2])}`"
        if done.code is None:
            raise EnvironmentFault(f"{what} did not answer in time, {attempts} times")
        raise EnvironmentFault(f"{what} failed {attempts} times: {done.said}")
