"""The prompt: base instructions and the context items that open every conversation.

The layout follows Codex exactly (tags, part order, joins), because models trained on
Codex transcripts expect it. The prose is our own. Everything here is deterministic:
the caller passes date and timezone in, so identical settings give identical bytes and
the cached prompt prefix survives from one request, and one run, to the next.

The conversation starts with two context messages, then the task:

1. a `developer` message: the permissions block, then the developer instructions;
2. a `user` message: the AGENTS.md instructions, then the environment context;
3. the `user` message with the task.

Later turns of a task send only their prompt: the settings of a run never change.

Which AGENTS.md files apply is agents_md.py; the skills are found by skills.py.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Literal

from runner import hostfs
from runner.agents_md import agents_md
from runner.errors import ConfigError, Problem, SandboxError, UnsafeFileError
from runner.items import Item, message
from runner.skills import Skill
from runner.vocabulary import SandboxMode

PERMISSIONS_OPEN = "<permissions instructions>"
PERMISSIONS_CLOSE = "</permissions instructions>"
ENVIRONMENT_OPEN = "<environment_context>"
ENVIRONMENT_CLOSE = "</environment_context>"
USER_INSTRUCTIONS_PREFIX = "# AGENTS.md instructions for "
CONTEXTUAL_USER_PREFIXES = (USER_INSTRUCTIONS_PREFIX, ENVIRONMENT_OPEN)

# Our own wording; only the backticked identifiers and the placeholder mirror Codex.
_SANDBOX_TEXT: dict[str, str] = {
    "read-only": (
        "The filesystem sandbox decides which paths commands may read and which they may"
        " change. `sandbox_mode` is `read-only`: commands may read any file, but nothing on"
        " disk may be created, modified or deleted. Network access is {network}."
    ),
    "workspace-write": (
        "The filesystem sandbox decides which paths commands may read and which they may"
        " change. `sandbox_mode` is `workspace-write`: commands may read any file, and may"
        " change files only inside `cwd` and the `writable_roots`; changes anywhere else"
        " are refused. Network access is {network}."
    ),
    "danger-full-access": (
        "The filesystem sandbox decides which paths commands may read and which they may"
        " change. `sandbox_mode` is `danger-full-access`: there is no sandbox, so commands"
        " may read and change any file. Network access is {network}."
    ),
}

_APPROVAL_TEXT = (
    "`approval_policy` is `never`: no one is available to approve anything. Never ask"
    " for escalated permissions or wait for approval; a command the sandbox refuses"
    " simply fails, so find a way to finish the task within the current permissions."
)
"""A headless run has no one to approve anything, so `never` is the only policy."""


# --- base instructions -------------------------------------------------------------


@functools.cache
def base_instructions() -> str:
    """The bundled base instructions, read once: they are the first bytes of every prompt."""
    path = resources.files("runner").joinpath("data", "base_instructions.md")
    return path.read_text(encoding="utf-8").strip()


MAX_INSTRUCTIONS_BYTES = 4 << 20
"""An instructions file past this is a mistake (or a device), not instructions."""


def load_instructions(instructions_file: Path | None) -> str:
    """The `instructions` text: the given file (trimmed, must be non-empty) or our own.

    Like Codex's `model_instructions_file`, a configured file replaces the bundled text
    entirely; an unreadable or empty file is a configuration error, not a silent fallback.
    """
    if instructions_file is None:
        return base_instructions()
    try:
        data = hostfs.read_regular(instructions_file, MAX_INSTRUCTIONS_BYTES + 1)
        if len(data) > MAX_INSTRUCTIONS_BYTES:
            raise ConfigError(
                [
                    _instructions_problem(
                        instructions_file, f"larger than {MAX_INSTRUCTIONS_BYTES >> 20} MiB"
                    )
                ]
            )
        text = data.decode("utf-8").strip()
    except (OSError, UnicodeDecodeError, UnsafeFileError) as e:
        raise ConfigError([_instructions_problem(instructions_file, f"cannot read: {e}")]) from e
    if not text:
        raise ConfigError([_instructions_problem(instructions_file, "file is empty")])
    return text


def _instructions_problem(path: Path, msg: str) -> Problem:
    return Problem(file=str(path), line=None, field="instructions_file", message=msg)


# --- permissions (developer message) ---------------------------------------------------


def permissions_text(
    *,
    sandbox: SandboxMode,
    network: bool,
    writable_roots: Sequence[Path],
    notes: Sequence[str] = (),
) -> str:
    """The `<permissions instructions>` block telling the model what it may touch.

    Layout as in Codex: a newline, the sandbox sentence, a newline, the approval text,
    then (workspace-write only) the writable-root sentence on its own line, always ending
    in a newline. `writable_roots` is the complete list to show (the caller includes cwd).
    `notes` are extra lines of ours, each on its own line, e.g. that no sandbox is
    enforced yet.
    """
    if sandbox not in _SANDBOX_TEXT:
        raise SandboxError(
            f"unknown sandbox mode {sandbox!r}; expected one of {list(_SANDBOX_TEXT)}"
        )
    body = ""
    body = _append_section(
        body, _SANDBOX_TEXT[sandbox].format(network="enabled" if network else "restricted")
    )
    body = _append_section(body, _APPROVAL_TEXT)
    if sandbox == "workspace-write" and writable_roots:
        quoted = [f"`{root}`" for root in writable_roots]
        if len(quoted) == 1:
            body = _append_section(body, f" The writable root is {quoted[0]}.")
        else:
            body = _append_section(body, f" The writable roots are {', '.join(quoted)}.")
    for note in notes:
        body = _append_section(body, note)
    if not body.endswith("\n"):
        body += "\n"
    return f"{PERMISSIONS_OPEN}{body}{PERMISSIONS_CLOSE}"


def _append_section(text: str, section: str) -> str:
    """Start `section` on a new line, as Codex's permissions builder does."""
    return text + section if text.endswith("\n") else f"{text}\n{section}"


