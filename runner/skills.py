"""Skills: folders with a `SKILL.md` whose front matter names and describes them.

Only the name, description and path go into the prompt (`prompt.skills_instructions`);
the model opens `SKILL.md` itself when a skill fits the task, so a long skill costs
nothing until it is used. Read once when the task file is resolved, so a broken skill is
a located configuration error, not a surprise in the middle of a run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

import yaml

from runner import hostfs
from runner.errors import SkillError, UnsafeFileError
from runner.frozen import frozen

SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_FILE_BYTES = 1024 * 1024
SKILLS_AT = Path("/tmp/.runner/skills")
"""Where a sandbox, a container or a Pod shows the skills: `<SKILLS_AT>/<n>` is the n-th
skill's folder (bind-mounted by bubblewrap, copied in by runner/envrun.py)."""
MAX_STAGED_BYTES = 64 << 20
"""What one skill folder may hold, all files together, to be copied for the sandbox."""
MAX_STAGED_FILES = 10_000
MAX_STAGED_DEPTH = 32
_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?$", re.S | re.M)


@frozen
class Skill:
    name: str
    description: str
    path: Path
    """Absolute path of the skill's SKILL.md (where a link named SKILL.md leads)."""
    folder: Path | None = dataclasses.field(default=None, compare=False)
    """The folder holding the file named SKILL.md: what `stage` copies."""


def load_skills(folder: Path) -> list[Skill]:
    """The skills of one `skills:` entry: the folder itself when it holds a SKILL.md,
    else each direct subfolder that does (a folder of skills), sorted by folder name.

    A skill's folder is copied whole into the sandbox (`stage`), so it must be a real
    folder inside the entry: a committed `skills/evil -> ..` would otherwise carry the
    user's work tree (its `.env`, untracked files) into every run. SkillError for a
    subfolder that is a link, and for a skill folder that is a repository's top or
    holds the repository the entry lies in (`check_folder`)."""
    root = Path(os.path.realpath(folder))
    if (folder / SKILL_FILE).is_file():
        found = [read_skill(folder / SKILL_FILE)]
    else:
        try:
            subdirs = sorted(p for p in folder.iterdir() if p.is_dir())
        except OSError as exc:
            raise SkillError(f"cannot list {folder}: {exc.strerror or exc}") from None
        for d in subdirs:
            if d.is_symlink() and (d / SKILL_FILE).exists():
                raise SkillError(
                    f"{d}: a skill folder may not be a link (it leads to "
                    f"{os.path.realpath(d)}); the runner copies a skill's folder into the "
                    "sandbox and would copy whatever the link leads to"
                )
        found = [read_skill(d / SKILL_FILE) for d in subdirs if (d / SKILL_FILE).is_file()]
        if not found:
            raise SkillError(f"{folder} has no {SKILL_FILE}, nor any subfolder with one")
    for skill in found:
        check_folder(skill.folder or skill.path.parent, root, _written_in(folder))
    return found


def check_folder(skill: Path, root: Path, repository: Path) -> None:
    """SkillError unless `skill` (resolved) may be copied whole for the sandbox: inside
    `root` (the resolved `skills:` entry), not a repository's top (a folder holding
    `.git`), and not `repository` (the one the entry is written in) or a folder above
    it."""
    real = Path(os.path.realpath(skill))
    why = None
    if not real.is_relative_to(root):
        why = f"it lies outside the skills folder {root}"
    elif os.path.lexists(real / ".git"):
        why = "it is the top of a repository (it holds .git)"
    elif Path(os.path.realpath(repository)).is_relative_to(real):
        why = f"it holds the repository {repository}"
    if why is not None:
        raise SkillError(
            f"{skill}: not a skill folder the runner copies into the sandbox: {why}; "
            "keep each skill in a folder of its own"
        )


def _repository_of(path: Path) -> Path:
    """The repository a skill lies in (nearest folder holding `.git`), else its folder."""
    start = path.parent.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def _written_in(path: Path) -> Path:
    """The repository a `skills:` entry is written in, by its path as given (links not
    followed, so `<repo>/skills -> ..` still names `<repo>`); else the entry itself."""
    start = Path(os.path.abspath(path))
    return next((d for d in (start, *start.parents) if os.path.lexists(d / ".git")), start)


def read_skill_text(path: Path) -> bytes:
    """SKILL.md's bytes, read as `read_skill` says."""
    return hostfs.read_inside(_repository_of(path), path, MAX_SKILL_FILE_BYTES)


