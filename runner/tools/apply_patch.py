"""The `apply_patch` tool: Codex's patch envelope, parsed, planned and applied.

The work is split into three layers so each can be tested on its own:

* `parse_patch` turns text into a `Patch` (pure, lenient in the same places Codex is
  lenient, because models are trained on that leniency);
* `plan_patch` computes every new file body from a `read` callback (pure: no I/O), using
  the same four-pass fuzzy line matching as Codex so patches that work there work here;
* `apply_patch` confines every path to the workspace root, plans the whole patch before
  touching the disk (all-or-nothing), then writes.

`extract_shell_patch` recognises the patch when a model sends it through the shell tool
instead, and `ApplyPatchTool` wraps it all behind the `Tool` protocol.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path, PurePath
from typing import Any, Literal

import anyio.to_thread

from runner import gitnames, hostfs
from runner.errors import UnsafeFileError
from runner.tools import ToolCall, ToolContext, ToolResult

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

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
ADD_FILE = "*** Add File: "
DELETE_FILE = "*** Delete File: "
UPDATE_FILE = "*** Update File: "
MOVE_TO = "*** Move to: "
END_OF_FILE = "*** End of File"
SUCCESS_HEADER = "Success. Updated the following files:"

ChangeKind = Literal["add", "delete", "update"]


class PatchError(ValueError):
    """A patch that cannot be parsed, planned or applied; `str()` is meant for the model."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.message = message
        self.line = line
        super().__init__(message)


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Chunk:
    """One `@@` section of an update: replace `old_lines` by `new_lines`."""

    change_context: str | None
    """A single line (usually a `def`/`class` header) the chunk must come after."""
    old_lines: list[str]
    new_lines: list[str]
    is_end_of_file: bool = False
    """`*** End of File` was given: `old_lines` must be the last lines of the file."""


@dataclass(frozen=True)
class AddFile:
    path: str
    contents: str


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class UpdateFile:
    path: str
    move_to: str | None
    chunks: list[Chunk]


Hunk = AddFile | DeleteFile | UpdateFile


@dataclass(frozen=True)
class Patch:
    hunks: list[Hunk]


@dataclass(frozen=True)
class FileChange:
    """The planned effect of one hunk: the full new body, ready to be written."""

    path: str
    kind: ChangeKind
    contents: str | None
    """New file text for add/update; None for delete."""
    move_to: str | None = None


@dataclass(frozen=True)
class ApplyResult:
    output: str
    """Exactly what the model is shown."""
    success: bool
    changes: list[dict[str, str]] = field(default_factory=list)
    """`{"path", "kind"}` per hunk, for the `file_change` event."""


# --------------------------------------------------------------------------- parser

_HEREDOC_OPENERS = ("<<EOF", "<<'EOF'", '<<"EOF"')


def _split_lines(text: str) -> list[str]:
    """Split like Rust's `str::lines`: on LF, dropping one CR before it.

    Patches typed on Windows then parse like any other; no trailing empty element.
    """
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def _envelope_error(lines: Sequence[str]) -> PatchError | None:
    if not lines or lines[0].strip() != BEGIN_PATCH:
        return PatchError("invalid patch: the first line must be '*** Begin Patch'")
    if len(lines) < 2 or lines[-1].strip() != END_PATCH:
        return PatchError("invalid patch: the last line must be '*** End Patch'")
    return None


def parse_patch(text: str) -> Patch:
    """Parse patch text; raises `PatchError` (with a 1-based line number where useful).

    Leniency matches Codex: surrounding whitespace is ignored, markers may carry padding,
    and the whole patch may sit inside a `<<EOF` ... `EOF` heredoc (models sometimes pass
    the heredoc through an exec-style call, where no shell strips it).
    """
    lines = _split_lines(text.strip())
    first_hunk_line = 2
    error = _envelope_error(lines)
    if error is not None:
        wrapped = len(lines) >= 4 and lines[0] in _HEREDOC_OPENERS and lines[-1].endswith("EOF")
        if not wrapped or _envelope_error(lines[1:-1]) is not None:
            raise error
        lines = lines[1:-1]
        first_hunk_line = 3
    body = lines[1:-1]
    hunks: list[Hunk] = []
    index = 0
    while index < len(body):
        hunk, used = _parse_hunk(body, index, first_hunk_line)
        hunks.append(hunk)
        index += used
    return Patch(hunks=hunks)


