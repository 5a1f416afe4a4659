"""A run's environment in a container, driven through the podman or docker CLI.

`start` runs the image with `sleep infinity` (no network unless asked, the runner's
labels, CPU and memory caps), then starts one long-lived helper inside it
(runner/sandbox/inside.py, over `exec -i`), so a command costs a frame on a pipe instead
of a `podman exec` (about 0.26 s here). An image without python3 gets one `exec` per
command instead, under coreutils' `timeout`. Files go through the same channel: small
shell scripts and tar, so a link is checked where it lives, inside the container, and a
tar coming out is unpacked on the host without following or making any link.

Every engine call has a timeout and is retried when it hangs (runner/sandbox/engine.py).
A container that is gone mid-run (killed, removed, the engine down) raises
`EnvironmentLost`, so the run is an `error`; `stop` removes the container and may be
called any number of times.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import struct
import subprocess
import tarfile
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from runner import hostfs
from runner.errors import EnvironmentFault, EnvironmentLost, UnsafeFileError
from runner.sandbox.engine import Engine
from runner.sandbox.environment import DEFAULT_OUTPUT_CAP, ExecResult
from runner.sandbox.images import walk_tree
from runner.sandbox.orphans import labels, remove_args
from runner.sandbox.process import Capture

HELPER = (Path(__file__).parent / "inside.py").read_text()
START_TIMEOUT_S = 60.0
WATCHDOG_S = 15.0
"""How long past a command's own timeout the helper may stay silent before it is taken
for hung (it kills the command itself at the deadline)."""
FILE_TIMEOUT_S = 120.0
MAX_DIR_BYTES = 1 << 30

_READ = r"""p=$1
if [ -L "$p" ]; then echo "a symbolic link" >&2; exit 3; fi
if [ ! -e "$p" ]; then exit 4; fi
if [ -d "$p" ]; then echo "a directory, not a regular file" >&2; exit 3; fi
if [ ! -f "$p" ]; then echo "a FIFO, device or socket" >&2; exit 3; fi
exec head -c "$2" -- "$p"
"""
_WRITE = r"""p=$1; d=$(dirname -- "$p")
a=$d; while [ "$a" != / ] && [ "$a" != . ] && [ ! -e "$a" ]; do a=$(dirname -- "$a"); done
if [ -e "$a" ] && [ ! -d "$a" ]; then echo "$a is a file, not a directory" >&2; exit 3; fi
mkdir -p -- "$d" || exit 1
if [ -d "$p" ] && [ ! -L "$p" ]; then echo "a directory" >&2; exit 3; fi
if [ -e "$p" ] && [ ! -L "$p" ] && [ ! -f "$p" ]; then
  echo "a FIFO, device or socket" >&2; exit 3
fi
t="$d/.runner-write.$$"
if cat > "$t"; then rm -f -- "$p"; mv -f -- "$t" "$p"; else rm -f -- "$t"; exit 1; fi
"""
_REMOVE = r"""p=$1
if [ -d "$p" ] && [ ! -L "$p" ]; then
  rmdir -- "$p" 2>/dev/null || { echo "a directory that is not empty" >&2; exit 3; }
  exit 0
