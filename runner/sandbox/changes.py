"""What a run changed in its environment's workdir, as one binary-safe patch (issue 26).

A container's work is not a host checkout the workspace layer can commit, so the start
state is recorded inside the environment, through its `exec` alone:

- where workdir is in a git repository, its state (tracked and untracked files, minus what
  .gitignore leaves out) is written as a tree into a private object store and index under
  /tmp, the repository's own objects borrowed as an alternate: the image's branch, index,
  refs and object store are never written. At the end the same is done again and git
  diffs the two trees, leaving out files over `PATCH_FILE_MAX_BYTES` as today's patches do;
- where workdir is in no repository but the image has git (a host checkout is copied in
  without its `.git`), the same is done with a private repository made for it under /tmp,
  so a workdir of any size keeps its diff and its big files are named, not lost;
- otherwise (no git in the image), or where /tmp does not last from one command to the
  next (bubblewrap gives each command its own), one `tar` of workdir (`.git` left out) is
  read into memory at start and again at the end, and the patch is written here in git's
  format (text hunks, `GIT binary patch` literals). A workdir whose tar is over
  `SNAPSHOT_MAX_BYTES` has no diff, and says so.

Every exec has a timeout and an output cap; the patch is at most `PATCH_MAX_BYTES`.
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import io
import posixpath
import tarfile
import zlib
from collections.abc import Mapping
from dataclasses import field

from runner.frozen import frozen
from runner.sandbox.environment import Environment, ExecResult
from runner.sizes import PATCH_FILE_MAX_BYTES, PATCH_MAX_BYTES, size

SNAPSHOT_MAX_BYTES = 32 << 20
"""A workdir without git is read whole (as a tar) at start and end: up to this much."""
EXEC_TIMEOUT_S = 600.0
"""One snapshot or diff command: hashing a large repository takes a while."""
LIST_CAP = 8 << 20
"""The raw list of changed paths and sizes."""

_GIT = "git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c safe.directory='*'"
_STATE = f"""
set -e
cd "$1"
if [ -d "$2/repo" ]; then
  top="$1"
  export GIT_DIR="$2/repo" GIT_WORK_TREE="$1"
else
  top=$({_GIT} rev-parse --show-toplevel)
  common=$(cd "$({_GIT} rev-parse --git-common-dir)" && pwd)
  export GIT_ALTERNATE_OBJECT_DIRECTORIES="$common/objects"
fi
export GIT_INDEX_FILE="$2/index" GIT_OBJECT_DIRECTORY="$2/objects"
cd "$top"
"""
"""Enters workdir's repository with the private index and object store of folder $2; or,
where workdir is in no repository, the private one made for it in $2/repo."""
_SNAPSHOT = f"""
cd "$1" || exit 9
if ! {_GIT} rev-parse --show-toplevel >/dev/null 2>&1; then
  {_GIT} init -q --bare "$2/repo" >/dev/null || exit 9
fi
{_STATE}
if {_GIT} rev-parse -q --verify HEAD >/dev/null; then {_GIT} read-tree HEAD
else {_GIT} read-tree --empty; fi
{_GIT} add -A . 2>/dev/null
printf '%s\\n%s\\n' "$({_GIT} write-tree)" "$top"
"""
_END = f"""{_STATE}
{_GIT} add -A . 2>/dev/null
new=$({_GIT} write-tree)
printf '%s\\n' "$new"
{_GIT} diff-tree -r -z --no-renames --abbrev=40 "$3" "$new" -- "$4" 2>/dev/null |
  tr '\\0' '\\n' | grep -E '^:' | cut -d' ' -f3,4 | tr ' ' '\\n' | grep -v '^0*$' |
  {_GIT} cat-file --batch-check='%(objectname) %(objectsize)'
"""
_DIFF = f"""{_STATE}
shift 2
exec {_GIT} diff --binary --full-index --no-renames --no-color --no-ext-diff --no-textconv \\
  --src-prefix=a/ --dst-prefix=b/ "$@" 2>/dev/null
"""


@frozen
class Snapshot:
    """The start state of a workdir: a tree in a private store (git) or its files."""

    workdir: str
    tree: str | None = None
    state: str = ""
    """The private index and object folder (git)."""
    top: str = ""
    """The repository's top level (git); workdir may be below it."""
    files: Mapping[str, tuple[str, bytes]] | None = None
    """path -> (git mode, bytes) (no git); None when workdir was too large."""
    note: str = ""


@frozen
class Changes:
    patch: bytes
    """`git apply`-able, paths relative to workdir; empty when nothing changed."""
    left_out: tuple[str, ...] = field(default=())
    """`path: why` for each change the patch does not hold."""