def read_skill(path: Path) -> Skill:
    """Parse SKILL.md's YAML front matter (between `---` lines): `name` and `description`.

    A skill may be committed by whoever can open a pull request, so SKILL.md is read as
    AGENTS.md is (`hostfs.read_inside`): a link within its repository is followed, one
    leading out of it (`/proc/self/environ`, `~/.ssh`) or into a `.git` is refused."""
    try:
        text = read_skill_text(path).decode("utf-8")
    except OSError as exc:
        raise SkillError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnsafeFileError as exc:
        raise SkillError(str(exc)) from None
    except UnicodeDecodeError:
        raise SkillError(f"{path} is not UTF-8 text") from None
    m = _FRONT.match(text)
    if m is None:
        raise SkillError(
            f"{path} must start with YAML front matter: a `---` line, "
            "`name:` and `description:`, and a closing `---` line"
        )
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 2})" if where is not None else ""
        raise SkillError(f"{path}: front matter is not valid YAML{line}") from None
    if not isinstance(meta, dict):
        raise SkillError(f"{path}: front matter must be a mapping with name and description")
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not name.strip():
        raise SkillError(f"{path}: front matter needs `name:` (a non-empty string)")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{path}: front matter needs `description:` (a non-empty string)")
    name = " ".join(name.split())
    if len(name) > MAX_NAME_CHARS:
        raise SkillError(f"{path}: name is longer than {MAX_NAME_CHARS} characters")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise SkillError(f"{path}: description is longer than {MAX_DESCRIPTION_CHARS} characters")
    return Skill(name, description, path.resolve(), Path(os.path.realpath(path.parent)))


@frozen
class Staged:
    """Skills as a sandboxed run sees them: each folder copied by the runner and shown
    at `SKILLS_AT/<n>`, so neither the prompt, nor a mount's source in
    /proc/self/mountinfo, nor a path the model opens names the folder the skill came from
    (often the user's repository)."""

    skills: tuple[Skill, ...]
    """As the prompt lists them (the path of the copy's SKILL.md inside the sandbox)."""
    mounts: tuple[tuple[Path, Path], ...]
    """(the copy on the host, where the sandbox shows it), read-only."""


def stage(skills: Sequence[Skill], into: Path) -> Staged:
    """Copy each skill's folder into `into/<n>` (the run's private dir). Only folders and
    regular files are copied, at most `MAX_STAGED_BYTES` a skill; a link is copied as the
    file it leads to while that stays inside the skill's own folder, and left out
    otherwise (a link to the repository's `.env` must not carry it into the sandbox);
    SKILL.md, read already, may lead anywhere in its repository (`read_skill`). A link to
    a folder is never followed. SkillError when a folder is too big, or has become a
    link or a repository's top since it was loaded."""
    shown: list[Skill] = []
    mounts: list[tuple[Path, Path]] = []
    _folder(into)
    for n, skill in enumerate(skills):
        copy, at = into / str(n), SKILLS_AT / str(n)
        folder = skill.folder or skill.path.parent
        if os.path.islink(folder) or os.path.lexists(folder / ".git"):
            # Checked when loaded (`check_folder`); the disk may have changed since.
            raise SkillError(f"{folder}: a skill folder may not be a link or hold .git")
        _copy_folder(folder, copy, folder)
        if not os.path.lexists(copy / SKILL_FILE):  # a link out of the folder
            try:
                text = read_skill_text(folder / SKILL_FILE)
            except (OSError, UnsafeFileError) as exc:
                raise SkillError(f"cannot read {folder / SKILL_FILE}: {exc}") from None
            _write(copy / SKILL_FILE, text, executable=False)
        shown.append(dataclasses.replace(skill, path=at / SKILL_FILE))
        mounts.append((copy, at))
    return Staged(tuple(shown), tuple(mounts))


def _copy_folder(src: Path, dst: Path, inside: Path) -> None:
    budget = [MAX_STAGED_BYTES, MAX_STAGED_FILES]
    todo = [(src, dst, 0)]
    while todo:
        here, there, depth = todo.pop()
        _folder(there)
        try:
            names = sorted(os.listdir(here))
        except OSError as exc:
            raise SkillError(f"cannot list {here}: {exc.strerror or exc}") from None
        for name in names:
            path = here / name
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode) and depth < MAX_STAGED_DEPTH and name != ".git":
                todo.append((path, there / name, depth + 1))
            elif stat.S_ISREG(mode) or stat.S_ISLNK(mode):
                _copy_file(path, there / name, inside, budget)


def _copy_file(path: Path, dst: Path, inside: Path, budget: list[int]) -> None:
    try:
        data = hostfs.read_inside(inside, path, budget[0] + 1)
        executable = os.stat(path).st_mode & 0o111
    except (OSError, UnsafeFileError):
        return  # a link out of the repository, or to a folder: not part of the copy
    budget[0] -= len(data)
    budget[1] -= 1
    if budget[0] < 0 or budget[1] < 0:
        raise SkillError(
            f"{path.parent}: the skill's folder holds more than {MAX_STAGED_BYTES >> 20} MiB "
            f"or {MAX_STAGED_FILES} files, too much to copy for the sandbox; keep a "
            "skill's folder to its SKILL.md and what it uses"
        )
    _write(dst, data, executable=bool(executable))


def _write(dst: Path, data: bytes, *, executable: bool) -> None:
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        hostfs.write_all(fd, data)
        os.fchmod(fd, 0o755 if executable else 0o644)
    finally:
        os.close(fd)


def _folder(path: Path) -> None:
    """Made readable by the sandbox's user (nobody, for a root runner), whatever the
    umask."""
    os.mkdir(path, 0o755)
    os.chmod(path, 0o755)
