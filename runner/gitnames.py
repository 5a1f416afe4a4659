"""Which path names git treats as its own `.git`: one rule for every place the runner
decides on an agent's path (apply_patch, the commit, files read from a repository).

It is the rule git itself applies with `core.protectNTFS` and `core.protectHFS` on (both
forced in the runner's git calls), so a name refused here is exactly a name git would
refuse to put in a commit, and a checkout of the result can never plant a `.git` on
Windows or macOS either:
- `.git` in any ASCII case;
- NTFS: `.git` or its 8.3 short name `git~1`, followed by any run of dots and spaces,
  optionally followed by `:` and anything (an alternate data stream); and `\\` separates
  components as `/` does;
- HFS+: `.git` with any of the code points HFS+ ignores (zero-width joiners,
  direction marks, BOM) anywhere in it.

A symbolic link may not be named `.gitmodules` by the same rules (git refuses it: a
linked `.gitmodules` was a route to code execution), including the NTFS short names
`gitmod~1`..`gitmod~4` and `gi7eba~N`.
"""

from __future__ import annotations

import re

__all__ = ["component_is_dotgit", "git_refuses", "path_has_dotgit"]

_HFS_IGNORABLE = frozenset(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
_NTFS_DOTGIT = re.compile(r"(?:\.git|git~1)[. ]*(?::.*)?", re.IGNORECASE | re.ASCII | re.S)
_NTFS_DOTGITMODULES = re.compile(
    r"(?:\.gitmodules|gitmod~[1-4]|gi7eba~[1-9]|gi7eb~[1-9][0-9]|gi7e~[1-9][0-9]{2}"
    r"|gi7~[1-9][0-9]{3}|gi~[1-9][0-9]{4}|g~[1-9][0-9]{5}|~[1-9][0-9]{6})[. ]*(?::.*)?",
    re.IGNORECASE | re.ASCII | re.S,
)


def _hfs_equal(name: str, word: str) -> bool:
    return "".join(c for c in name if ord(c) not in _HFS_IGNORABLE).lower() == word


def _components(path: str) -> list[str]:
    return [c for c in path.replace("\\", "/").split("/") if c]


def component_is_dotgit(name: str) -> bool:
    """One path component (no `/`) that git, NTFS or HFS+ would take for `.git`."""
    return any(
        _NTFS_DOTGIT.fullmatch(c) is not None or _hfs_equal(c, ".git") for c in _components(name)
    )


def path_has_dotgit(path: str) -> str | None:
    """The first component of `path` that is a `.git` alias, or None."""
    for part in path.split("/"):
        if part and component_is_dotgit(part):
            return part
    return None


def git_refuses(path: str, *, symlink: bool = False) -> str | None:
    """Why git would refuse to record `path` (a `/`-separated, repository-relative
    path), or None when it accepts it."""
    hit = path_has_dotgit(path)
    if hit is not None:
        return f"{hit!r} is a name git, NTFS or HFS+ treats as `.git`"
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "it has an empty, `.` or `..` component"
    if symlink:
        last = _components(parts[-1])[-1:]
        if last and (
            _NTFS_DOTGITMODULES.fullmatch(last[0]) is not None or _hfs_equal(last[0], ".gitmodules")
        ):
            return "a symbolic link named `.gitmodules` (or an alias of it) is refused by git"
    return None