async def _sh(env: Environment, script: str, *args: str, cap: int) -> ExecResult:
    return await env.exec(
        ["sh", "-c", script, "sh", *args], cwd="/", timeout_s=EXEC_TIMEOUT_S, output_cap=cap
    )


async def snapshot(env: Environment) -> Snapshot:
    """Record workdir as it is now (call before the agent's first command)."""
    work = env.workdir
    made = await _sh(env, "mktemp -d /tmp/runner-changes.XXXXXX 2>/dev/null", cap=4096)
    state = made.output.decode(errors="replace").strip()
    if made.exit_code == 0 and state.startswith("/tmp/runner-changes."):
        # Gone already where each command has its own /tmp (bubblewrap): tar, then.
        script = f'mkdir "$2/objects" || exit 9\n{_SNAPSHOT}'
        got = await _sh(env, script, work, state, cap=1 << 16)
        lines = [x for x in got.output.decode(errors="replace").splitlines() if x]
        if got.exit_code == 0 and len(lines) >= 2 and _is_oid(lines[-2]):
            return Snapshot(workdir=work, tree=lines[-2], state=state, top=lines[-1])
        await _sh(env, 'rm -rf "$1"', state, cap=4096)
    files, note = await _read_tree(env, work)
    return Snapshot(workdir=work, files=files, note=note)


async def diff(env: Environment, start: Snapshot) -> Changes:
    """workdir now against `start`, as a patch relative to workdir."""
    if start.tree is not None:
        try:
            return await _git_diff(env, start)
        finally:
            await _sh(env, 'rm -rf "$1"', start.state, cap=4096)
    if start.files is None:
        return Changes(b"", (f"{start.workdir}: {start.note}",))
    now, note = await _read_tree(env, start.workdir)
    if now is None:
        return Changes(b"", (f"{start.workdir}: {note}",))
    return _compare(start.files, now)


async def _git_diff(env: Environment, start: Snapshot) -> Changes:
    rel = posixpath.relpath(start.workdir, start.top)
    spec = "." if rel == "." else rel
    end = await _sh(env, _END, start.workdir, start.state, str(start.tree), spec, cap=LIST_CAP)
    out = end.output.decode(errors="replace").splitlines()
    if end.exit_code != 0 or end.truncated_bytes or not out or not _is_oid(out[0]):
        return Changes(b"", (f"{start.workdir}: git could not record the end state",))
    new, big = out[0], set()
    for line in out[1:]:
        oid, _, n = line.partition(" ")
        if n.isdigit() and int(n) > PATCH_FILE_MAX_BYTES:
            big.add(oid)
    raw = await _sh(
        env,
        _STATE + _GIT + ' diff-tree -r -z --no-renames --abbrev=40 "$3" "$4" -- "$5" 2>/dev/null',
        start.workdir,
        start.state,
        str(start.tree),
        new,
        spec,
        cap=LIST_CAP,
    )
    left, excluded = [], []
    parts = raw.output.split(b"\0")
    for meta, path in zip(parts[0::2], parts[1::2], strict=False):
        fields = meta.decode(errors="replace").split()
        if len(fields) >= 4 and ({fields[2], fields[3]} & big):
            name = path.decode(errors="surrogateescape")
            excluded.append(f":(exclude,literal){name}")
            shown = posixpath.relpath(name, rel) if rel != "." else name
            left.append(f"{shown}: over {size(PATCH_FILE_MAX_BYTES)}, left out of the patch")
    relative = ["--relative=" + rel] if rel != "." else []
    got = await _sh(
        env,
        _DIFF,
        start.workdir,
        start.state,
        *relative,
        str(start.tree),
        new,
        "--",
        spec,
        *excluded,
        cap=PATCH_MAX_BYTES,
    )
    if got.exit_code != 0:
        return Changes(b"", (f"{start.workdir}: git diff failed (exit {got.exit_code})",))
    if got.truncated_bytes:
        return Changes(b"", (f"{start.workdir}: the diff is over {size(PATCH_MAX_BYTES)}",))
    return Changes(got.output, tuple(left))


