"""The `apply_patch` tool: Codex's patch envelope, parsed, planned and applied.

The work is split into three layers so each can be tested on its own (the first two are
pure and live in patch_format.py):

* `parse_patch` turns text into a `Patch` (pure, lenient in the same places Codex is
  lenient, because models are trained on that leniency);
* `plan_patch` computes every new file body from a `read` callback (pure: no I/O), using
  the same four-pass fuzzy line matching as Codex so patches that work there work here;
* `apply_patch` confines every path to the workdir, reads what is there through the
  run's `Environment` (which refuses links out, FIFOs, devices and protected names),
  plans the whole patch before writing anything (all-or-nothing), then writes through
  the environment too, never a host path.

`extract_shell_patch` recognises the patch when a model sends it through the shell tool
instead, and `ApplyPatchTool` wraps it all behind the `Tool` protocol.

Why one module: the confinement of every path and the all-or-nothing write are one
security boundary, read together.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from runner.errors import PatchError, PathRefused, UnsafeFileError
from runner.tools import Environment, ToolCall, ToolContext, ToolResult

if TYPE_CHECKING:
    from runner.tools.patch_format import ApplyResult, FileChange, Patch

__all__ = ["LARK_GRAMMAR", "ApplyPatchTool", "apply_patch", "patch_started"]

# The patch format (parser, planner: runner/tools/patch_format.py, eight dataclasses) is
# loaded with the first patch, not at start: it was about 6 ms of every run's start, for
# runs whose model never sends one.

# --------------------------------------------------------------------------- applier

MAX_PATCHED_FILE_BYTES = 32 * 1024 * 1024
"""Largest file apply_patch reads or replaces: a patch is planned in memory, so a bigger
file is for the shell (sed, a script), not for this tool."""

MODE_TIMEOUT_S = 10.0
"""For the one command a move runs in the environment: giving the new path the old
path's mode (`chmod --reference`), so a renamed script stays executable."""

_Found = bytes | None | Exception
"""What a path held before the patch: its bytes, nothing, or why it could not be read."""


def _resolve(base: str, path: str) -> str:
    """A patch path as a workdir-relative POSIX path, or refused.

    Only the spelling is judged here (absolute, `..` out of the root, the root itself);
    where a path leads through links, and whether it may be touched at all (`.git`, a
    protected name), is the environment's to decide, since only it can see its files."""
    if not path or "\0" in path:
        raise PatchError(f"invalid path {path!r}")
    if PurePath(path).is_absolute() or path.startswith(("/", "\\")):
        raise PatchError(
            f"refused absolute path '{path}': paths in a patch must be relative to the "
            "workspace root"
        )
    rel = posixpath.normpath(posixpath.join(base, path))
    if rel == ".":
        raise PatchError(f"refused path '{path}': it names the workspace root, not a file")
    if rel == ".." or rel.startswith("../"):
        raise PatchError(
            f"refused path '{path}': it leads outside the workspace root; use a relative "
            "path inside it"
        )
    return rel


def _resolve_workdir(workdir: str) -> str:
    """The root-relative form of a `cd DIR` target; it must stay inside root too."""
    if PurePath(workdir).is_absolute() or workdir.startswith(("/", "\\")):
        raise PatchError(
            f"refused working directory '{workdir}': it must be relative to the workspace root"
        )
    rel = posixpath.normpath(workdir) if workdir else "."
    if rel == ".." or rel.startswith("../"):
        raise PatchError(f"refused working directory '{workdir}': it is outside the workspace root")
    return rel


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError):
        detail = str(exc.strerror or exc)
        return detail if exc.filename is None else f"{detail} ({exc.filename})"
    return str(exc)