def _effective_roots(cwd: Path, extra: Sequence[Path]) -> tuple[Path, ...]:
    """cwd first, then the configured roots, without duplicates (order kept for caching)."""
    roots: list[Path] = []
    for root in (cwd, *extra):
        if root not in roots:
            roots.append(root)
    return tuple(roots)


# --- AGENTS.md (first part of the contextual user message) ----------------------------


def user_instructions_text(cwd: Path, text: str) -> str:
    """The AGENTS.md part of the contextual user message, in Codex's wrapper."""
    return f"{USER_INSTRUCTIONS_PREFIX}{cwd}\n\n<INSTRUCTIONS>\n{text}\n</INSTRUCTIONS>"


# --- skills (last part of the developer message) -------------------------------------

SKILLS_OPEN = "<skills_instructions>"
SKILLS_CLOSE = "</skills_instructions>"
SKILLS_CHAR_BUDGET = 8000
"""Characters for the skill lines when the model's context window is unknown."""
SKILLS_WINDOW_PERCENT = 2
"""Otherwise 2% of the window, in tokens of about 4 characters (Codex's budget)."""

_SKILLS_INTRO = (
    "Skills are instructions kept in `SKILL.md` files. Each entry below gives a skill's"
    " name, what it is for, and the file to read before using it."
)
_SKILLS_USE = """\
- When the task names a skill, or clearly fits a skill's description, read that skill's \
`SKILL.md` before starting and follow it. Use every skill that applies; a skill counts \
only for the turn that calls for it.
- Read only as much of `SKILL.md` as you need. Paths it mentions are relative to the \
folder that holds it; open further files only when the task needs them, and prefer \
running its scripts and reusing its templates to writing your own.
- When a skill cannot be read or does not fit, say so in one line and carry on without it."""