async def _read_tree(
    env: Environment, work: str
) -> tuple[dict[str, tuple[str, bytes]] | None, str]:
    """workdir's files and links, read through one tar, or None and why not."""
    got = await _sh(
        env, 'tar -C "$1" --exclude=.git -cf - . 2>/dev/null', work, cap=SNAPSHOT_MAX_BYTES
    )
    if got.truncated_bytes:
        return None, (
            f"over {size(SNAPSHOT_MAX_BYTES)} and not in a git repository: no diff "
            "(give the image a git repository at its workdir)"
        )
    files: dict[str, tuple[str, bytes]] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(got.output), mode="r:") as tar:
            for m in tar:
                name = posixpath.normpath(m.name)
                if name == "." or name.startswith("../"):
                    continue
                if m.issym():
                    files[name] = ("120000", m.linkname.encode("utf-8", "surrogateescape"))
                elif m.isfile():
                    data = tar.extractfile(m)
                    mode = "100755" if m.mode & 0o111 else "100644"
                    files[name] = (mode, data.read() if data is not None else b"")
    except tarfile.TarError as exc:
        return None, f"cannot be read (tar exit {got.exit_code}: {exc})"
    return files, ""


def _compare(old: Mapping[str, tuple[str, bytes]], new: Mapping[str, tuple[str, bytes]]) -> Changes:
    out: list[bytes] = []
    left: list[str] = []
    total = 0
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if max(len(a[1]) if a else 0, len(b[1]) if b else 0) > PATCH_FILE_MAX_BYTES:
            left.append(f"{path}: over {size(PATCH_FILE_MAX_BYTES)}, left out of the patch")
            continue
        piece = file_patch(path, a, b)
        if total + len(piece) > PATCH_MAX_BYTES:
            left.append(f"{path}: the patch would pass {size(PATCH_MAX_BYTES)}")
            continue
        total += len(piece)
        out.append(piece)
    return Changes(b"".join(out), tuple(left))


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _oid(data: bytes | None) -> str:
    if data is None:
        return "0" * 40
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def _quoted(path: str) -> str:
    """A path as git writes it in headers: C-quoted when it has to be."""
    raw = path.encode("utf-8", "surrogateescape")
    if all(0x20 < c < 0x7F and c not in b'"\\' for c in raw):
        return path
    esc = {0x22: '\\"', 0x5C: "\\\\", 0x09: "\\t", 0x0A: "\\n"}
    return (
        '"'
        + "".join(esc.get(c) or (chr(c) if 0x20 <= c < 0x7F else f"\\{c:03o}") for c in raw)
        + '"'
    )


def _text(data: bytes) -> list[str] | None:
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def file_patch(path: str, a: tuple[str, bytes] | None, b: tuple[str, bytes] | None) -> bytes:
    """One file's change in `git diff --binary --full-index` form."""
    pa, pb = _quoted("a/" + path), _quoted("b/" + path)
    head = [f"diff --git {pa} {pb}"]
    if a is None and b is not None:
        head.append(f"new file mode {b[0]}")
    elif b is None and a is not None:
        head.append(f"deleted file mode {a[0]}")
    elif a is not None and b is not None and a[0] != b[0]:
        head += [f"old mode {a[0]}", f"new mode {b[0]}"]
    old, new = (a[1] if a else None), (b[1] if b else None)
    same_mode = a is not None and b is not None and a[0] == b[0]
    if old == new:  # a mode change alone
        return ("\n".join(head) + "\n").encode("utf-8", "surrogateescape")
    head.append(f"index {_oid(old)}..{_oid(new)}" + (f" {a[0]}" if same_mode and a else ""))
    lines_a, lines_b = _text(old or b""), _text(new or b"")
    if lines_a is None or lines_b is None:
        body = ["GIT binary patch", *_literal(new or b""), "", *_literal(old or b""), ""]
        return ("\n".join(head + body) + "\n").encode("utf-8", "surrogateescape")
    head += [f"--- {pa if a else '/dev/null'}", f"+++ {pb if b else '/dev/null'}"]
    text = "\n".join(head) + "\n"
    hunks = difflib.unified_diff(lines_a, lines_b, n=3, lineterm="")
    for line in list(hunks)[2:]:  # difflib's own ---/+++ lines are replaced above
        if line.startswith("@@"):
            text += line.rstrip("\n") + "\n"
        elif line.endswith("\n"):
            text += line
        else:
            text += line + "\n\\ No newline at end of file\n"
    return text.encode("utf-8")


def _literal(data: bytes) -> list[str]:
    """git's `literal` form: zlib-deflated bytes in base85 lines of up to 52 bytes each,
    each led by its length (A-Z: 1-26, a-z: 27-52)."""
    packed = zlib.compress(data, 9)
    out = [f"literal {len(data)}"]
    for i in range(0, len(packed), 52):
        chunk = packed[i : i + 52]
        n = len(chunk)
        lead = chr(ord("A") + n - 1) if n <= 26 else chr(ord("a") + n - 27)
        out.append(lead + base64.b85encode(chunk, pad=True).decode("ascii"))
    return out