fi
exec rm -f -- "$p"
"""
_PUT = r"""mkdir -p -- "$1" && exec tar -x -f - -C "$1" --no-same-owner"""
_GET = r"""cd -- "$1" && exec tar -c -f - ."""


class ContainerEnvironment:
    """One run's container. `executable` of `engine` picks podman or docker."""

    def __init__(
        self,
        *,
        engine: Engine,
        image: str,
        workdir: str,
        batch_id: str,
        run_name: str,
        network: str = "none",
        cpus: float | None = None,
        memory_mb: int | None = None,
        user: str | None = None,
        run_args: Sequence[str] = (),
        start_timeout_s: float = START_TIMEOUT_S,
        helper: bool = True,
    ) -> None:
        self.engine = engine
        self.backend = engine.kind
        self.image = image
        self.workdir = workdir
        self.limit_notes: list[str] = []
        self.labels = labels(batch_id, run_name)
        slug = re.sub(r"[^a-z0-9]+", "-", f"{batch_id}-{run_name}".lower()).strip("-")[:40]
        self.name = f"runner-{slug}-{uuid.uuid4().hex[:8]}"
        self.network = network
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.user = user
        self.run_args = list(run_args)
        self.start_timeout_s = start_timeout_s
        self.use_helper = helper
        self._helper: Process | None = None
        self._frames: BufferedByteReceiveStream | None = None
        self._lock = anyio.Lock()
        self._started = False
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------

    def run_argv(self) -> list[str]:
        args = ["run", "-d", "--init", "--name", self.name, "--network", self.network]
        for key, value in self.labels.items():
            args += ["--label", f"{key}={value}"]
        if self.cpus is not None:
            args += ["--cpus", f"{self.cpus:g}"]
        if self.memory_mb is not None:
            args += ["--memory", f"{self.memory_mb}m"]
        if self.user is not None:
            args += ["--user", self.user]
        # No --workdir: podman with runc refuses one the image lacks; `start` makes it.
        args += [*self.run_args, self.image, "sleep", "infinity"]
        return args

    async def start(self) -> None:
        if self._started or self._stopped:
            raise EnvironmentFault(f"{self.name}: an environment starts once")
        self._started = True
        for _ in range(1 + self.engine.retries):
            with contextlib.suppress(EnvironmentFault):
                done = await self.engine.call(
                    self.run_argv(), timeout_s=self.start_timeout_s, retry=False
                )
                break
            # It hung: a half-made container of that name may be left; remove it first.
            await self.engine.call(remove_args(self.engine, [self.name]))
        else:
            raise EnvironmentFault(
                f"`{self.engine.executable} run` of {self.image} did not answer within "
                f"{self.start_timeout_s:g} s"
            )
        if done.code != 0:
            raise EnvironmentFault(
                f"cannot start a container of {self.image} (exit {done.code}): {done.said()}"
            )
        if self.use_helper:
            await self._start_helper()
        made = await self._run(
            ["mkdir", "-p", self.workdir],
            cwd="/",
            env=None,
            stdin=None,
            timeout_s=30,
            sink=_Sink(4096, split=True),
        )
        if made["code"] != 0:
            raise EnvironmentFault(f"{self.name}: cannot make the workdir {self.workdir}")

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        with anyio.CancelScope(shield=True):
            await self._close_helper()
            if self._started:
                await self.engine.call(remove_args(self.engine, [self.name]))

    async def alive(self) -> bool:
        done = await self.engine.call(["inspect", "--type", "container", self.name])
        if done.code != 0:
            return False
        try:
            state = json.loads(done.stdout)[0]["State"]
        except (ValueError, LookupError, TypeError):
            return False
        return bool(state.get("Running")) and not state.get("Paused", False)

    async def _lost(self, what: str) -> EnvironmentFault:
        if self._stopped:
            return EnvironmentFault(f"{self.name}: the environment was stopped")
        if not await self.alive():
            return EnvironmentLost(
                f"the container {self.name} ({self.image}) is gone: {what}; the run cannot "
                "go on without its environment"
            )
        return EnvironmentFault(f"{self.name}: {what}")

    # -- the helper inside -------------------------------------------------------------

    async def _start_helper(self) -> None:
        argv = self.engine.argv(["exec", "-i", self.name, "python3", "-I", "-S", "-c", HELPER])
        proc = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=self.engine.env(),
            start_new_session=True,
        )
        assert proc.stdout is not None
        frames = BufferedByteReceiveStream(proc.stdout)
        ready = False
        with (
            anyio.move_on_after(self.start_timeout_s),
            contextlib.suppress(anyio.EndOfStream, anyio.IncompleteRead),
        ):
            ready = await frames.receive_exactly(5) == b"R\0\0\0\0"
        if ready:
            self._helper, self._frames = proc, frames
            return
        await _end(proc)
        if not await self.alive():
            raise await self._lost("it ended as it started")
        self.use_helper = False  # no python3 in the image: one `exec` per command

    async def _close_helper(self) -> None:
        proc, self._helper, self._frames = self._helper, None, None
        if proc is not None:
            await _end(proc)

    async def _ask(
        self, req: dict[str, Any], stdin: bytes, timeout_s: float, sink: _Sink
    ) -> dict[str, Any]:
        """One request to the helper; frames go to `sink`, the end's JSON comes back."""
        if self._helper is None:
            await self._start_helper()
            if self._helper is None:
                raise EnvironmentFault(f"{self.name}: no helper")
        proc, frames = self._helper, self._frames
        assert proc.stdin is not None and frames is not None
        body = json.dumps({**req, "stdin": len(stdin), "timeout": timeout_s}).encode()
        try:
            with anyio.fail_after(timeout_s + WATCHDOG_S):
                await proc.stdin.send(struct.pack(">I", len(body)) + body + stdin)
                while True:
                    head = await frames.receive_exactly(5)
                    kind, size = head[:1], struct.unpack(">I", head[1:])[0]
                    data = await frames.receive_exactly(size) if size else b""
                    if kind == b"x":
                        return dict(json.loads(data))
                    sink.add(kind, data)
        except (
            TimeoutError,
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            OSError,
        ) as exc:
            await self._close_helper()
            what = "hung" if isinstance(exc, TimeoutError) else "ended"
            raise await self._lost(f"its command channel {what}") from None
        except anyio.get_cancelled_exc_class():
            # Cut mid-command (a signal, the run's timeout): the helper is still busy with
            # it and its frames would answer the next request; a fresh one serves the
            # wind-up (the diff, the check) while `stop` ends the container.
            await self._close_helper()
            raise

    async def _exec_cli(
        self,
        argv: Sequence[str],
        cwd: str,
        env: Mapping[str, str],
        stdin: bytes | None,
        timeout_s: float,
        sink: _Sink,
        user: str | None = None,
    ) -> dict[str, Any]:
        """Without the helper: one `exec` under `timeout`, output kept up to the cap."""
        args = ["exec", "-i", "-w", cwd]
        if user is not None:
            args += ["--user", user]
        for key, value in env.items():
            args += ["-e", f"{key}={value}"]
        secs = f"{max(timeout_s, 0.001):.3f}"
        args += [self.name, "timeout", "-s", "KILL", secs, *argv]
        began = time.monotonic()
        done = await self.engine.call(
            args,
            timeout_s=timeout_s + WATCHDOG_S,
            stdin=stdin or b"",
            retry=False,
            cap=sink.cap,
        )
        if done.code in (125, 126, 127) and not await self.alive():
            raise await self._lost("exec failed")
        sink.add(b"o", done.stdout)
        sink.add(b"e", done.stderr)
        timed_out = done.code == 137 and time.monotonic() - began >= timeout_s
        return {"code": 124 if timed_out else done.code, "timed_out": timed_out}

    async def _run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str] | None,
        stdin: bytes | None,
        timeout_s: float,
        sink: _Sink,
        user: str | None = None,
    ) -> dict[str, Any]:
        if not self._started or self._stopped:
            raise EnvironmentFault(f"{self.name}: the environment is not running")
        where = self.workdir if cwd is None else self._path(cwd)
        async with self._lock:
            if self.use_helper and user is None:
                req = {"argv": list(argv), "cwd": where, "env": dict(env or {})}
                return await self._ask({**req, "split": sink.split}, stdin or b"", timeout_s, sink)
            return await self._exec_cli(argv, where, env or {}, stdin, timeout_s, sink, user)

    # -- commands ----------------------------------------------------------------------

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
        user: str | None = None,
    ) -> ExecResult:
        """`user` (a name or uid[:gid], as `exec --user` takes it) runs this one command
        as another user than the container's, e.g. a suite's verifier; it is not in the
        Environment protocol, since kubectl's exec cannot. Such a command bypasses the
        helper (which runs as the container's user) and goes through the engine's CLI."""
        start = time.monotonic()
        sink = _Sink(output_cap, split=False)
        end = await self._run(
            argv, cwd=cwd, env=env, stdin=stdin, timeout_s=timeout_s, sink=sink, user=user
        )
        capture = sink.capture
        lines = capture.newlines + (0 if capture.last == b"\n" else 1)
        return ExecResult(
            int(end["code"]),
            capture.value(),
            time.monotonic() - start,
            timed_out=bool(end["timed_out"]),
            truncated_bytes=capture.dropped,
            total_lines=lines,
        )

    async def _script(
        self, script: str, args: Sequence[str], *, stdin: bytes = b"", cap: int
    ) -> tuple[int, bytes, str]:
        """A shell script's exit, stdout (whole, up to `cap` and one byte more) and
        stderr."""
        sink = _Sink(cap, split=True)
        argv = ["sh", "-c", script, "sh", *args]
        end = await self._run(
            argv, cwd=None, env=None, stdin=stdin, timeout_s=FILE_TIMEOUT_S, sink=sink
        )
        if end["timed_out"]:
            raise EnvironmentFault(f"{self.name}: a file operation took over {FILE_TIMEOUT_S} s")
        return int(end["code"]), bytes(sink.out), sink.err.decode(errors="replace").strip()

    def _path(self, path: str) -> str:
        return str(PurePosixPath(self.workdir, path))

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        full = self._path(path)
        code, out, err = await self._script(_READ, [full, str(max_bytes + 1)], cap=max_bytes + 1)
        if code == 4:
            return None
        if code == 3:
            raise UnsafeFileError(f"{full}: {err}; only regular files are read")
        if code != 0:
            raise EnvironmentFault(f"{full}: cannot read (exit {code}): {err}")
        if len(out) > max_bytes:
            raise UnsafeFileError(f"{full}: over {max_bytes} bytes")
        return out

    async def write_file(self, path: str, data: bytes) -> None:
        full = self._path(path)
        code, _, err = await self._script(_WRITE, [full], stdin=data, cap=4096)
        if code == 3:
            raise UnsafeFileError(f"{full}: {err}; only regular files are written")
        if code != 0:
            raise EnvironmentFault(f"{full}: cannot write (exit {code}): {err}")

    async def remove_file(self, path: str) -> None:
        full = self._path(path)
        code, _, err = await self._script(_REMOVE, [full], cap=4096)
        if code == 3:
            raise UnsafeFileError(f"{full}: {err}; only files are removed")
        if code != 0:
            raise EnvironmentFault(f"{full}: cannot remove (exit {code}): {err}")

    async def put_dir(self, src: Path, dest: str) -> None:
        data = await anyio.to_thread.run_sync(_pack, src, MAX_DIR_BYTES)
        full = self._path(dest)
        code, _, err = await self._script(_PUT, [full], stdin=data, cap=4096)
        if code != 0:
            raise EnvironmentFault(f"{full}: cannot unpack (exit {code}): {err}")

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        full = self._path(src)
        cap = max_bytes + (16 << 20)
        code, out, err = await self._script(_GET, [full], cap=cap)
        if code != 0:
            raise EnvironmentFault(f"{full}: cannot pack (exit {code}): {err}")
        if len(out) > cap:
            raise UnsafeFileError(f"{full}: over {max_bytes} bytes")
        await anyio.to_thread.run_sync(_unpack, out, dest, max_bytes, full)


