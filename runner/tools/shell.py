"""The `shell` tool: argv in, exit code, wall time and output back.

Output goes back in Codex's structured form (a JSON string with `output` and `metadata`),
cut to a byte budget keeping the head and the tail, since the end of a build log is
usually where the error is.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from typing import Any

from runner.errors import ToolArgumentsError
from runner.items import dumps
from runner.sandbox.environment import EXECUTOR_OUTPUT_CAP
from runner.tools import ToolCall, ToolContext, ToolResult
from runner.tools.apply_patch import apply_patch, patch_started

OUTPUT_BUDGET_BYTES = 10_000
MAX_TIMEOUT_MS = 24 * 3600 * 1000

SPEC: dict[str, Any] = {
    "type": "function",
    "name": "shell",
    "description": (
        "Run a command and get back its exit code, wall time and output (stdout and stderr "
        "together). `command` is an argv list passed to execvp, not a shell string: wrap "
        'shell syntax as ["bash", "-lc", "..."]. Set `workdir` on every call. '
        "Nobody is watching: commands must not wait for input."
    ),
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {
            "command": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The command and its arguments.",
            },
            "workdir": {
                "type": "string",
                "description": "Directory to run in; relative paths are taken from "
                "the workspace root.",
            },
            "timeout_ms": {
                "type": "number",
                "description": "Kill the command after this many milliseconds.",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}


def truncate_middle(text: str, budget: int = OUTPUT_BUDGET_BYTES) -> tuple[str, bool]:
    """Keep `budget` bytes split between head and tail, cut on UTF-8 boundaries."""
    raw = text.encode()
    if len(raw) <= budget:
        return text, False
    half = budget // 2
    head = raw[:half].decode("utf-8", "ignore")
    tail = raw[len(raw) - half :].decode("utf-8", "ignore")
    cut = len(text) - len(head) - len(tail)
    return f"{head}…{cut} chars truncated…{tail}", True


def format_output(
    exit_code: int,
    duration_s: float,
    text: str,
    total_lines: int | None = None,
    *,
    plain: bool = False,
) -> str:
    """Codex's structured JSON form, or its plain-text form (used when the freeform
    apply_patch tool is offered, as Codex does for the models trained that way)."""
    body, truncated = truncate_middle(text)
    lines = total_lines if total_lines is not None else text.count("\n") + 1
    if plain:
        head = f"Exit code: {exit_code}\nWall time: {duration_s:.1f} seconds\n"
        if truncated:
            head += f"Total output lines: {lines}\n"
        return f"{head}Output:\n{body}"
    if truncated:
        body = f"Total output lines: {lines}\n\n{body}"
    return dumps(
        {
            "output": body,
            "metadata": {"exit_code": exit_code, "duration_seconds": round(duration_s, 1)},
        }
    )


class ShellArgs:
    """Validated arguments; a bad call becomes a message to the model, never an exception."""

    def __init__(self, raw: str, default_timeout_ms: int) -> None:
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:  # also an integer too long, or too deep
            raise ToolArgumentsError(f"arguments are not valid JSON: {exc}") from None
        if not isinstance(args, dict):
            raise ToolArgumentsError("arguments must be a JSON object")
        command = args.get("command")
        if isinstance(command, str):
            command = ["bash", "-lc", command]
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(a, str) for a in command)
        ):
            raise ToolArgumentsError("`command` must be a non-empty array of strings")
        if any("\x00" in a for a in command):
            raise ToolArgumentsError("`command` must not contain NUL bytes")
        self.command: list[str] = command
        workdir = args.get("workdir")
        if workdir is not None and not isinstance(workdir, str):
            raise ToolArgumentsError("`workdir` must be a string")
        self.workdir: str | None = workdir
        timeout = args.get("timeout_ms", args.get("timeout", default_timeout_ms))
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not timeout > 0  # NaN too: JSON from a model may carry it
        ):
            raise ToolArgumentsError("`timeout_ms` must be a positive number")
        self.timeout_ms = min(float(timeout), MAX_TIMEOUT_MS)


class ShellTool:
    name = "shell"

    def __init__(self, *, default_timeout_ms: int = 10_000, plain_output: bool = False) -> None:
        self.default_timeout_ms = default_timeout_ms
        self.plain_output = plain_output

    def spec(self) -> dict[str, Any]:
        return SPEC

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        try:
            args = ShellArgs(call.arguments, self.default_timeout_ms)
        except ToolArgumentsError:
            return {
                "type": "command_execution",
                "command": call.arguments,
                "aggregated_output": "",
                "exit_code": None,
                "status": "in_progress",
            }
        from runner.tools.patch_format import extract_shell_patch  # with the first command

        intercepted = extract_shell_patch(args.command)
        if intercepted is not None:
            patch, cd = intercepted
            where = "/".join(p for p in (args.workdir, cd) if p) or None
            return patch_started(patch, where)
        return {
            "type": "command_execution",
            "command": _display(args.command),
            "aggregated_output": "",
            "exit_code": None,
            "status": "in_progress",
        }

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        try:
            args = ShellArgs(call.arguments, self.default_timeout_ms)
        except ToolArgumentsError as exc:
            return ToolResult(f"invalid shell call: {exc}", success=False)
        from runner.tools.patch_format import extract_shell_patch

        intercepted = extract_shell_patch(args.command)
        if intercepted is not None:
            return await _apply_patch_via_shell(ctx, intercepted, args.workdir, self.plain_output)
        argv = await login_argv(args.command, ctx)
        res = await ctx.environment.exec(
            argv,
            cwd=args.workdir or None,
            env=ctx.env,
            timeout_s=args.timeout_ms / 1000,
            output_cap=EXECUTOR_OUTPUT_CAP,
        )
        text = res.output.decode("utf-8", "replace")
        if res.timed_out:
            text = f"command timed out after {int(args.timeout_ms)} milliseconds\n{text}"
        event = {
            "type": "command_execution",
            "command": _display(args.command),
            "aggregated_output": truncate_middle(text)[0],
            "exit_code": res.exit_code,
            "status": "completed" if res.exit_code == 0 else "failed",
        }
        return ToolResult(
            format_output(
                res.exit_code, res.duration_s, text, res.total_lines, plain=self.plain_output
            ),
            success=res.exit_code == 0,
            event=event,
        )


LOGIN_SHELLS = frozenset({"bash", "/bin/bash", "/usr/bin/bash"})
SNAPSHOT_TIMEOUT_S = 10.0
SNAPSHOT_MARK = "RUNNER-LOGIN-ENV"
SNAPSHOT_SCRIPT = (
    # Functions the profile defines (nvm, pyenv's shims) are carried as exported
    # functions (BASH_FUNC_name%%), which every later bash imports.
    'for f in $(compgen -A function); do export -f "$f"; done; '
    f"printf '\\0{SNAPSHOT_MARK}\\0'; exec env -0"
)
PER_COMMAND = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
"""Set by each shell for itself; a stale copy would only mislead."""
MAX_SNAPSHOT_BYTES = 512 * 1024
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|BASH_FUNC_[^=\s]+%%")


async def login_argv(argv: list[str], ctx: ToolContext) -> list[str]:
    """`bash -lc CMD` run as `env -i <login environment> bash -c CMD`.

    Models wrap every command in a login shell, and a profile that sets up a version
    manager costs ~0.1 s each time. As Codex does, the login shell runs once per thread
    (inside the same sandbox and environment as the commands) and its environment,
    functions included, is reused; the profile is not read again. When the snapshot
    cannot be taken (a profile that fails, hangs or prints too much), commands run as
    asked.
    """
    if len(argv) != 3 or argv[0] not in LOGIN_SHELLS or argv[1] != "-lc":
        return argv
    if "login_env" not in ctx.state:
        ctx.state["login_env"] = await _snapshot(ctx)
    env: list[str] | None = ctx.state["login_env"]
    return argv if env is None else ["env", "-i", *env, argv[0], "-c", argv[2]]


async def _snapshot(ctx: ToolContext) -> list[str] | None:
    res = await ctx.environment.exec(
        ["bash", "-lc", SNAPSHOT_SCRIPT],
        env=ctx.env,
        timeout_s=SNAPSHOT_TIMEOUT_S,
        output_cap=EXECUTOR_OUTPUT_CAP,
    )
    mark = f"\0{SNAPSHOT_MARK}\0".encode()
    if res.exit_code != 0 or res.truncated_bytes or mark not in res.output:
        return None
    raw = res.output.rsplit(mark, 1)[1]
    if len(raw) > MAX_SNAPSHOT_BYTES:
        return None
    pairs = []
    for entry in raw.decode("utf-8", "surrogateescape").split("\0"):
        name, eq, _ = entry.partition("=")
        if eq and name not in PER_COMMAND and _NAME.fullmatch(name):
            pairs.append(entry)
    return pairs


def _display(argv: list[str]) -> str:
    """The command as `codex exec --json` shows it: the argv, shell-quoted."""
    return shlex.join(argv)


async def _apply_patch_via_shell(
    ctx: ToolContext, found: tuple[str, str | None], workdir: str | None, plain: bool
) -> ToolResult:
    """`apply_patch` typed into the shell is applied as a patch, as Codex does: models
    trained on Codex transcripts call it that way, and no such binary exists."""
    patch, cd = found
    start = time.monotonic()
    where = "/".join(p for p in (workdir, cd) if p) or None
    res = await apply_patch(ctx.environment, patch, workdir=where, read_only=ctx.read_only)
    event = {
        "type": "file_change",
        "changes": res.changes,
        "status": "completed" if res.success else "failed",
    }
    return ToolResult(
        format_output(0 if res.success else 1, time.monotonic() - start, res.output, plain=plain),
        success=res.success,
        event=event,
    )