def _parse_hunk(body: Sequence[str], start: int, offset: int) -> tuple[Hunk, int]:
    """Parse the hunk at `body[start]`; returns it and how many lines it used."""
    line_no = start + offset
    header = body[start].strip()
    if header.startswith(ADD_FILE):
        path = header[len(ADD_FILE) :]
        contents: list[str] = []
        i = start + 1
        while i < len(body) and body[i].startswith("+"):
            contents.append(body[i][1:] + "\n")
            i += 1
        return AddFile(path=path, contents="".join(contents)), i - start
    if header.startswith(DELETE_FILE):
        return DeleteFile(path=header[len(DELETE_FILE) :]), 1
    if header.startswith(UPDATE_FILE):
        path = header[len(UPDATE_FILE) :]
        i = start + 1
        move_to: str | None = None
        if i < len(body) and body[i].strip().startswith(MOVE_TO):
            move_to = body[i].strip()[len(MOVE_TO) :]
            i += 1
        chunks: list[Chunk] = []
        while i < len(body):
            if not body[i].strip():
                i += 1  # blank lines between chunks carry no meaning
                continue
            if body[i].startswith("*"):
                break  # the next file header (or a stray marker the caller reports)
            chunk, used = _parse_chunk(body, i, offset, first=not chunks)
            chunks.append(chunk)
            i += used
        if not chunks and move_to is None:  # a bare rename needs no chunk
            raise PatchError(
                f"invalid patch at line {line_no}: the update hunk for '{path}' is empty; "
                "give at least one chunk of ' ', '-' or '+' lines",
                line_no,
            )
        return UpdateFile(path=path, move_to=move_to, chunks=chunks), i - start
    raise PatchError(
        f"invalid patch at line {line_no}: '{header}' is not a file header; expected "
        "'*** Add File: <path>', '*** Delete File: <path>' or '*** Update File: <path>'",
        line_no,
    )


def _parse_chunk(body: Sequence[str], start: int, offset: int, *, first: bool) -> tuple[Chunk, int]:
    """Parse one chunk; only the first chunk of a file may leave out its `@@` line."""
    head = body[start]
    context: str | None = None
    i = start
    if head == "@@":
        i += 1
    elif head.startswith("@@ "):
        context = head[3:]
        i += 1
    elif not first:
        line_no = start + offset
        raise PatchError(
            f"invalid patch at line {line_no}: expected '@@' to start a new chunk, got '{head}'",
            line_no,
        )
    if context is not None and i < len(body) and (body[i] == "@@" or body[i].startswith("@@ ")):
        # Stacked anchors (`@@ class A` then `@@ def f`): an anchor-only chunk moves the
        # search position and changes nothing. Codex rejects this, but its instructions
        # teach it, so models write it.
        return Chunk(context, [], [], False), 1
    if i >= len(body):
        line_no = i + offset
        raise PatchError(f"invalid patch at line {line_no}: the chunk has no lines", line_no)
    old: list[str] = []
    new: list[str] = []
    eof = False
    taken = 0
    while i < len(body):
        line = body[i]
        if line == END_OF_FILE:
            if taken == 0:
                line_no = i + offset
                raise PatchError(
                    f"invalid patch at line {line_no}: the chunk has no lines", line_no
                )
            eof = True
            i += 1
            break
        marker = line[:1]
        if marker == "":
            old.append("")  # models drop the lone space of empty context lines
            new.append("")
        elif marker == " ":
            old.append(line[1:])
            new.append(line[1:])
        elif marker == "-":
            old.append(line[1:])
        elif marker == "+":
            new.append(line[1:])
        elif taken == 0:
            line_no = i + offset
            raise PatchError(
                f"invalid patch at line {line_no}: unexpected line '{line}' in an update "
                "hunk; each line must start with ' ' (context), '-' (removed) or "
                "'+' (added)",
                line_no,
            )
        else:
            break  # the next chunk or file header starts here
        taken += 1
        i += 1
    return Chunk(context, old, new, eof), i - start