class _Files:
    """The patch's view of the environment: every path read once, before anything is
    written, and a journal of what was there so a failed write can be undone."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.found: dict[str, _Found] = {}
        self.saved: dict[str, bytes | None] = {}
        self.made: list[str] = []
        """Directories a write will make (none there before the patch), for the undo."""

    def at(self, rel: str) -> str:
        return posixpath.join(self.env.workdir, rel)

    async def look(self, rel: str) -> None:
        """Read `rel` once; PathRefused (never reachable) is raised, anything else kept
        for the step that needs the file (the plan reads, the journal remembers)."""
        if rel in self.found:
            return
        try:
            self.found[rel] = await self.env.read_file(
                self.at(rel), max_bytes=MAX_PATCHED_FILE_BYTES
            )
        except PathRefused:
            raise
        except (UnsafeFileError, OSError) as exc:
            self.found[rel] = exc

    def text(self, rel: str, shown: str) -> str | None:
        got = self.found[rel]
        if isinstance(got, UnsafeFileError):
            raise PatchError(str(got))
        if isinstance(got, Exception):
            raise PatchError(f"cannot read {shown}: {_reason(got)}")
        if got is None:
            return None
        try:
            return got.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PatchError(f"cannot patch {shown}: it is not UTF-8 text") from exc

    async def check_parents(self, rel: str, shown: str) -> None:
        """Refuse, before anything is written, a new file under a file; note the
        directories its write will make."""
        if self.found[rel] is not None:
            return
        parent = posixpath.dirname(rel)
        while parent and parent not in self.found:
            try:
                got: _Found = await self.env.read_file(self.at(parent), max_bytes=0)
            except (UnsafeFileError, OSError) as exc:
                got = exc  # a directory (or something a write will name)
            self.found[parent] = got
            if isinstance(got, bytes):
                name = posixpath.basename(parent)
                raise PatchError(f"cannot write {shown}: {name} is a file, not a directory")
            if got is not None:
                return
            self.made.append(parent)
            parent = posixpath.dirname(parent)

    def remember(self, rel: str) -> None:
        if rel not in self.saved:
            got = self.found[rel]
            if isinstance(got, Exception):
                raise got
            self.saved[rel] = got

    async def write(self, rel: str, text: str) -> None:
        self.remember(rel)
        await self.env.write_file(self.at(rel), text.encode("utf-8"))

    async def remove(self, rel: str) -> None:
        self.remember(rel)
        await self.env.remove_file(self.at(rel))

    async def undo(self) -> bool:
        ok = True
        for rel, data in reversed(list(self.saved.items())):
            try:
                if data is None:
                    await self.env.remove_file(self.at(rel))
                else:
                    await self.env.write_file(self.at(rel), data)
            except (UnsafeFileError, OSError):
                ok = False
        for rel in sorted(self.made, key=lambda d: d.count("/"), reverse=True):
            try:
                await self.env.remove_file(self.at(rel))
            except (UnsafeFileError, OSError):
                ok = False
        return ok


def _failure(message: str, changes: list[dict[str, str]]) -> ApplyResult:
    from runner.tools.patch_format import ApplyResult

    return ApplyResult(
        output=f"apply_patch failed: {message}\nNo files were changed.",
        success=False,
        changes=changes,
    )


def patch_started(text: str, workdir: str | None) -> dict[str, Any] | None:
    """The `in_progress` file_change item for a patch about to be applied (paths as the
    patch names them, under `workdir`), or None when it does not even parse."""
    from runner.tools.patch_format import parse_patch

    try:
        patch = parse_patch(text)
    except PatchError:
        return None
    changes = _event_changes(patch, {})
    if workdir:
        changes = [{**c, "path": f"{workdir.rstrip('/')}/{c['path']}"} for c in changes]
    return {"type": "file_change", "changes": changes, "status": "in_progress"}


def _event_changes(patch: Patch, names: dict[str, str]) -> list[dict[str, str]]:
    from runner.tools.patch_format import AddFile, ChangeKind, DeleteFile, UpdateFile

    kinds: dict[type, ChangeKind] = {AddFile: "add", DeleteFile: "delete", UpdateFile: "update"}
    return [{"path": names.get(h.path, h.path), "kind": kinds[type(h)]} for h in patch.hunks]


async def apply_patch(
    env: Environment,
    text: str,
    *,
    workdir: str | None = None,
    read_only: bool = False,
) -> ApplyResult:
    """Parse, plan and apply `text` in `env`'s workdir; never raises for a bad patch.

    Paths are taken relative to the workdir (or to `workdir`, itself inside it, when the
    patch came from `cd DIR && apply_patch`), and every file is read and written through
    the environment's file methods, never a host path. Nothing is written unless every
    path is allowed and every hunk plans cleanly; if a write still fails, earlier writes
    are rolled back. Nothing is written when `read_only`, as the sandbox refuses it.
    """
    from runner.tools.patch_format import ApplyResult, UpdateFile, parse_patch, plan_patch

    try:
        patch = parse_patch(text)
    except PatchError as exc:
        return _failure(exc.message, [])
    if read_only:
        return _failure(
            "refused: the sandbox is read-only, so no file can be changed (sandbox: read-only)",
            _event_changes(patch, {}),
        )

    names: dict[str, str] = {}
    try:
        base = "." if workdir is None else _resolve_workdir(workdir)
        for hunk in patch.hunks:
            paths = [hunk.path]
            if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
                paths.append(hunk.move_to)
            for p in paths:
                names[p] = _resolve(base, p)
    except PatchError as exc:
        return _failure(exc.message, _event_changes(patch, names))
    changes = _event_changes(patch, names)

    files = _Files(env)
    for p, rel in names.items():
        try:
            await files.look(rel)
        except PathRefused as exc:
            return _failure(f"refused path '{p}': {exc.reason}", changes)
    try:
        plan = plan_patch(patch, lambda p: files.text(names[p], p))
        for change in plan:
            target = change.move_to if change.move_to is not None else change.path
            if change.kind != "delete":
                await files.check_parents(names[target], target)
    except PatchError as exc:
        return _failure(exc.message, changes)

    try:
        for change in plan:
            await _carry_out(change, files, names)
    except (UnsafeFileError, OSError) as exc:
        restored = await files.undo()
        detail = f"writing failed: {_reason(exc)}"
        if restored:
            return _failure(detail, changes)
        return ApplyResult(
            output=f"apply_patch failed: {detail}\nSome files may have been changed; check "
            "them before retrying.",
            success=False,
            changes=changes,
        )

    return ApplyResult(output=_summary(plan), success=True, changes=changes)


async def _carry_out(change: FileChange, files: _Files, names: dict[str, str]) -> None:
    """One planned change, remembered by `files` so a later failure can undo it."""
    from runner.tools.patch_format import path_key

    source = names[change.path]
    if change.kind == "delete":
        await files.remove(source)  # the entry itself: a link goes, not its target
    elif change.move_to is not None:
        assert change.contents is not None
        dest = names[change.move_to]
        await files.write(dest, change.contents)
        if path_key(change.move_to) != path_key(change.path):
            res = await files.env.exec(
                ["chmod", "--reference", files.at(source), "--", files.at(dest)],
                timeout_s=MODE_TIMEOUT_S,
                output_cap=4096,
            )
            if res.exit_code != 0:
                said = res.output.decode("utf-8", "replace").strip()
                raise OSError(f"cannot give {change.move_to} the mode of {change.path}: {said}")
            await files.remove(source)
    else:
        assert change.contents is not None
        await files.write(source, change.contents)


def _summary(plan: Sequence[FileChange]) -> str:
    """The Codex success text: added, then modified, then deleted paths."""
    from runner.tools.patch_format import SUCCESS_HEADER

    groups: dict[str, list[str]] = {"A": [], "M": [], "D": []}
    for change in plan:
        if change.kind == "add":
            letter, path = "A", change.path
        elif change.kind == "delete":
            letter, path = "D", change.path
        else:
            letter, path = "M", change.move_to or change.path
        if path not in groups[letter]:
            groups[letter].append(path)
    lines = [SUCCESS_HEADER]
    for letter, paths in groups.items():
        lines.extend(f"{letter} {p}" for p in paths)
    return "\n".join(lines)


# --------------------------------------------------------------------------- tool

LARK_GRAMMAR = r"""start: begin_marker file_op+ end_marker