def skills_budget(context_window: int | None) -> int:
    """Characters the skill lines may take: 2% of the context window (at 4 characters
    a token), or `SKILLS_CHAR_BUDGET` when the window is unknown."""
    if context_window:
        return max(1, context_window * SKILLS_WINDOW_PERCENT // 100) * 4
    return SKILLS_CHAR_BUDGET


def skill_lines(skills: Sequence[Skill], budget: int) -> list[str]:
    """`- name: description (file: path)` per skill, sorted by name, within `budget`
    characters, cut the same way every time.

    Over budget, descriptions are shortened first: each gets an equal share of the room
    left after the bare lines, and a share a short description does not use passes to
    the others (shortest first, then by name); a cut one ends in `…`. If even the bare
    lines do not fit, the skills at the end of the list are left out and a last line
    says how many.
    """
    ordered = sorted(skills, key=lambda s: (s.name, str(s.path)))
    bare = [f"- {s.name}: (file: {s.path})" for s in ordered]
    full = [f"- {s.name}: {s.description} (file: {s.path})" for s in ordered]
    if sum(map(len, full)) <= budget:
        return full
    if sum(map(len, bare)) <= budget:
        room = budget - sum(map(len, bare))
        allowance: dict[int, int] = {}
        left = len(ordered)
        for i in sorted(
            range(len(ordered)), key=lambda i: (len(ordered[i].description), ordered[i].name)
        ):
            give = min(len(ordered[i].description) + 1, room // left)
            allowance[i] = give
            room -= give
            left -= 1
        lines = []
        for i, s in enumerate(ordered):
            a = allowance[i]
            if a >= len(s.description) + 1:
                lines.append(full[i])
            elif a >= 3:
                lines.append(f"- {s.name}: {s.description[: a - 2]}… (file: {s.path})")
            else:
                lines.append(bare[i])
        return lines
    kept: list[str] = []
    used = 0
    for i, line in enumerate(bare):
        note = f"- ({len(bare) - i - 1} more skills left out: over the skills budget)"
        if used + len(line) + len(note) > budget:
            break
        kept.append(line)
        used += len(line)
    return [*kept, f"- ({len(bare) - len(kept)} more skills left out: over the skills budget)"]


def skills_instructions(
    skills: Sequence[Skill], *, context_window: int | None = None, budget: int | None = None
) -> str | None:
    """The `<skills_instructions>` block of the developer message; None without skills."""
    if not skills:
        return None
    lines = skill_lines(skills, skills_budget(context_window) if budget is None else budget)
    body = [
        "## Skills",
        _SKILLS_INTRO,
        "### Available skills",
        *lines,
        "### How to use skills",
        _SKILLS_USE,
    ]
    return SKILLS_OPEN + "\n" + "\n".join(body) + "\n" + SKILLS_CLOSE


# --- environment context (second part of the contextual user message) ----------------


def environment_context(*, cwd: Path, shell: str, current_date: str, timezone: str) -> str:
    """The `<environment_context>` block: where commands run, with which shell, and when."""
    lines = [
        f"  <cwd>{cwd}</cwd>",
        f"  <shell>{shell}</shell>",
        f"  <current_date>{current_date}</current_date>",
        f"  <timezone>{timezone}</timezone>",
    ]
    return f"{ENVIRONMENT_OPEN}\n" + "\n".join(lines) + f"\n{ENVIRONMENT_CLOSE}"


# --- the two context messages ----------------------------------------------------------


def initial_context(
    *,
    cwd: Path,
    sandbox: SandboxMode,
    network: bool,
    writable_roots: Sequence[Path],
    developer_instructions: str | None,
    runner_home: Path | None,
    shell: str,
    current_date: str,
    timezone: str,
    permission_notes: Sequence[str] = (),
    skills: str | None = None,
    docs_from: Path | None | Literal[False] = None,
) -> tuple[list[Item], list[str]]:
    """The two context messages that open a conversation (and follow a compaction), and
    a note for each AGENTS.md that was skipped (`agents_md`).

    Developer message: permissions, then `developer_instructions` if non-empty, then the
    `skills` block (`skills_instructions`) if any. User message: AGENTS.md instructions if
    any, then the environment context. One `input_text` part per section, as Codex sends
    them. `writable_roots` are the roots beyond cwd (cwd is always writable in
    workspace-write and is listed first). `docs_from`: where AGENTS.md is looked for when
    that is not cwd (a container's work copied from a host folder); False: nowhere but
    the runner's home (an image's own work is not on the host).
    """
    developer = [
        permissions_text(
            sandbox=sandbox,
            network=network,
            writable_roots=_effective_roots(cwd, writable_roots),
            notes=permission_notes,
        )
    ]
    if developer_instructions:
        developer.append(developer_instructions)
    if skills:
        developer.append(skills)
    user: list[str] = []
    if docs_from is False:
        docs, notes = agents_md(cwd=cwd, runner_home=runner_home, max_bytes=0)
    else:
        docs, notes = agents_md(cwd=docs_from or cwd, runner_home=runner_home)
    if docs is not None:
        user.append(user_instructions_text(cwd, docs))
    user.append(
        environment_context(cwd=cwd, shell=shell, current_date=current_date, timezone=timezone)
    )
    return [message("developer", *developer), message("user", *user)], notes


def agents_md_of(context: Sequence[Item]) -> str | None:
    """The AGENTS.md text the context messages carry (`user_instructions_text`), without
    its wrapper; None when they carry none."""
    for item in context:
        if item.type != "message" or item.role != "user":
            continue
        for part in item.data.get("content") or ():
            text = part.get("text", "") if isinstance(part, dict) else ""
            if not isinstance(text, str) or not text.startswith(USER_INSTRUCTIONS_PREFIX):
                continue
            _, sep, rest = text.partition("\n\n<INSTRUCTIONS>\n")
            if sep and rest.endswith(_INSTRUCTIONS_CLOSE):
                return rest.removesuffix(_INSTRUCTIONS_CLOSE)
    return None


_INSTRUCTIONS_CLOSE = "\n</INSTRUCTIONS>"


def is_contextual_user_message(item: Item) -> bool:
    """True for the user messages we inject (AGENTS.md, environment context).

    Compaction keeps real user messages and drops these; they are re-injected fresh.
    """
    if item.type != "message" or item.role != "user":
        return False
    content = item.data.get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "input_text"
        ]
    else:
        return False
    return any(t.startswith(CONTEXTUAL_USER_PREFIXES) for t in texts)
