"""Codex's patch format, as pure functions: the envelope parsed into a `Patch`
(`parse_patch`, lenient where Codex is, because models are trained on that leniency), new
file bodies planned from a `read` callback (`plan_patch`, the same four-pass fuzzy line
matching as Codex), and a patch recognised inside a shell command (`extract_shell_patch`).
No I/O: apply_patch.py applies the plan to a workspace.

Why one module: parser, matcher and planner of one format, which must agree with each
other and with Codex's.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Literal

from runner.errors import PatchError
from runner.frozen import frozen

BEGIN_PATCH = "*** Begin Patch"
END_PATCH = "*** End Patch"
ADD_FILE = "*** Add File: "
DELETE_FILE = "*** Delete File: "
UPDATE_FILE = "*** Update File: "
MOVE_TO = "*** Move to: "
END_OF_FILE = "*** End of File"
SUCCESS_HEADER = "Success. Updated the following files:"

ChangeKind = Literal["add", "delete", "update"]


# --------------------------------------------------------------------------- model


@frozen
class Chunk:
    """One `@@` section of an update: replace `old_lines` by `new_lines`."""

    change_context: str | None
    """A single line (usually a `def`/`class` header) the chunk must come after."""
    old_lines: list[str]
    new_lines: list[str]
    is_end_of_file: bool = False
    """`*** End of File` was given: `old_lines` must be the last lines of the file."""


@frozen
class AddFile:
    path: str
    contents: str


@frozen
class DeleteFile:
    path: str


@frozen
class UpdateFile:
    path: str
    move_to: str | None
    chunks: list[Chunk]


Hunk = AddFile | DeleteFile | UpdateFile


@frozen
class Patch:
    hunks: list[Hunk]


@frozen
class FileChange:
    """The planned effect of one hunk: the full new body, ready to be written."""

    path: str
    kind: ChangeKind
    contents: str | None
    """New file text for add/update; None for delete."""
    move_to: str | None = None


@frozen
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


def path_key(path: str) -> str:
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
        key = path_key(path)
        if key not in state:
            state[key] = read(path)
        return state[key]

    changes: list[FileChange] = []
    for hunk in patch.hunks:
        if isinstance(hunk, AddFile):
            state[path_key(hunk.path)] = hunk.contents
            changes.append(FileChange(hunk.path, "add", hunk.contents))
        elif isinstance(hunk, DeleteFile):
            if current(hunk.path) is None:
                raise PatchError(f"cannot delete {hunk.path}: no such file")
            state[path_key(hunk.path)] = None
            changes.append(FileChange(hunk.path, "delete", None))
        else:
            original = current(hunk.path)
            if original is None:
                raise PatchError(f"cannot update {hunk.path}: no such file")
            updated = update_contents(original, hunk.path, hunk.chunks)
            if hunk.move_to is not None:
                state[path_key(hunk.path)] = None
                state[path_key(hunk.move_to)] = updated
            else:
                state[path_key(hunk.path)] = updated
            changes.append(FileChange(hunk.path, "update", updated, hunk.move_to))
    return changes


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