class _Sink:
    """Where a command's frames go: a head+tail capture (`exec`), or stdout whole up to a
    cap and stderr apart (file scripts)."""

    def __init__(self, cap: int, *, split: bool) -> None:
        self.cap = cap
        self.split = split
        self.capture = Capture(cap)
        self.out = bytearray()
        self.err = bytearray()

    def add(self, kind: bytes, data: bytes) -> None:
        if not self.split:
            self.capture.add(data)
        elif kind == b"o":
            room = self.cap + 1 - len(self.out)
            if room > 0:
                self.out += data[:room]
        elif len(self.err) < 65536:
            self.err += data[:65536]


async def _end(proc: Process) -> None:
    with anyio.CancelScope(shield=True):
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
        await proc.aclose()


def _pack(src: Path, max_bytes: int) -> bytes:
    """A tar of `src`'s files and folders (a link, FIFO or device refused), bounded."""
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, path, mode in walk_tree(src):
            info = tarfile.TarInfo(rel)
            info.mode = mode & 0o7777
            info.mtime = int(os.lstat(path).st_mtime)
            if os.path.isdir(path) and not os.path.islink(path):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
                continue
            with hostfs.open_parent(src, rel, where="a folder copied in") as (dir_fd, name):
                fd = hostfs.open_regular(name, dir_fd, str(path))
            with open(fd, "rb") as f:
                data = hostfs.read_bytes(f.fileno(), max_bytes - total + 1)
            if total + len(data) > max_bytes:
                raise UnsafeFileError(f"{src}: over {max_bytes} bytes to copy in")
            total += len(data)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _unpack(data: bytes, dest: Path, max_bytes: int, shown: str) -> None:
    """Unpack a tar from the container under `dest`: files and folders only, no name
    leaving `dest`, no link followed on the way, `max_bytes` of content at most."""
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        for member in tar:
            rel = PurePosixPath(member.name)
            parts = [p for p in rel.parts if p not in ("", ".")]
            if rel.is_absolute() or ".." in parts:
                raise UnsafeFileError(f"{shown}/{member.name}: a name leaving the folder")
            if not parts:
                continue
            if member.isdir():
                with hostfs.open_parent(dest, "/".join([*parts, "x"]), create=True) as _:
                    pass
                continue
            if not member.isreg():
                raise UnsafeFileError(
                    f"{shown}/{'/'.join(parts)}: a link or special file; only files and "
                    "folders are copied out"
                )
            total += member.size
            if total > max_bytes:
                raise UnsafeFileError(f"{shown}: over {max_bytes} bytes")
            got = tar.extractfile(member)
            assert got is not None
            with hostfs.open_parent(dest, "/".join(parts), create=True) as (fd, name):
                out = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                    0o755 if member.mode & 0o111 else 0o644,
                    dir_fd=fd,
                )
                with open(out, "wb") as f:
                    f.write(got.read())