# --------------------------------------------------------------------------- matching

_PUNCTUATION = str.maketrans(
    {
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys(
            "\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000",
            " ",
        ),
    }
)


def _normalise(line: str) -> str:
    """Fold typographic dashes, quotes and spaces to ASCII: models often retype them."""
    return line.strip().translate(_PUNCTUATION)


_PASSES: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    str.rstrip,
    str.strip,
    _normalise,
)


def seek_sequence(
    lines: Sequence[str], pattern: Sequence[str], start: int, eof: bool
) -> int | None:
    """Index of `pattern` in `lines` at or after `start`, trying ever looser passes.

    Each pass scans the whole range before the next, looser one runs, so an exact match
    always wins over a fuzzy one. With `eof` only the position that ends at the last line
    is tried.
    """
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    first = len(lines) - len(pattern) if eof else start
    last = len(lines) - len(pattern)
    for fold in _PASSES:
        want = [fold(p) for p in pattern]
        for i in range(first, last + 1):
            if all(fold(lines[i + k]) == want[k] for k in range(len(want))):
                return i
    return None


# --------------------------------------------------------------------------- planner


@dataclass
class _Lines:
    """A file as lines plus the terminator each one had.

    Why: files keep their own line endings. A line that ended in CRLF is matched
    without its CR and written back with CRLF; lines the patch adds or rewrites take the
    file's dominant ending (CRLF only when more lines use it than plain LF). So a CRLF
    file stays CRLF, a mixed file keeps every untouched line byte-for-byte, and the
    patch text itself never has to carry CRs.
    """

    texts: list[str]
    ends: list[str]
    default_end: str

    @classmethod
    def of(cls, contents: str) -> _Lines:
        parts = contents.split("\n")
        texts: list[str] = []
        ends: list[str] = []
        for part in parts[:-1]:
            if part.endswith("\r"):
                texts.append(part[:-1])
                ends.append("\r\n")
            else:
                texts.append(part)
                ends.append("\n")
        if parts[-1]:
            texts.append(parts[-1])
            ends.append("")  # no newline at end of file
        crlf = ends.count("\r\n")
        default = "\r\n" if crlf > ends.count("\n") else "\n"
        return cls(texts, ends, default)

    def render(self) -> str:
        """Join the lines; the last one always gets a terminator, as Codex does."""
        out = [t + (e or self.default_end) for t, e in zip(self.texts, self.ends, strict=True)]
        return "".join(out)


def _compute_replacements(
    lines: Sequence[str], path: str, chunks: Sequence[Chunk]
) -> list[tuple[int, int, list[str]]]:
    """Locate every chunk, in order, returning (start, old length, new lines)."""
    found: list[tuple[int, int, list[str]]] = []
    index = 0
    for chunk in chunks:
        if chunk.change_context is not None:
            at = seek_sequence(lines, [chunk.change_context], index, False)
            if at is None:
                raise PatchError(
                    f"could not find the context line '{chunk.change_context}' in {path}"
                )
            index = at + 1
        if not chunk.old_lines and not chunk.new_lines:
            continue  # an anchor-only chunk: it only moved `index`
        if not chunk.old_lines:
            # Pure addition: goes at the end (before a final blank line, if any).
            at_end = len(lines) - 1 if lines and lines[-1] == "" else len(lines)
            found.append((at_end, 0, list(chunk.new_lines)))
            continue
        old = list(chunk.old_lines)
        new = list(chunk.new_lines)
        at = seek_sequence(lines, old, index, chunk.is_end_of_file)
        if at is None and old[-1] == "":
            # A trailing empty context line usually stands for the final newline.
            old = old[:-1]
            if new and new[-1] == "":
                new = new[:-1]
            at = seek_sequence(lines, old, index, chunk.is_end_of_file)
        if at is None:
            expected = "\n".join(chunk.old_lines)
            raise PatchError(f"could not find the expected lines in {path}:\n{expected}")
        found.append((at, len(old), new))
        index = at + len(old)
    found.sort(key=lambda r: r[0])
    return found


