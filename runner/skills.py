"""Skills: folders with a `SKILL.md` whose front matter names and describes them.

Only the name, description and path go into the prompt (`prompt.skills_instructions`);
the model opens `SKILL.md` itself when a skill fits the task, so a long skill costs
nothing until it is used. Read once when the task file is resolved, so a broken skill is
a located configuration error, not a surprise in the middle of a run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from runner import hostfs
from runner.errors import SkillError, UnsafeFileError

SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_FILE_BYTES = 1024 * 1024
_FRONT = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)^---[ \t]*\r?$", re.S | re.M)


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    path: Path
    """Absolute path of the skill's SKILL.md."""


def load_skills(folder: Path) -> list[Skill]:
    """The skills of one `skills:` entry: the folder itself when it holds a SKILL.md,
    else each direct subfolder that does (a folder of skills), sorted by folder name."""
    if (folder / SKILL_FILE).is_file():
        return [read_skill(folder / SKILL_FILE)]
    try:
        subdirs = sorted(p for p in folder.iterdir() if p.is_dir())
    except OSError as exc:
        raise SkillError(f"cannot list {folder}: {exc.strerror or exc}") from None
    found = [read_skill(d / SKILL_FILE) for d in subdirs if (d / SKILL_FILE).is_file()]
    if not found:
        raise SkillError(f"{folder} has no {SKILL_FILE}, nor any subfolder with one")
    return found


def _repository_of(path: Path) -> Path:
    """The repository a skill lies in (nearest folder holding `.git`), else its folder."""
    start = path.parent.resolve()
    return next((d for d in (start, *start.parents) if (d / ".git").exists()), start)


def read_skill(path: Path) -> Skill:
    """Parse SKILL.md's YAML front matter (between `---` lines): `name` and `description`.

    A skill may be committed by whoever can open a pull request, so SKILL.md is read as
    AGENTS.md is (`hostfs.read_inside`): a link within its repository is followed, one
    leading out of it (`/proc/self/environ`, `~/.ssh`) or into a `.git` is refused."""
    try:
        raw = hostfs.read_inside(_repository_of(path), path, MAX_SKILL_FILE_BYTES)
        text = raw.decode("utf-8")
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
    return Skill(name, description, path.resolve())
