"""The `kubernetes` environment: one Pod per run, driven through kubectl.

`start` creates the Pod (runner/sandbox/podspec.py) and waits for it to be Ready; every
command is a `kubectl exec` of a small `sh` wrapper that changes directory, exports the
variables and runs argv under `timeout`, all passed as positional parameters, so no string
of the caller's is ever read as shell text. The wrapper prints one marker byte before
anything else: a failure without it happened before the command started (safe to retry,
or the Pod is gone), a failure after it is the command's own. Files go through the same
exec: `cat` for one file, tar streams for folders, unpacked on the host by tarstream.py.

A Pod that vanished or failed mid-run raises `EnvironmentLost` (the run is `error`). `stop`
deletes the Pod without waiting and is safe to repeat. `reap_orphans` deletes the Pods a
killed batch of this host left, selected by the runner's own labels in one namespace.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from runner.errors import EnvironmentFault, EnvironmentLost, SandboxError, UnsafeFileError
from runner.sandbox import podspec, tarstream
from runner.sandbox.cli_call import Bounded
from runner.sandbox.environment import DEFAULT_OUTPUT_CAP, ExecResult
from runner.sandbox.kubectl import Kubectl
from runner.sandbox.process import Capture

MARK = b"\x01"
KILL_AFTER_S = 2
"""After `timeout_s`, how long the command's TERM is given before its group is killed."""
SLACK_S = 10.0
"""How long past that kubectl itself may take before the runner kills it."""
FILE_TIMEOUT_S = 120.0
MAX_PUT_BYTES = 512 << 20
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_S = TypeVar("_S", Capture, Bounded)
_TERMINATED = re.compile(rb"^command terminated with exit code \d+\s*$")

# $1 cwd, $2 the number of NAME=value words that follow, then the timeout, then argv.
# GNU timeout makes its own process group and kills all of it; where the image has no
# `timeout` the command runs bare and the runner's own deadline ends the exec.
_RUN = f"""printf '\\001'
exec 2>&1
cd -- "$1" || exit 126
shift
n=$1
shift
while [ "$n" -gt 0 ]; do export "$1" || exit 126; shift; n=$((n - 1)); done
t=$1
shift
if command -v timeout >/dev/null 2>&1; then exec timeout -k {KILL_AFTER_S} "$t" "$@"; fi
exec "$@"
"""

# Exit 3: a link, 4: nothing there, 5: not a regular file (its kind on stderr), 6: too big.
_READ = """printf '\\001'
f=$1
if [ -L "$f" ]; then exit 3; fi
if [ ! -e "$f" ]; then exit 4; fi
if [ -d "$f" ]; then echo directory >&2; exit 5; fi
if [ ! -f "$f" ]; then echo 'FIFO, device or socket' >&2; exit 5; fi
size=$(wc -c < "$f") || exit 1
if [ "$size" -gt "$2" ]; then echo "$size" >&2; exit 6; fi
exec cat -- "$f"
"""
# A link in the file's place is removed, not written through; exit 5: why not, on stderr.
# A refusal reads its stdin first: an exec whose stdin is left unread can lose the
# command's output (the marker with it) on the way back.
_WRITE = """printf '\\001'
f=$1
no() { echo "$1" >&2; cat >/dev/null; exit 5; }
if [ -d "$f" ] && [ ! -L "$f" ]; then no 'a directory'; fi
if [ -e "$f" ] && [ ! -L "$f" ] && [ ! -f "$f" ]; then no 'a FIFO, device or socket'; fi
a=$(dirname -- "$f")
while [ "$a" != / ] && [ "$a" != . ] && [ ! -e "$a" ]; do a=$(dirname -- "$a"); done
if [ -e "$a" ] && [ ! -d "$a" ]; then no "under $a, a file, not a directory"; fi
mkdir -p -- "$(dirname -- "$f")" || exit 1
if [ -L "$f" ]; then rm -f -- "$f" || exit 1; fi
exec cat > "$f"
"""
_REMOVE = """printf '\\001'
if [ -d "$1" ] && [ ! -L "$1" ]; then rmdir -- "$1" 2>/dev/null || exit 5; exit 0; fi
exec rm -f -- "$1"
"""
_PUT = """printf '\\001'
mkdir -p -- "$1" && cd -- "$1" && exec tar -x -f - -o
"""
_GET = """printf '\\001'
cd -- "$1" || exit 4
exec tar -c -f - .
"""