def update_contents(contents: str, path: str, chunks: Sequence[Chunk]) -> str:
    """Apply `chunks` to one file's text (pure); see `_Lines` for line-ending handling."""
    doc = _Lines.of(contents)
    for start, length, new in reversed(_compute_replacements(doc.texts, path, chunks)):
        doc.texts[start : start + length] = new
        doc.ends[start : start + length] = [doc.default_end] * len(new)
    return doc.render()


def _key(path: str) -> str:
    return posixpath.normpath(path)


def plan_patch(patch: Patch, read: Callable[[str], str | None]) -> list[FileChange]:
    """Compute every hunk's result without touching the disk.

    `read(path)` returns the current text or None when the file does not exist (it may
    raise `PatchError` itself, e.g. for an unreadable file). Hunks see the results of
    earlier hunks in the same patch, as they would if applied one by one.
    """
    if not patch.hunks:
        raise PatchError("the patch contains no file operations")
    state: dict[str, str | None] = {}

    def current(path: str) -> str | None:
        key = _key(path)
        if key not in state:
            state[key] = read(path)
        return state[key]

    changes: list[FileChange] = []
    for hunk in patch.hunks:
        if isinstance(hunk, AddFile):
            state[_key(hunk.path)] = hunk.contents
            changes.append(FileChange(hunk.path, "add", hunk.contents))
        elif isinstance(hunk, DeleteFile):
            if current(hunk.path) is None:
                raise PatchError(f"cannot delete {hunk.path}: no such file")
            state[_key(hunk.path)] = None
            changes.append(FileChange(hunk.path, "delete", None))
        else:
            original = current(hunk.path)
            if original is None:
                raise PatchError(f"cannot update {hunk.path}: no such file")
            updated = update_contents(original, hunk.path, hunk.chunks)
            if hunk.move_to is not None:
                state[_key(hunk.path)] = None
                state[_key(hunk.move_to)] = updated
            else:
                state[_key(hunk.path)] = updated
            changes.append(FileChange(hunk.path, "update", updated, hunk.move_to))
    return changes


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
            raise PatchError(f"refused path '{path}': '{part}' is `.git` in another case "
                             "or spelling (trailing dots or spaces, `git~1`, characters "
                             "HFS+ ignores), which git refuses to commit")
    # The real location: a link inside the workspace is resolved once, here, and every
    # later open is O_NOFOLLOW relative to the root, so nothing swapped in can redirect it.
    return Path(real), rel


MAX_FILE_BYTES = 32 * 1024 * 1024
"""Largest file apply_patch reads or replaces: a patch is planned in memory, so a bigger
file is for the shell (sed, a script), not for this tool."""


def _protected_hit(rel: str, real: Path, real_root: str, protected: tuple[str, ...]
                   ) -> str | None:
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
    if os.fstat(fd).st_size > MAX_FILE_BYTES:
        os.close(fd)
        raise PatchError(f"cannot patch {shown}: it is larger than {MAX_FILE_BYTES >> 20} "
                         "MiB; change it with a shell command instead")
    return fd


def _read_existing(location: Path, real_root: str, shown: str) -> bytes | None:
    fd = _open_existing(location, real_root, shown)
    if fd is None:
        return None
    try:
        return hostfs.read_bytes(fd, MAX_FILE_BYTES + 1)
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
                    location, self.real_root, os.path.relpath(location, self.real_root))
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


_WRITE_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)


def _write_bytes(location: Path, real_root: str, data: bytes) -> None:
    """Write a regular file in place: relative to the root, no link followed, and a FIFO
    or device refused rather than blocked on (O_NONBLOCK, then fstat)."""
    try:
        with hostfs.open_parent(Path(real_root), os.path.relpath(location, real_root)
                                ) as (dir_fd, name):
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
            view = view[os.write(fd, view):]
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


