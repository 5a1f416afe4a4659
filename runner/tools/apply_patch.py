"""The `apply_patch` tool: Codex's patch envelope, parsed, planned and applied.

The work is split into three layers so each can be tested on its own (the first two are
pure and live in patch_format.py):

* `parse_patch` turns text into a `Patch` (pure, lenient in the same places Codex is
  lenient, because models are trained on that leniency);
* `plan_patch` computes every new file body from a `read` callback (pure: no I/O), using
  the same four-pass fuzzy line matching as Codex so patches that work there work here;
* `apply_patch` confines every path to the workspace root, plans the whole patch before
  touching the disk (all-or-nothing), then writes.

`extract_shell_patch` recognises the patch when a model sends it through the shell tool
instead, and `ApplyPatchTool` wraps it all behind the `Tool` protocol.

Why one module: the confinement of every path and the all-or-nothing write are one
security boundary, read together.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from collections.abc import Sequence
from functools import partial
from pathlib import Path, PurePath
from typing import Any

import anyio.to_thread

from runner import gitnames, hostfs
from runner.errors import PatchError, UnsafeFileError
from runner.tools import ToolCall, ToolContext, ToolResult
from runner.tools.patch_format import (
    SUCCESS_HEADER,
    AddFile,
    ApplyResult,
    ChangeKind,
    Chunk,
    DeleteFile,
    FileChange,
    Hunk,
    Patch,
    UpdateFile,
    extract_shell_patch,
    parse_patch,
    path_key,
    plan_patch,
)

__all__ = [
    "LARK_GRAMMAR",
    "AddFile",
    "ApplyPatchTool",
    "ApplyResult",
    "Chunk",
    "DeleteFile",
    "FileChange",
    "Hunk",
    "Patch",
    "PatchError",
    "UpdateFile",
    "apply_patch",
    "extract_shell_patch",
    "parse_patch",
    "plan_patch",
]

# --------------------------------------------------------------------------- applier


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _resolve(root: Path, real_root: str, base: str, path: str) -> tuple[Path, str]:
    """Map a patch path to (location on disk, root-relative POSIX path) or refuse it.

    Checked lexically first (for a precise message), then with every symlink followed,
    so neither `..` nor a link (final component or a parent directory) can leave root.
    """
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
    real = os.path.realpath(root / rel)
    if not _inside(real, real_root):
        raise PatchError(
            f"refused path '{path}': it resolves through a symbolic link to a location "
            "outside the workspace root"
        )
    # By its own spelling or through a link (`g -> '.git '`): one rule, runner/gitnames.py.
    for part in [*rel.split("/"), *os.path.relpath(real, real_root).split("/")]:
        if part != ".git" and gitnames.component_is_dotgit(part):
            raise PatchError(
                f"refused path '{path}': '{part}' is `.git` in another case "
                "or spelling (trailing dots or spaces, `git~1`, characters "
                "HFS+ ignores), which git refuses to commit"
            )
    # The real location: a link inside the workspace is resolved once, here, and every
    # later open is O_NOFOLLOW relative to the root, so nothing swapped in can redirect it.
    return Path(real), rel


MAX_PATCHED_FILE_BYTES = 32 * 1024 * 1024
"""Largest file apply_patch reads or replaces: a patch is planned in memory, so a bigger
file is for the shell (sed, a script), not for this tool."""


def _protected_hit(rel: str, real: Path, real_root: str, protected: tuple[str, ...]) -> str | None:
    """The protected name `rel` reaches, by its own spelling or through a link
    (`g -> .git`), compared without case."""
    names = {p.lower() for p in protected}
    parts = [*rel.split("/"), *os.path.relpath(real, real_root).split("/")]
    return next((p for p in parts if p.lower() in names), None)


def _open_existing(location: Path, real_root: str, shown: str) -> int | None:
    """An fd for the regular file at `location` (never a link, FIFO or device), or None
    when there is nothing there."""
    rel = os.path.relpath(location, real_root)
    try:
        with hostfs.open_parent(Path(real_root), rel) as (dir_fd, name):
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                return None
            if stat.S_ISDIR(st.st_mode):
                raise PatchError(f"{shown} is a directory, not a file")
            fd = hostfs.open_regular(name, dir_fd, shown)
    except FileNotFoundError:
        return None
    except UnsafeFileError as exc:
        raise PatchError(str(exc)) from None
    if os.fstat(fd).st_size > MAX_PATCHED_FILE_BYTES:
        os.close(fd)
        raise PatchError(
            f"cannot patch {shown}: it is larger than {MAX_PATCHED_FILE_BYTES >> 20} "
            "MiB; change it with a shell command instead"
        )
    return fd


def _read_existing(location: Path, real_root: str, shown: str) -> bytes | None:
    fd = _open_existing(location, real_root, shown)
    if fd is None:
        return None
    try:
        return hostfs.read_bytes(fd, MAX_PATCHED_FILE_BYTES + 1)
    finally:
        os.close(fd)


def _resolve_workdir(root: Path, real_root: str, workdir: str) -> str:
    """The root-relative form of a `cd DIR` target; it must stay inside root too."""
    if PurePath(workdir).is_absolute() or workdir.startswith(("/", "\\")):
        raise PatchError(
            f"refused working directory '{workdir}': it must be relative to the workspace root"
        )
    rel = posixpath.normpath(workdir) if workdir else "."
    escapes = rel == ".." or rel.startswith("../")
    if escapes or not _inside(os.path.realpath(root / rel), real_root):
        raise PatchError(f"refused working directory '{workdir}': it is outside the workspace root")
    return rel


def _read_text(location: Path, real_root: str, shown: str) -> str | None:
    try:
        data = _read_existing(location, real_root, shown)
    except OSError as exc:
        raise PatchError(f"cannot read {shown}: {exc.strerror or exc}") from exc
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PatchError(f"cannot patch {shown}: it is not UTF-8 text") from exc


def _check_writable(location: Path, root: Path, shown: str) -> None:
    """Refuse, before anything is written, targets that are dirs or sit under a file."""
    if location.is_dir():
        raise PatchError(f"cannot write {shown}: a directory with that name exists")
    parent = location.parent
    while parent != root and parent != parent.parent:
        if parent.exists() and not parent.is_dir():
            raise PatchError(f"cannot write {shown}: {parent.name} is a file, not a directory")
        parent = parent.parent


class _Journal:
    """Remembers what was on disk so a failed write can be undone."""

    def __init__(self, real_root: str) -> None:
        self.real_root = real_root
        self.saved: dict[Path, bytes | None] = {}
        self.dirs: list[Path] = []

    def remember(self, location: Path) -> None:
        if location not in self.saved:
            try:
                self.saved[location] = _read_existing(
                    location, self.real_root, os.path.relpath(location, self.real_root)
                )
            except PatchError as exc:
                raise OSError(exc.message) from None

    def make_parents(self, location: Path) -> None:
        missing = [p for p in reversed(location.parents) if not p.exists()]
        for directory in missing:
            rel = os.path.relpath(directory, self.real_root)
            try:
                with hostfs.open_parent(Path(self.real_root), rel) as (dir_fd, name):
                    os.mkdir(name, 0o755, dir_fd=dir_fd)
                    self.dirs.append(directory)
                    hostfs.own_like_parent(name, dir_fd)
            except UnsafeFileError as exc:
                raise OSError(str(exc)) from None

    def undo(self) -> bool:
        ok = True
        for location, data in reversed(list(self.saved.items())):
            try:
                if data is None:
                    location.unlink(missing_ok=True)
                else:
                    _write_bytes(location, self.real_root, data)
            except OSError:
                ok = False
        for directory in reversed(self.dirs):
            try:
                directory.rmdir()
            except OSError:
                ok = False
        return ok


def _write(journal: _Journal, location: Path, text: str) -> None:
    journal.remember(location)
    journal.make_parents(location)
    _write_bytes(location, journal.real_root, text.encode("utf-8"))


_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _write_bytes(location: Path, real_root: str, data: bytes) -> None:
    """Write a regular file in place: relative to the root, no link followed, and a FIFO
    or device refused rather than blocked on (O_NONBLOCK, then fstat)."""
    try:
        with hostfs.open_parent(Path(real_root), os.path.relpath(location, real_root)) as (
            dir_fd,
            name,
        ):
            try:
                fd = os.open(name, _WRITE_FLAGS & ~os.O_CREAT, dir_fd=dir_fd)
            except FileNotFoundError:
                # New: made as the sandbox's user would have made it (hostfs).
                fd = os.open(name, _WRITE_FLAGS | os.O_EXCL, 0o644, dir_fd=dir_fd)
                hostfs.own_like_parent(name, dir_fd)
    except UnsafeFileError as exc:
        raise OSError(str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{location.name} is a {hostfs.kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        os.ftruncate(fd, 0)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _failure(message: str, changes: list[dict[str, str]]) -> ApplyResult:
    return ApplyResult(
        output=f"apply_patch failed: {message}\nNo files were changed.",
        success=False,
        changes=changes,
    )


def patch_started(text: str, workdir: str | None) -> dict[str, Any] | None:
    """The `in_progress` file_change item for a patch about to be applied (paths as the
    patch names them, under `workdir`), or None when it does not even parse."""
    try:
        patch = parse_patch(text)
    except PatchError:
        return None
    changes = _event_changes(patch, {})
    if workdir:
        changes = [{**c, "path": f"{workdir.rstrip('/')}/{c['path']}"} for c in changes]
    return {"type": "file_change", "changes": changes, "status": "in_progress"}


def _event_changes(patch: Patch, names: dict[str, str]) -> list[dict[str, str]]:
    kinds: dict[type, ChangeKind] = {AddFile: "add", DeleteFile: "delete", UpdateFile: "update"}
    return [{"path": names.get(h.path, h.path), "kind": kinds[type(h)]} for h in patch.hunks]


def apply_patch(
    root: Path,
    text: str,
    *,
    workdir: str | None = None,
    read_only: bool = False,
    protected: tuple[str, ...] = (),
) -> ApplyResult:
    """Parse, plan and apply `text` inside `root`; never raises for a bad patch.

    Paths are taken relative to `root` (or to `workdir`, itself inside root, when the
    patch came from `cd DIR && apply_patch`). Nothing is written unless every hunk
    plans cleanly; if a write still fails, earlier writes are rolled back. The sandbox's
    rules hold here too, since this runs in the runner's process: nothing is written when
    `read_only`, and nothing under a directory named in `protected`.
    """
    try:
        patch = parse_patch(text)
    except PatchError as exc:
        return _failure(exc.message, [])
    if read_only:
        return _failure(
            "refused: the sandbox is read-only, so no file can be changed (sandbox: read-only)",
            _event_changes(patch, {}),
        )

    root = Path(os.path.abspath(root))
    real_root = os.path.realpath(root)
    locations: dict[str, Path] = {}
    names: dict[str, str] = {}
    try:
        base = "." if workdir is None else _resolve_workdir(root, real_root, workdir)
        for hunk in patch.hunks:
            paths = [hunk.path]
            if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
                paths.append(hunk.move_to)
            for p in paths:
                locations[p], names[p] = _resolve(root, real_root, base, p)
                hit = _protected_hit(names[p], locations[p], real_root, protected)
                if hit is not None:
                    raise PatchError(f"refused path '{p}': {hit} is read-only in the sandbox")
    except PatchError as exc:
        return _failure(exc.message, _event_changes(patch, names))
    changes = _event_changes(patch, names)

    try:
        plan = plan_patch(patch, lambda p: _read_text(locations[p], real_root, p))
        for change in plan:
            target = change.move_to if change.move_to is not None else change.path
            if change.kind != "delete":
                _check_writable(locations[target], Path(real_root), target)
    except PatchError as exc:
        return _failure(exc.message, changes)

    journal = _Journal(real_root)
    try:
        for change in plan:
            _carry_out(change, journal, root, locations, names)
    except OSError as exc:
        restored = journal.undo()
        detail = f"writing failed: {exc.strerror or exc}" + (
            "" if exc.filename is None else f" ({exc.filename})"
        )
        if restored:
            return _failure(detail, changes)
        return ApplyResult(
            output=f"apply_patch failed: {detail}\nSome files may have been changed; check "
            "them before retrying.",
            success=False,
            changes=changes,
        )

    return ApplyResult(output=_summary(plan), success=True, changes=changes)


def _carry_out(
    change: FileChange,
    journal: _Journal,
    root: Path,
    locations: dict[str, Path],
    names: dict[str, str],
) -> None:
    """One planned change on disk, remembered in `journal` so a later failure can undo it."""
    source = locations[change.path]
    if change.kind == "delete":
        # The entry itself goes (a link, not its target): its directory resolved.
        lexical = root / names[change.path]
        entry = Path(os.path.realpath(lexical.parent)) / lexical.name
        journal.remember(source)
        entry.unlink()
    elif change.move_to is not None:
        assert change.contents is not None
        dest = locations[change.move_to]
        _write(journal, dest, change.contents)
        if path_key(change.move_to) != path_key(change.path):
            journal.remember(source)
            mode = stat.S_IMODE(source.stat().st_mode)
            dest.chmod(mode)  # a renamed script stays executable
            source.unlink()
    else:
        assert change.contents is not None
        _write(journal, source, change.contents)


def _summary(plan: Sequence[FileChange]) -> str:
    """The Codex success text: added, then modified, then deleted paths."""
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
        result = await anyio.to_thread.run_sync(
            partial(apply_patch, ctx.cwd, text, read_only=ctx.read_only, protected=ctx.protected)
        )
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