begin_marker: "*** Begin Patch" LF
end_marker: "*** End Patch" LF?

file_op: add_op | delete_op | update_op

add_op: "*** Add File: " path LF added+
added: "+" TEXT? LF

delete_op: "*** Delete File: " path LF

update_op: "*** Update File: " path LF rename? chunk_lines?
rename: "*** Move to: " path LF
chunk_lines: (anchor | diff_line)+ eof_marker?
anchor: ("@@" | "@@ " TEXT) LF
diff_line: (" " | "-" | "+") TEXT? LF
eof_marker: "*** End of File" LF

path: TEXT
TEXT: /[^\n]+/

%import common.LF
"""

_FREEFORM_DESCRIPTION = (
    "Edit files by sending a patch in the apply_patch format. This is a FREEFORM tool: "
    "send the raw patch text itself, not JSON."
)

_FUNCTION_DESCRIPTION = """\
Edit files by applying a patch. Put the whole patch in the `input` argument.

A patch starts with `*** Begin Patch`, ends with `*** End Patch`, and holds one or more \
file operations in between:

*** Add File: <path>      then every line of the new file, each prefixed with `+`
*** Delete File: <path>   nothing follows
*** Update File: <path>   optionally `*** Move to: <new path>`, then one or more chunks

A chunk describes one change. Each of its lines starts with one character: ` ` (space) \
for an unchanged line, `-` for a line to remove, `+` for a line to add. Show 3 lines of \
unchanged context before and after each change. When 3 lines do not pick out a single \
place in the file, start the chunk with `@@ <line>` naming a line above it, such as the \
enclosing `class` or `def`; chunks with no anchor start with a bare `@@`. Put `*** End of \
File` after a chunk that must match the end of the file.