class _Marked:
    """Strips the wrapper's marker byte from the front of stdout and notes it came."""

    def __init__(self, inner: Capture | Bounded) -> None:
        self.inner = inner
        self.started = False

    def add(self, chunk: bytes) -> None:
        if not self.started and chunk:
            self.started = chunk[:1] == MARK
            chunk = chunk[1:] if self.started else chunk
        self.inner.add(chunk)


def owner_from_env(environ: Mapping[str, str]) -> tuple[str, str] | None:
    """The runner's own Pod, when the Job gives it `RUNNER_POD_NAME` and `RUNNER_POD_UID`
    (the downward API; examples/kubernetes/benchmark-indexed-job.yaml)."""
    name, uid = environ.get("RUNNER_POD_NAME"), environ.get("RUNNER_POD_UID")
    return (name, uid) if name and uid else None


@dataclass
class PodEnvironment:
    """One run's Pod. `kubectl` names the executable and context; the rest is the Pod."""

    batch_id: str
    run_name: str
    image: str
    workdir: str = "/"
    namespace: str | None = None
    service_account: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    user: str | None = None
    network: str = "none"
    pull_policy: podspec.PullPolicy = "IfNotPresent"
    pull_secrets: tuple[str, ...] = ()
    start_timeout_s: float = 600.0
    kubectl: Kubectl = field(default_factory=Kubectl)
    owner_pod: tuple[str, str] | None = None
    host: str = field(default_factory=lambda: os.uname().nodename)
    backend: str = "kubernetes"
    limit_notes: list[str] = field(default_factory=list)
    name: str = ""

    def __post_init__(self) -> None:
        self.name = podspec.pod_name(self.batch_id, self.run_name)
        self._started = False

    def spec(self) -> podspec.PodSpec:
        extra = {podspec.NETWORK_LABEL: "none"} if self.network == "none" else {}
        return podspec.PodSpec(
            name=self.name,
            image=self.image,
            labels=podspec.run_labels(self.batch_id, self.run_name, self.host),
            namespace=self.namespace,
            service_account=self.service_account,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            user=self.user,
            workdir=None if self.workdir == "/" else self.workdir,
            pull_policy=self.pull_policy,
            pull_secrets=self.pull_secrets,
            owner_pod=self.owner_pod,
            extra_labels=extra,
        )

    def _ns(self) -> list[str]:
        return ["--namespace", self.namespace] if self.namespace else []

    @property
    def shown(self) -> str:
        return f"pod {self.namespace + '/' if self.namespace else ''}{self.name}"

    async def start(self) -> None:
        text = podspec.manifest(self.spec()).encode()
        self._started = True
        deadline = time.monotonic() + self.start_timeout_s
        for attempt in range(1 + self.kubectl.retries):
            done = await self.kubectl.call(
                [*self._ns(), "create", "-f", "-", "-o", "name"], stdin=text, retry=False
            )
            # A create that timed out may still have happened: the retry finds it there.
            if done.code == 0 or (attempt and "AlreadyExists" in done.said):
                break
            if "AlreadyExists" in done.said or "Forbidden" in done.said or attempt == 2:
                raise EnvironmentFault(f"cannot create {self.shown}: {done.said}")
        left = max(deadline - time.monotonic(), 1.0)
        wait = await self.kubectl.call(
            [
                *self._ns(),
                "wait",
                "--for=condition=Ready",
                f"pod/{self.name}",
                f"--timeout={int(left)}s",
            ],
            timeout_s=left + SLACK_S,
        )
        if wait.code != 0:
            why = await self._state()
            raise EnvironmentFault(
                f"{self.shown} was not Ready within {self.start_timeout_s:g} s: {why or wait.said}"
            )

    async def _state(self) -> str | None:
        """Why the Pod cannot run commands any more, or None while it can."""
        done = await self.kubectl.call([*self._ns(), "get", "pod", self.name, "-o", "json"])
        if done.code != 0:
            return "it no longer exists" if "NotFound" in done.said else None
        try:
            pod: dict[str, Any] = json.loads(done.stdout)
        except ValueError:
            return None
        return _dead(pod)

    async def _exec(
        self,
        script: str,
        args: Sequence[str],
        *,
        sink: Callable[[], _S],
        stdin: bytes | None,
        timeout_s: float,
    ) -> tuple[int | None, _S, str]:
        """Runs `sh -c script sh args...` in the Pod; retries only while the script never
        started and the Pod is alive. Returns (exit code, or None when the runner's own
        deadline passed, the stdout sink, what kubectl said beyond the exit code)."""
        front: list[str] = [*self._ns(), "exec", *(["-i"] if stdin is not None else []), self.name]
        argv: list[str] = [*front, "-c", podspec.CONTAINER, "--", "sh", "-c", script, "sh", *args]
        for attempt in range(1 + self.kubectl.retries):
            out = sink()
            marked = _Marked(out)
            done = await self.kubectl.once(argv, stdout=marked, stdin=stdin, timeout_s=timeout_s)
            if marked.started and (done.code == 0 or _only_termination(done.stderr)):
                return done.code, out, ""
            if marked.started and done.code is None:
                return None, out, done.said
            dead = await self._state()
            if dead is not None:
                raise EnvironmentLost(f"{self.shown}: {dead}")
            if marked.started:
                return done.code, out, done.said
            if attempt == self.kubectl.retries:
                raise EnvironmentFault(f"kubectl exec in {self.shown} failed: {done.said}")
        raise AssertionError("unreachable")

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        if not argv:
            raise SandboxError("exec needs a command")
        words = []
        for key, value in (env or {}).items():
            if not _NAME.fullmatch(key):
                raise SandboxError(f"{key!r} is not a valid environment variable name")
            words.append(f"{key}={value}")
        args = [
            cwd or self.workdir,
            str(len(words)),
            *words,
            str(max(1, math.ceil(timeout_s))),
            *argv,
        ]
        start = time.monotonic()
        code, capture, said = await self._exec(
            _RUN,
            args,
            sink=lambda: Capture(output_cap),
            stdin=stdin,
            timeout_s=timeout_s + KILL_AFTER_S + SLACK_S,
        )
        duration = time.monotonic() - start
        timed_out = code is None or (code in (124, 137) and duration >= timeout_s)
        if said:
            capture.add(f"\n[kubectl: {said}]\n".encode())
        lines = capture.newlines + (0 if capture.last == b"\n" else 1)
        return ExecResult(
            124 if timed_out else (code if code is not None else -1),
            capture.value(),
            duration,
            timed_out=timed_out,
            truncated_bytes=capture.dropped,
            total_lines=lines,
        )

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        code, out, said = await self._exec(
            _READ,
            [path, str(max_bytes)],
            sink=lambda: Bounded(max_bytes),
            stdin=None,
            timeout_s=FILE_TIMEOUT_S,
        )
        shown = f"{path} (in {self.shown})"
        if code == 3:
            raise UnsafeFileError(
                f"{shown}: is a symbolic link; the runner reads only regular files"
            )
        if code == 4:
            return None
        if code == 5:
            raise UnsafeFileError(f"{shown}: is a {said or 'special file'}, not a regular file")
        if code == 6 or out.over:
            raise UnsafeFileError(f"{shown}: is larger than {max_bytes} bytes")
        if code != 0:
            raise EnvironmentFault(f"cannot read {shown} (exit {code}): {said}")
        return bytes(out.data)

    async def write_file(self, path: str, data: bytes) -> None:
        code, _, said = await self._exec(
            _WRITE, [path], sink=lambda: Bounded(4096), stdin=data, timeout_s=FILE_TIMEOUT_S
        )
        if code == 5:
            raise UnsafeFileError(f"{path} (in {self.shown}): is {said}; only regular files")
        if code != 0:
            raise EnvironmentFault(f"cannot write {path} in {self.shown} (exit {code}): {said}")

    async def remove_file(self, path: str) -> None:
        code, _, said = await self._exec(
            _REMOVE, [path], sink=lambda: Bounded(4096), stdin=None, timeout_s=FILE_TIMEOUT_S
        )
        if code == 5:
            raise UnsafeFileError(
                f"{path} (in {self.shown}): is a directory that is not empty; not removed"
            )
        if code != 0:
            raise EnvironmentFault(f"cannot remove {path} in {self.shown} (exit {code}): {said}")

    async def put_dir(self, src: Path, dest: str) -> None:
        data = tarstream.pack(src, max_bytes=MAX_PUT_BYTES)
        code, _, said = await self._exec(
            _PUT, [dest], sink=lambda: Bounded(4096), stdin=data, timeout_s=FILE_TIMEOUT_S
        )
        if code != 0:
            raise EnvironmentFault(f"cannot copy {src} to {dest} in {self.shown}: {said}")

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        code, out, said = await self._exec(
            _GET,
            [src],
            sink=lambda: Bounded(max_bytes + tarstream.TAR_OVERHEAD),
            stdin=None,
            timeout_s=FILE_TIMEOUT_S,
        )
        shown = f"{src} (in {self.shown})"
        if out.over:
            raise UnsafeFileError(f"{shown}: holds more than {max_bytes} bytes")
        if code != 0:
            raise EnvironmentFault(f"cannot copy {shown} out (exit {code}): {said}")
        tarstream.unpack(bytes(out.data), dest, max_bytes=max_bytes, shown=shown)

    async def stop(self) -> None:
        """Deletes the Pod without waiting for it to go. (kubectl turns a grace period of
        0 into 1 s unless --force is given; forcing would let the container outlive its
        API object on a node that cannot be reached.)"""
        if not self._started:
            return
        await delete_pods(self.kubectl, self.namespace, [self.name])


