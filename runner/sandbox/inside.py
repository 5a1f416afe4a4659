"""The one long-lived process a container environment keeps inside its container.

`podman exec` costs about 0.26 s a call here, over the 0.1 s a command may add; so the
runner starts this once per container (`exec -i ... python3 -I -S -c <this file>`) and
sends it each command as a frame on stdin. It runs the command in its own session, feeds
it its stdin, streams its output back as frames, kills it (and everything it started) at
its deadline, and answers with the exit status. It is a child subreaper, so whatever a
command leaves behind (`setsid -f`, a double fork) is reparented here and killed when the
command ends, as the bubblewrap sandbox's PID namespace does.

It runs in someone else's image: the standard library only, Python 3.5 and later (no
f-strings), and it never touches anything but the commands it is asked to run.

Frames: a request is a 4-byte big-endian length and a JSON object (`argv`, `cwd`, `env`,
`stdin`: a byte count that follows, `timeout`, `split`: stderr apart); an answer is frames
of a kind byte and a 4-byte length: `o` stdout (with stderr unless split), `e` stderr,
`x` the end (JSON: `code`, `timed_out`), `R` ready (sent once at start).
"""

import contextlib
import ctypes
import errno
import json
import os
import select
import signal
import struct
import subprocess
import sys
import time
from typing import IO, Any, Dict, List

GRACE_S = 0.2
CHUNK = 65536


def send(out: IO[bytes], kind: bytes, data: bytes) -> None:
    out.write(kind + struct.pack(">I", len(data)) + data)
    out.flush()


def read_exact(inp: IO[bytes], n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = inp.read(n - len(buf))
        if not chunk:
            sys.exit(0)
        buf += chunk
    return buf


def descendants() -> List[int]:
    me = os.getpid()
    children = {}  # type: Dict[int, List[int]]
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(name))
    found = []  # type: List[int]
    todo = [me]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_all() -> None:
    """Kill and reap every descendant, in rounds (a fork bomb still converges)."""
    for _ in range(1000):
        pids = descendants()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        reap()
        if not pids:
            return


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except OSError as exc:
            if exc.errno == errno.ECHILD:
                return
            raise
        if pid == 0:
            return


def run(req: Dict[str, Any], data: bytes, out: IO[bytes]) -> Dict[str, Any]:
    env = dict(os.environ)
    env.update(req.get("env") or {})
    split = bool(req.get("split"))
    cwd = req.get("cwd") or None
    if cwd is not None and not os.path.isdir(cwd):
        send(out, b"o", ("cannot run in %s: not a directory\n" % cwd).encode())
        return {"code": 1, "timed_out": False}
    try:
        proc = subprocess.Popen(
            req["argv"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE if split else subprocess.STDOUT,
            start_new_session=True,
        )
    except OSError as exc:
        send(out, b"o", ("cannot run %r: %s\n" % (req["argv"][0], exc.strerror)).encode())
        return {"code": 127 if exc.errno == errno.ENOENT else 126, "timed_out": False}
    assert proc.stdin is not None and proc.stdout is not None
    stdin_pipe = proc.stdin
    deadline = time.monotonic() + float(req["timeout"])
    pipes = {proc.stdout.fileno(): b"o"}
    if proc.stderr is not None:
        pipes[proc.stderr.fileno()] = b"e"
    stdin_fd = stdin_pipe.fileno()
    os.set_blocking(stdin_fd, False)
    pending = memoryview(data)
    writers = [stdin_fd] if pending else []
    if not pending:
        stdin_pipe.close()
    timed_out = False
    exited_at = None
    while pipes or writers:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if exited_at is None and proc.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > GRACE_S:
            break
        wait = min(deadline - now, 0.05 if exited_at is not None else 0.5)
        readable, writable, _ = select.select(list(pipes), writers, [], wait)
        for fd in readable:
            chunk = os.read(fd, CHUNK)
            if chunk:
                send(out, pipes[fd], chunk)
            else:
                del pipes[fd]
        if writable:
            try:
                sent = os.write(stdin_fd, pending[:CHUNK])
                pending = pending[sent:]
            except OSError:
                pending = pending[:0]
            if not pending:
                writers = []
                stdin_pipe.close()
    # The command itself is waited for first: kill_all reaps any child, and a status it
    # took would be lost to Popen.
    if timed_out:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
    try:
        code = proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
    kill_all()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
    if timed_out:
        code = 124
    elif code < 0:
        code = 128 - code
    return {"code": code, "timed_out": timed_out}


def main() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    # A command that exits before reading all its stdin must not take the helper with
    # it: EPIPE is an OSError here, and each command gets SIGPIPE back (Popen's
    # restore_signals).
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    send(out, b"R", b"")
    while True:
        (size,) = struct.unpack(">I", read_exact(inp, 4))
        req = json.loads(read_exact(inp, size).decode())
        data = read_exact(inp, int(req.get("stdin") or 0))
        result = run(req, data, out)
        send(out, b"x", json.dumps(result).encode())


if __name__ == "__main__":
    main()