Paths must be relative to the workspace root; absolute paths and paths leading outside \
it are refused. The whole patch is applied or, if any part fails, nothing is changed.

Example:

*** Begin Patch
*** Add File: docs/notes.md
+# Notes
*** Update File: src/app.py
@@ def greet(name):
     if not name:
         name = "world"
-    print("Hello " + name)
+    print(f"Hello, {name}!")
     return name
*** Delete File: src/old_helper.py
*** End Patch
"""


class ApplyPatchTool:
    """The `apply_patch` tool, as a JSON function or as a grammar-constrained custom tool."""

    name = "apply_patch"

    def __init__(self, freeform: bool = False) -> None:
        self.freeform = freeform

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        text = call.arguments if call.kind == "custom" else _patch_from_arguments(call.arguments)
        return patch_started(text, None) if isinstance(text, str) else None

    def spec(self) -> dict[str, Any]:
        if self.freeform:
            return {
                "type": "custom",
                "name": self.name,
                "description": _FREEFORM_DESCRIPTION,
                "format": {"type": "grammar", "syntax": "lark", "definition": LARK_GRAMMAR},
            }
        return {
            "type": "function",
            "name": self.name,
            "description": _FUNCTION_DESCRIPTION,
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {
                    "input": {
                        "type": "string",
                        "description": "The entire patch, from '*** Begin Patch' to "
                        "'*** End Patch'.",
                    }
                },
                "required": ["input"],
                "additionalProperties": False,
            },
        }

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        if call.kind == "custom":
            text = call.arguments
        else:
            text_or_error = _patch_from_arguments(call.arguments)
            if isinstance(text_or_error, ToolResult):
                return text_or_error
            text = text_or_error
        result = await apply_patch(ctx.environment, text, read_only=ctx.read_only)
        return ToolResult(
            output=result.output,
            success=result.success,
            event={
                "type": "file_change",
                "changes": result.changes,
                "status": "completed" if result.success else "failed",
            },
        )


def _patch_from_arguments(arguments: str) -> str | ToolResult:
    def fail(why: str) -> ToolResult:
        return ToolResult(
            output=f"apply_patch failed: {why}. Call it with "
            '{"input": "*** Begin Patch\\n...\\n*** End Patch"}.',
            success=False,
            event={"type": "file_change", "changes": [], "status": "failed"},
        )

    try:
        args = json.loads(arguments)
    except (json.JSONDecodeError, RecursionError) as exc:
        return fail(f"the arguments are not valid JSON ({exc})")
    if not isinstance(args, dict) or not isinstance(args.get("input"), str):
        return fail("the arguments must be an object with a string field 'input'")
    value: str = args["input"]
    return value
