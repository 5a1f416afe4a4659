"""The container engine's command line (podman or docker): every call bounded and retried.

A `docker`/`podman` call hangs now and then (about once in a thousand, as Inspect's users
found), so each call has its own timeout and is made again, at most `retries` times, when
it hangs. Only hangs are retried: an answer, even a refusal, is final. Callers retry only
calls that are safe to repeat (inspect, rm, images, a start by a fixed name).

podman is pointed at the project's own `containers.conf` (runc, rlimits within the host's:
crun cannot start a container in a VM without CAP_SYS_RESOURCE), so the machine's own
configuration is neither read nor changed. The CLI gets a minimal environment: the
runner's secrets never reach it. What says which daemon to talk to (`DOCKER_HOST`,
`DOCKER_CONTEXT`, `CONTAINER_HOST`: a remote or rootless daemon) does, for the engine that
reads it, and so may an explicit `extra_env`, less any secret-looking name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path

from runner.errors import EnvironmentFault
from runner.frozen import frozen
from runner.sandbox.cli_call import Bounded, run_once
from runner.sandbox.env import SECRET_NAME

CONTAINERS_CONF = Path(__file__).resolve().parent.parent / "data" / "containers.conf"
REAPER = Path(__file__).resolve().with_name("reaper.py")
STOP_GRACE_S = 10.0
"""How long a supervised call (a build) has, once stopped, to end what it started."""
CALL_TIMEOUT_S = 60.0
RETRIES = 2
OUTPUT_CAP = 1 << 20
"""Bytes of stdout (and of stderr) a plain call keeps: ids, names, JSON of `inspect`."""

_PASSED = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
)
_PASSED_TO = {
    "docker": (
        "DOCKER_HOST",
        "DOCKER_CONTEXT",
        "DOCKER_CONFIG",
        "DOCKER_CERT_PATH",
        "DOCKER_TLS_VERIFY",
        "DOCKER_API_VERSION",
    ),
    "podman": (
        "CONTAINER_HOST",
        "CONTAINER_CONNECTION",
        "CONTAINERS_STORAGE_CONF",
        "CONTAINERS_REGISTRIES_CONF",
    ),
}
"""Per engine, the variables naming its daemon and its own configuration files: paths
and addresses, never a credential (docker keeps those in `DOCKER_CONFIG`'s file)."""

OWNER_LABEL = "io.runner.owner"
OWNER = "runner"
BATCH_LABEL = "io.runner.batch"
RUN_LABEL = "io.runner.run"
HOST_LABEL = "io.runner.host"
RECIPE_LABEL = "io.runner.recipe"


@frozen
class Called:
    code: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace").strip()

    def said(self) -> str:
        return (self.stderr or self.stdout).decode(errors="replace").strip()[-2000:]


@frozen
class Engine:
    """One container engine, named by its executable (`podman`, `docker`, or a path)."""

    executable: str = "podman"
    call_timeout_s: float = CALL_TIMEOUT_S
    retries: int = RETRIES
    base_env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    extra_env: Mapping[str, str] = field(default_factory=dict)
    """Set for every call over `base_env` (say `DOCKER_HOST` of a daemon started for the
    purpose); a secret-looking name is dropped all the same."""

    @property
    def kind(self) -> str:
        """`podman` or `docker` (anything not podman speaks docker's CLI)."""
        return "podman" if "podman" in Path(self.executable).name else "docker"

    def env(self) -> dict[str, str]:
        passed = (*_PASSED, *_PASSED_TO[self.kind])
        env = {k: v for k, v in self.base_env.items() if k in passed}
        env.update((k, v) for k, v in self.extra_env.items() if not SECRET_NAME.search(k))
        env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin")
        if self.kind == "podman":
            env["CONTAINERS_CONF"] = str(CONTAINERS_CONF)
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        return [self.executable, *args]

    async def call(
        self,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        retry: bool = True,
        cap: int = OUTPUT_CAP,
        supervised: bool = False,
    ) -> Called:
        """Run `<engine> args` to completion. Raises EnvironmentFault when the engine
        cannot be started or every attempt hung. `supervised` (a build): the call runs
        under runner/sandbox/reaper.py, which ends it and whatever it started (a `RUN`
        step's processes) when it times out or when this process dies, even by SIGKILL;
        a killed batch's build would otherwise run on, then race the next batch's."""
        limit = timeout_s if timeout_s is not None else self.call_timeout_s
        attempts = 1 + (self.retries if retry else 0)
        for _ in range(attempts):
            done = await self._once(args, limit, stdin, cap, supervised)
            if done is not None:
                return done
        raise EnvironmentFault(
            f"`{self.executable} {' '.join(args[:3])}` did not answer within {limit:g} s, "
            f"{attempts} times"
        )

    async def check(
        self,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        stdin: bytes | None = None,
        retry: bool = True,
    ) -> Called:
        """`call`, raising EnvironmentFault on a non-zero exit."""
        done = await self.call(args, timeout_s=timeout_s, stdin=stdin, retry=retry)
        if done.code != 0:
            raise EnvironmentFault(
                f"`{self.executable} {' '.join(args[:3])}` failed (exit {done.code}): {done.said()}"
            )
        return done

    async def _once(
        self, args: Sequence[str], limit: float, stdin: bytes | None, cap: int, supervised: bool
    ) -> Called | None:
        # One byte over the cap, so a caller that must have all of it can tell it got too much.
        out, err = Bounded(cap + 1), Bounded(cap + 1)
        argv = self.argv(args)
        if supervised:
            reaper = [sys.executable, "-I", "-S", str(REAPER), "--parent-death", str(os.getpid())]
            argv = [*reaper, *argv]
        code = await run_once(
            argv,
            self.env(),
            stdin=stdin,
            stdout=out,
            stderr=err,
            limit=limit,
            kill_group=supervised,
            what=f"the container engine {self.executable!r}",
            grace_s=STOP_GRACE_S if supervised else None,
        )
        if code is None:
            return None
        return Called(code, bytes(out.data), bytes(err.data))