def _only_termination(stderr: bytes) -> bool:
    """kubectl's own note on a non-zero exit of the command, and nothing else."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return all(_TERMINATED.match(line) for line in lines)


def _dead(pod: Mapping[str, Any]) -> str | None:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "it is being deleted"
    phase = status.get("phase")
    if phase in ("Failed", "Succeeded"):
        return f"it ended ({phase}: {status.get('reason') or status.get('message') or 'no reason'})"
    for cs in status.get("containerStatuses") or ():
        terminated = (cs.get("state") or {}).get("terminated")
        if cs.get("name") == podspec.CONTAINER and terminated:
            return (
                f"its container ended ({terminated.get('reason') or 'exit'} "
                f"{terminated.get('exitCode')})"
            )
    return None


async def delete_pods(kubectl: Kubectl, namespace: str | None, names: Sequence[str]) -> None:
    if not names:
        return
    ns = ["--namespace", namespace] if namespace else []
    done = await kubectl.call(
        [*ns, "delete", "pod", *names, "--grace-period=0", "--wait=false", "--ignore-not-found"]
    )
    if done.code != 0:
        raise EnvironmentFault(f"cannot delete pods {', '.join(names)}: {done.said}")


async def reap_orphans(
    kubectl: Kubectl,
    *,
    namespace: str | None,
    host: str,
    alive: Callable[[str], bool],
) -> list[str]:
    """Deletes the runner's Pods that this host's batches left behind: those labelled
    `io.runner.owner=runner` and this host, in `namespace`, whose batch `alive` says is
    gone. Never a Pod without the runner's label, another host's, or a live batch's."""
    selector = (
        f"{podspec.OWNER_LABEL}={podspec.OWNER},{podspec.HOST_LABEL}={podspec.label_value(host)}"
    )
    ns = ["--namespace", namespace] if namespace else []
    done = await kubectl.call([*ns, "get", "pods", "-l", selector, "-o", "json"])
    if done.code != 0:
        raise EnvironmentFault(f"cannot list the runner's pods: {done.said}")
    try:
        items = json.loads(done.stdout).get("items") or []
    except ValueError:
        raise EnvironmentFault("kubectl get pods answered with something not JSON") from None
    doomed = []
    for pod in items:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if labels.get(podspec.OWNER_LABEL) != podspec.OWNER:
            continue
        batch = labels.get(podspec.BATCH_LABEL)
        if batch is not None and not alive(batch):
            doomed.append(pod["metadata"]["name"])
    await delete_pods(kubectl, namespace, doomed)
    return doomed
