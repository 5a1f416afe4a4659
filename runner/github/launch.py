"""Starting the runner from the run step: its environment, its key, its error lines.

Why apart from the run step: this is the one place in the Action that starts a process
holding the API key, so what that process may see (no step-steering files, no ACTIONS_*
tokens, the key on a pipe) and what it may write back (the files are restored, its
errors become a bounded number of annotations) is read and reviewed in one piece.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from runner.errors import RunnerError
from runner.github.workflow_io import annotate
from runner.vocabulary import EXIT_BAD_INPUT

RUNNER_FILES = ("GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_STEP_SUMMARY")
"""The files through which a step steers later ones (variables, outputs, PATH, post-step
state, the summary): the runner does not get their names, and the action puts back any
change made to them while it ran."""
HIDDEN_VARIABLES = re.compile(r"ACTIONS_[A-Z0-9_]+|" + "|".join(RUNNER_FILES))
"""Variables the runner's process (and so the agent) never sees: the step-steering files
and every ACTIONS_* value (runtime and cache tokens, OIDC request token and URL). A
GITHUB_TOKEN a job's `env:` sets is left: a task file's `git.push` may name it."""


def runner_env(env: Mapping[str, str]) -> dict[str, str]:
    """The step's environment without HIDDEN_VARIABLES."""
    return {k: v for k, v in env.items() if not HIDDEN_VARIABLES.fullmatch(k)}


def snapshot_step_files(env: Mapping[str, str]) -> dict[str, bytes | None]:
    """The step-steering files as they are now (None: absent)."""
    found: dict[str, bytes | None] = {}
    for name in RUNNER_FILES:
        path = env.get(name)
        if path:
            try:
                found[path] = Path(path).read_bytes()
            except FileNotFoundError:
                found[path] = None
    return found


def restore_step_files(before: Mapping[str, bytes | None]) -> list[str]:
    """Put the step-steering files back as they were before the run; the ones that had
    changed. An unsandboxed agent can find them on disk even without their names."""
    changed = []
    for path, old in before.items():
        try:
            now: bytes | None = Path(path).read_bytes()
        except FileNotFoundError:
            now = None
        if now == old:
            continue
        changed.append(path)
        if old is None:
            Path(path).unlink(missing_ok=True)
        else:
            Path(path).write_bytes(old)
    return changed


def read_key(fd: int) -> str:
    """The API key from a pipe the step opened (`3<<<"$KEY"`), so it is in no process's
    environment: /proc/<pid>/environ shows the environment a process started with to
    every process of the same user, and an unsandboxed agent is one of those."""
    chunks: list[bytes] = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
    except OSError as exc:
        raise RunnerError(f"api-key: cannot read file descriptor {fd}: {exc.strerror}") from None
    key = b"".join(chunks).decode("utf-8", "replace").strip()
    if "\n" in key:
        raise RunnerError("api-key must be one line (the provider's key)")
    return key


ERROR_START = re.compile(r"(?:runner: )?error: (.*)|runner: (.*)")
"""The first line of one of the runner's own errors: `error: ...` (a located problem),
`runner: error: ...` (a bad flag) or `runner: ...` (it could not run)."""
PROGRESS_LINE = re.compile(r"runner: (?:\d+ runs?|\d+/\d+ runs done,.*|\d+ run\(s\) never .*)")
"""The runner's progress lines, which also start with `runner: ` but are no error."""
OTHER_LINE = re.compile(r"\[\d+/\d+\] |\s|usage: ")
"""Lines of the runner's log that end an error's continuation: a finished run, an
indented detail, argparse's usage."""
ANNOTATIONS = 10
"""`::error` annotations a run step makes at most; the rest are in the log."""


PR_SET_CHILD_SUBREAPER = 36
"""prctl option (Linux 3.4+): orphans of our descendants become our children, not init's,
whatever session or process group they moved to."""
REAP_SECONDS = 10.0
"""How long the step keeps killing what the run left behind (a process may fork anew)."""


def become_subreaper() -> bool:
    """Make this process the one that inherits every orphan the run leaves: a process the
    agent started with `setsid nohup ... &` would otherwise outlive the step and read
    the environment of the job's later steps. False where Linux does not offer it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent`, from /proc (zombies included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(parent):
            found.append(int(entry.name))
    return found


def kill_leftovers() -> int:
    """Kill and reap every process left under this one once the runner has exited; how
    many there were. As a subreaper this process is the parent of each, and of theirs
    once they die, so the loop ends when nothing is left (or after REAP_SECONDS)."""
    killed: set[int] = set()
    deadline = time.monotonic() + REAP_SECONDS
    while time.monotonic() < deadline:
        left = _children(os.getpid())
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.add(pid)
        for pid in left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return len(killed)


def run_runner(argv: list[str], env: Mapping[str, str], secrets: str) -> int:
    """Run the runner, the secrets on its stdin. Its stderr goes through to the log,
    except its own error lines: when it could not run (exit 2 or 3) they become
    `::error` annotations instead, each multi-line error one annotation and at most
    ANNOTATIONS of them (the rest stay plain lines), because an error's text can be a
    model server's and must not flood the run's summary."""
    reaping = become_subreaper()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.PIPE if secrets else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    if proc.stdin is not None:
        proc.stdin.write(secrets)
        proc.stdin.close()
    assert proc.stderr is not None
    errors: list[tuple[list[str], list[str]]] = []  # (message lines, lines as printed)
    inside = ""  # "error" or "runner": the kind of error the next lines may continue
    for line in proc.stderr:
        text = line.rstrip("\n")
        start = ERROR_START.fullmatch(text)
        if start and PROGRESS_LINE.fullmatch(text):
            inside = ""
        elif start and not (inside == "runner" and start[1] is not None):
            errors.append(([start[1] if start[1] is not None else start[2]], [text]))
            inside = "error" if start[1] is not None else "runner"
            continue
        elif inside and text and not OTHER_LINE.match(text):
            errors[-1][0].append(text)  # `error: ` lines too, inside a `runner: ` error
            errors[-1][1].append(text)
            continue
        else:
            inside = ""
        sys.stderr.write(line)
        sys.stderr.flush()
    proc.stderr.close()
    code = proc.wait()
    if reaping and (left := kill_leftovers()):
        annotate(
            "warning",
            "runner",
            f"killed {left} process{'es' if left > 1 else ''} the run left running",
        )
    shown = errors[:ANNOTATIONS] if code >= EXIT_BAD_INPUT else []
    for message, _ in shown:
        annotate("error", "runner", "\n".join(message))
    if shown and len(errors) > ANNOTATIONS:
        annotate("error", "runner", f"{len(errors) - ANNOTATIONS} more in the log")
    for _, printed in errors[len(shown) :]:
        sys.stderr.write("".join(f"{t}\n" for t in printed))
    sys.stderr.flush()
    return code
