"""Which AGENTS.md files speak to a run, and what of them the model sees, by Codex's rules.

Every file here is the agent's or a PR author's. A link out of the project fails the run
(`UnsafeFileError`); a dangling or looping link, or an unreadable file, is skipped with a
note for the report; a FIFO, device or directory named AGENTS.md is not a candidate at all;
a large file is read only up to the budget. Nothing is followed or read without bound
(`hostfs`)."""

from __future__ import annotations

from pathlib import Path

from runner import hostfs
from runner.errors import UnsafeFileError

AGENTS_MD = "AGENTS.md"
AGENTS_OVERRIDE_MD = "AGENTS.override.md"
AGENTS_MD_MAX_BYTES = 32 * 1024
PROJECT_DOC_SEPARATOR = "\n\n--- project-doc ---\n\n"
PROJECT_ROOT_MARKERS = (".git",)


def agents_md(
    *, cwd: Path, runner_home: Path | None, max_bytes: int = AGENTS_MD_MAX_BYTES
) -> tuple[str | None, list[str]]:
    """The AGENTS.md text for `cwd`, assembled by Codex's rules (None when there is none),
    and a note for each file skipped (a link leading nowhere, an unreadable file).

    Global: `runner_home/AGENTS.override.md`, else `runner_home/AGENTS.md` (the first
    non-empty one, trimmed). Project: from the project root (the nearest ancestor of cwd
    holding a `.git` file or directory; cwd alone if there is none) down to cwd, the first
    existing file of AGENTS.override.md, AGENTS.md in each directory. Project files share
    a `max_bytes` budget (0 disables them), are kept as written except for a truncation
    cut on a UTF-8 boundary, and are joined with a blank line.
    """
    global_text = _global_agents_md(runner_home)
    project_text, notes = _project_agents_md(cwd, max_bytes)
    parts = [p for p in (global_text, project_text) if p is not None]
    return (PROJECT_DOC_SEPARATOR.join(parts) if parts else None), notes


def _global_agents_md(runner_home: Path | None) -> str | None:
    if runner_home is None:
        return None
    for name in (AGENTS_OVERRIDE_MD, AGENTS_MD):
        try:
            data = hostfs.read_regular(runner_home / name, AGENTS_MD_MAX_BYTES)
            text = data.decode("utf-8", errors="replace").strip()
        except (OSError, UnsafeFileError):
            continue
        if text:
            return text
    return None


def _project_agents_md(cwd: Path, max_bytes: int) -> tuple[str | None, list[str]]:
    notes: list[str] = []
    if max_bytes <= 0:
        return None, notes
    remaining = max_bytes
    parts: list[str] = []
    root, paths = _project_doc_paths(cwd)
    for path in paths:
        if remaining <= 0:
            break
        try:
            # Committed files are hostile: a link out of the project (to
            # /proc/self/environ, ~/.ssh, ...) or a FIFO is refused, not followed.
            data = hostfs.read_inside(root, path, remaining + 1)
        except OSError as exc:
            # Unreadable, or a link that leads nowhere (dangling or a loop): skipped
            # rather than failing the whole run, and said in the report (`notes`).
            why = exc.strerror or str(exc)
            notes.append(
                why if "leads nowhere" in why else f"{path}: cannot be read ({why}); ignored"
            )
            continue
        # UnsafeFileError is not caught: the run fails with the reason in its report.
        if len(data) > remaining:
            data = data[:remaining]
            text = _cut_utf8(data).decode("utf-8", errors="replace")
        else:
            text = data.decode("utf-8", errors="replace")
        if text.strip():
            parts.append(text)
            # Codex charges the bytes read, so a truncated file uses up the budget.
            remaining -= len(data)
    return ("\n\n".join(parts) if parts else None), notes


def _project_doc_paths(cwd: Path) -> tuple[Path, list[Path]]:
    """The project root, and the AGENTS.md-like file to read in each directory from it
    to cwd."""
    start = cwd.resolve()
    root = next(
        (
            d
            for d in (start, *start.parents)
            if any((d / marker).exists() for marker in PROJECT_ROOT_MARKERS)
        ),
        None,
    )
    dirs = [start]
    if root is not None:
        d = start
        while d != root and d.parent != d:
            d = d.parent
            dirs.append(d)
        dirs.reverse()
    found: list[Path] = []
    for d in dirs:
        for name in (AGENTS_OVERRIDE_MD, AGENTS_MD):
            if (d / name).is_symlink() or (d / name).is_file():
                found.append(d / name)
                break
    return (root or start), found


def _cut_utf8(data: bytes) -> bytes:
    """Drop a multi-byte character left incomplete at the end of a truncated buffer."""
    # Step back over continuation bytes (at most 3) to the lead byte of the last character.
    i = len(data) - 1
    while i >= 0 and len(data) - i < 4 and data[i] & 0xC0 == 0x80:
        i -= 1
    if i < 0:
        return data
    lead = data[i]
    if lead & 0xE0 == 0xC0:
        need = 2
    elif lead & 0xF0 == 0xE0:
        need = 3
    elif lead & 0xF8 == 0xF0:
        need = 4
    else:
        need = 1
    return data[:i] if len(data) - i < need else data