def apply_patch(root: Path, text: str, *, workdir: str | None = None, read_only: bool = False,
                protected: tuple[str, ...] = ()) -> ApplyResult:
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
        return _failure("refused: the sandbox is read-only, so no file can be changed "
                        "(sandbox: read-only)", _event_changes(patch, {}))

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
                    raise PatchError(f"refused path '{p}': {hit} is read-only "
                                     "in the sandbox")
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
                if _key(change.move_to) != _key(change.path):
                    journal.remember(source)
                    mode = stat.S_IMODE(source.stat().st_mode)
                    dest.chmod(mode)  # a renamed script stays executable
                    source.unlink()
            else:
                assert change.contents is not None
                _write(journal, source, change.contents)
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


# --------------------------------------------------------------------------- shell form

_PATCH_COMMANDS = ("apply_patch", "applypatch")
_SHELLS = ("bash", "sh", "zsh")
_CD_SPECIALS = set(" \t\n'\"\\$`;&|<>(){}*?[]#~!")


def _cd_target(word: str) -> str | None:
    """The directory of a `cd` argument, or None for anything needing real shell parsing."""
    if len(word) >= 2 and word[0] == word[-1] == "'":
        inner = word[1:-1]
        return inner if "'" not in inner and inner else None
    if len(word) >= 2 and word[0] == word[-1] == '"':
        inner = word[1:-1]
        return inner if inner and not set(inner) & set('"\\$`') else None
    return word if word and not set(word) & _CD_SPECIALS else None


def _split_cd(command: str) -> tuple[str, str | None] | None:
    """Split `cd DIR && rest` into (rest, DIR); (command, None) when there is no cd."""
    if not (command.startswith("cd ") or command.startswith("cd\t")):
        return command, None
    rest = command[2:].lstrip(" \t")
    if rest[:1] in ("'", '"'):
        close = rest.find(rest[0], 1)
        if close < 0:
            return None
        word, after = rest[: close + 1], rest[close + 1 :]
    else:
        cut = len(rest)
        for i, ch in enumerate(rest):
            if ch in " \t&":
                cut = i
                break
        word, after = rest[:cut], rest[cut:]
    after = after.lstrip(" \t")
    if not after.startswith("&&"):
        return None
    target = _cd_target(word)
    if target is None:
        return None
    return after[2:].lstrip(" \t"), target


def _heredoc_body(script: str) -> tuple[str, str | None] | None:
    lines = script.strip().split("\n")
    split = _split_cd(lines[0])
    if split is None:
        return None
    command, workdir = split
    name, _, redirect = command.partition("<<")
    if name.strip() not in _PATCH_COMMANDS or not redirect or redirect.startswith("-"):
        return None
    delimiter = redirect.strip()
    if len(delimiter) >= 2 and delimiter[0] == delimiter[-1] and delimiter[0] in "'\"":
        delimiter = delimiter[1:-1]
    if not delimiter or set(delimiter) & set(" \t'\"\\$`;&|<>()"):
        return None
    for i in range(1, len(lines)):
        if lines[i].rstrip() == delimiter:
            if any(rest.strip() for rest in lines[i + 1 :]):
                return None  # more commands after the heredoc: not a plain apply_patch
            return "\n".join(lines[1:i]) + "\n", workdir
    return None


def extract_shell_patch(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """Recognise apply_patch sent through the shell tool: (patch text, workdir or None).

    Accepted, like Codex: `["apply_patch"|"applypatch", PATCH]` and
    `[bash|sh|zsh, -c|-lc, "[cd DIR &&] apply_patch <<'EOF'\\n...\\nEOF"]` with any
    heredoc delimiter, quoted or not. The heredoc body is taken literally, without the
    expansion bash would do for an unquoted delimiter. Anything else returns None and
    runs as an ordinary command.
    """
    if len(argv) == 2 and argv[0] in _PATCH_COMMANDS:
        return argv[1], None
    if len(argv) == 3 and argv[1] in ("-lc", "-c"):
        shell = PurePath(argv[0]).stem.lower()
        if shell in _SHELLS:
            return _heredoc_body(argv[2])
    return None


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
        result = await anyio.to_thread.run_sync(partial(
            apply_patch, ctx.cwd, text, read_only=ctx.read_only, protected=ctx.protected))
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
