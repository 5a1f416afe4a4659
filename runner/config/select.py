"""Which runs of a task file this process runs: `--only`, `--tag` and `--shard`.

A pure function of the runs and the flags (and, for `auto/N`, the environment given), so
every machine of a sharded batch picks disjoint slices that cover the whole.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from runner.config.resolved import Run
from runner.config.schema import COMMAND_LINE
from runner.errors import ConfigError, Problem
from runner.frozen import frozen


@frozen
class Selection:
    runs: tuple[Run, ...]
    """This shard's runs, in task-file order."""
    selected: tuple[Run, ...]
    """Every run `--only` and `--tag` kept, before `--shard` sliced them: the batch's
    identity, equal on every shard."""
    not_selected: int
    """Runs of the file that `--only` or `--tag` left out."""
    shard: int = 1
    shards: int = 1


def _problem(flag: str, message: str) -> ConfigError:
    return ConfigError([Problem(COMMAND_LINE, None, flag, message)])


def parse_shard(text: str, env: Mapping[str, str]) -> tuple[int, int]:
    """`K/N`, or `auto/N` in a Kubernetes Indexed Job: K is its 0-based
    JOB_COMPLETION_INDEX plus one."""
    m = re.fullmatch(r"(\d+|auto)/(\d+)", text.strip())
    if m and m[1] == "auto":
        index = env.get("JOB_COMPLETION_INDEX", "")
        if not index.isdigit():
            raise _problem(
                "--shard",
                f"auto/N takes K from JOB_COMPLETION_INDEX (a Kubernetes "
                f"Indexed Job sets it), which is {index!r} here",
            )
        m = re.fullmatch(r"(\d+)/(\d+)", f"{int(index) + 1}/{m[2]}")
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise _problem(
            "--shard",
            f"got {text!r}; must be K/N with 1 <= K <= N, e.g. 2/4, "
            "or auto/N in a Kubernetes Indexed Job",
        )
    return int(m[1]), int(m[2])


def shard_of(runs: Sequence[Run], k: int, n: int) -> list[Run]:
    """Runs ordered by fingerprint (the same on every machine), then every N-th from the
    K-th: slices are disjoint, cover everything, and differ in size by at most one."""
    ordered = sorted(runs, key=lambda t: (t.fingerprint, t.name))
    return [t for i, t in enumerate(ordered) if i % n == k - 1]


def select(
    runs: Sequence[Run],
    *,
    file: str,
    only: Sequence[str] = (),
    tags: Sequence[str] = (),
    shard: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Selection:
    """The runs the flags choose. An id or tag that matches nothing is a bad flag (exit 2),
    not an empty batch: it is most often a typo."""
    chosen = list(runs)
    if only:
        unknown = sorted(set(only) - {t.id for t in chosen})
        if unknown:
            raise _problem(
                "--only",
                f"no task with id {', '.join(unknown)}; ids in {file}: "
                f"{', '.join(dict.fromkeys(t.id for t in chosen))}",
            )
        chosen = [t for t in chosen if t.id in only]
    if tags:
        known = sorted({tag for t in chosen for tag in t.tags})
        unknown = sorted(set(tags) - set(known))
        if unknown:
            raise _problem(
                "--tag",
                f"no task has tag {', '.join(unknown)}; tags in {file}: "
                f"{', '.join(known) or 'none'}",
            )
        chosen = [t for t in chosen if set(t.tags) & set(tags)]
    k = n = 1
    mine = chosen
    if shard is not None:
        k, n = parse_shard(shard, env if env is not None else {})
        mine = shard_of(chosen, k, n)
    return Selection(tuple(mine), tuple(chosen), len(runs) - len(chosen), k, n)
