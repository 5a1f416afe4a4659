"""The checks of a run's `environment:` that need more than one field: the merged section
against its backend, the `build` folder on disk, and (preflight, unless offline) the
engine and the image on this machine. Each problem is blamed where its run chose the
value (`Run.origins`), so a variant's or the defaults' line is named, not the task's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.config.environment import EnvironmentSettings, build_problem, setting_problems
from runner.config.resolved import Origin, Run
from runner.config.text import esc, short
from runner.errors import Problem


def _at(origins: Mapping[str, Origin], name: str) -> Origin:
    return origins.get(f"environment.{name}") or origins.get("environment") or origins[""]


def environment_problems(env: EnvironmentSettings, origins: Mapping[str, Origin]) -> list[Problem]:
    """What is wrong with one run's merged section, each located at its field."""
    return [_at(origins, name).problem(msg) for name, msg in setting_problems(env)]


class BuildDirs:
    """Each `build` folder made absolute and checked once, however many runs name it."""

    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self._seen: dict[Path, str | None] = {}

    def get(self, base_dir: Path, raw: str | None, origins: Mapping[str, Origin]) -> Path | None:
        if raw is None:
            return None
        folder = base_dir / raw
        if folder not in self._seen:
            self._seen[folder] = build_problem(folder)
        wrong = self._seen[folder]
        if wrong is not None:
            self.problems.append(_at(origins, "build").problem(wrong))
            return None
        return folder.resolve()


def program(run: Run) -> str:
    """The engine program a run's backend drives (kubectl for kubernetes)."""
    env = run.environment
    if env.backend == "kubernetes":
        return "kubectl"
    return env.executable or env.backend


def engine_problems(runs: Sequence[Run], env: Mapping[str, str]) -> list[Problem]:
    """The engine of each container run is on this machine, and so is its `image`
    (podman, docker: the cluster pulls a kubernetes image, so that one is not looked for).
    Each engine and image is asked about once."""
    if all(t.environment.backend == "local" for t in runs):
        return []
    from runner.sandbox.enginecheck import image_missing, which  # container runs only

    found: list[Problem] = []
    where: dict[str, str | None] = {}
    images: dict[tuple[str, str], str | None] = {}
    for t in runs:
        cfg = t.environment
        if cfg.backend == "local":
            continue
        name = program(t)
        if name not in where:
            where[name] = which(name, env)
        path = where[name]
        if path is None:
            field = "executable" if cfg.executable else "backend"
            found.append(
                _at(t.origins, field).problem(
                    f"backend {cfg.backend} needs {esc(name)!r}, which is not "
                    + ("an executable file" if "/" in name else "on PATH")
                    + "; install it, or set `executable` (podman, docker). "
                    "`runner validate --offline` skips this check"
                )
            )
            continue
        if cfg.backend == "kubernetes" or cfg.image is None:
            continue
        key = (path, cfg.image)
        if key not in images:
            images[key] = image_missing(path, cfg.image, env)
        if (why := images[key]) is not None:
            found.append(
                _at(t.origins, "image").problem(
                    f"image {cfg.image} is not on this machine ({esc(short(why, 200))}); "
                    "build or load it first, or use `build:`. "
                    "`runner validate --offline` skips this check"
                )
            )
    return found
