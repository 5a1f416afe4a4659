"""A docker-compose file with one service, reduced to the one container runner starts.
Pure: the caller reads the text.

Terminal-Bench ships a compose file with every task, nearly always its template: one
`client` service built from the task's Dockerfile, sleeping, with the test folder in its
environment and two log folders mounted. That reduces to "build this Dockerfile, set
these variables, work here". Anything that does not reduce (a second service, ports,
networks, volumes of the task's own, a service that runs something) is refused, located,
because running the task without it would grade a different task."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from runner.errors import Problem
from runner.frozen import frozen
from runner.suites import bounds
from runner.suites.folder import expand
from runner.suites.yaml_text import KeyPath, dotted, line_of, load_yaml

_TOP_KEYS = {"services", "version", "name"}
_COMPOSE_TOP_KEYS = {"networks", "volumes", "configs", "secrets", "include", "models"}
"""The compose specification's other top-level keys: what runner leaves to a compose
engine, not typing mistakes."""
_SERVICE_KEYS = {
    "build",
    "image",
    "container_name",
    "command",
    "environment",
    "working_dir",
    "volumes",
    "network_mode",
}
_BUILD_KEYS = {"context", "dockerfile"}


@frozen
class ComposeService:
    name: str
    context: str | None
    """`.` (the compose file's own folder, the only context allowed), or None: no build."""
    dockerfile: str | None
    image: str | None
    """The image to run when nothing is built; None when the name is only the tag of the
    build (a `${...}` the harness fills in)."""
    env: tuple[tuple[str, str], ...]
    working_dir: str | None


class _Reducer:
    def __init__(
        self,
        file: str,
        lines: dict[KeyPath, int],
        variables: Mapping[str, str],
        log_mounts: frozenset[str],
    ) -> None:
        self.file = file
        self.lines = lines
        self.variables = variables
        self.log_mounts = log_mounts
        self.problems: list[Problem] = []

    def refuse(self, path: KeyPath, message: str) -> None:
        self.problems.append(Problem(self.file, line_of(path, self.lines), dotted(path), message))

    def expand(self, path: KeyPath, value: str) -> str | None:
        try:
            return expand(value, self.variables)
        except KeyError as exc:
            self.refuse(path, f"${{{exc.args[0]}}} is not set; give it as a suite variable")
            return None

    def service(self, name: str, svc: Any) -> ComposeService | None:
        path: KeyPath = ("services", name)
        if not isinstance(svc, dict):
            self.refuse(path, "a service must be a mapping")
            return None
        for key in svc:
            if key not in _SERVICE_KEYS:
                self.refuse(
                    (*path, str(key)),
                    "not supported: runner runs the task as one container; allowed here: "
                    + ", ".join(sorted(_SERVICE_KEYS)),
                )
        context, dockerfile = self.build(path, svc.get("build"))
        image = svc.get("image")
        if image is not None and not isinstance(image, str):
            self.refuse((*path, "image"), "must be an image name")
            image = None
        if isinstance(image, str):
            image = (
                None
                if "${" in image and context is not None
                else self.expand((*path, "image"), image)
            )
        if image is not None and (wrong := bounds.image_problem(image)) is not None:
            self.refuse((*path, "image"), wrong)
            image = None
        self.command(path, svc.get("command"))
        self.volumes(path, svc.get("volumes"))
        network = svc.get("network_mode")
        if network is not None and network != "none":
            self.refuse((*path, "network_mode"), "only `none` is supported here")
        working_dir = svc.get("working_dir")
        if working_dir is not None:
            wrong = (
                bounds.workdir_problem(working_dir)
                if isinstance(working_dir, str)
                else "must be an absolute path"
            )
            if wrong is not None:
                self.refuse((*path, "working_dir"), wrong)
                working_dir = None
        if svc.get("build") is None and svc.get("image") is None:
            self.refuse(path, "the service has neither `build` nor an `image` to run")
        return ComposeService(
            name=name,
            context=context,
            dockerfile=dockerfile,
            image=image,
            env=self.environment((*path, "environment"), svc.get("environment")),
            working_dir=working_dir,
        )

    def build(self, path: KeyPath, build: Any) -> tuple[str | None, str | None]:
        """The build as (".", "Dockerfile"): the task folder's own Dockerfile is all that
        is built, so a context elsewhere (`/`, `..`, a sibling) never reaches the engine."""
        where = (*path, "build")
        if build is None:
            return None, None
        if isinstance(build, str):
            build = {"context": build}
            at_context = where
        elif isinstance(build, dict):
            at_context = (*where, "context")
        else:
            self.refuse(where, "must be a context folder or a mapping of context and dockerfile")
            return None, None
        for key in build:
            if key not in _BUILD_KEYS:
                self.refuse((*where, str(key)), "not supported; allowed: context, dockerfile")
        context, dockerfile = build.get("context", "."), build.get("dockerfile", "Dockerfile")
        ok = True
        if not isinstance(context, str) or not _is_here(context):
            self.refuse(
                at_context,
                f"{bounds.shown(context)} is refused: only the task folder itself can be the "
                "build context (`.`)",
            )
            ok = False
        if not isinstance(dockerfile, str) or posixpath.normpath(dockerfile) != "Dockerfile":
            self.refuse(
                (*where, "dockerfile"),
                f"{bounds.shown(dockerfile)} is refused: only the task folder's own "
                "`Dockerfile` can be built",
            )
            ok = False
        return (".", "Dockerfile") if ok else (None, None)

    def command(self, path: KeyPath, command: Any) -> None:
        if command is None:
            return
        words = command if isinstance(command, list) else [command]
        if not any(isinstance(w, str) and "sleep infinity" in w for w in words) and words[-2:] != [
            "sleep",
            "infinity",
        ]:
            self.refuse(
                (*path, "command"),
                "only a service that sleeps (`sleep infinity`) is supported: runner starts "
                "the container itself and the agent's commands are what runs in it",
            )

    def volumes(self, path: KeyPath, volumes: Any) -> None:
        if volumes is None:
            return
        if not isinstance(volumes, list):
            self.refuse((*path, "volumes"), "must be a list")
            return
        for i, volume in enumerate(volumes):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else None
            if source not in self.log_mounts:
                self.refuse(
                    (*path, "volumes", i),
                    "only the harness's log folders may be mounted "
                    f"({', '.join(sorted(self.log_mounts)) or 'none here'}); runner "
                    "collects its own logs",
                )

    def environment(self, path: KeyPath, env: Any) -> tuple[tuple[str, str], ...]:
        if env is None:
            return ()
        pairs: list[tuple[KeyPath, str, Any]] = []
        if isinstance(env, dict):
            pairs = [((*path, str(k)), str(k), v) for k, v in env.items()]
        elif isinstance(env, list):
            for i, item in enumerate(env):
                if not isinstance(item, str):
                    self.refuse((*path, i), "must be NAME=value")
                    continue
                name, eq, value = item.partition("=")
                pairs.append(((*path, i), name, value if eq else None))
        else:
            self.refuse(path, "must be a mapping or a list of NAME=value")
        out: list[tuple[str, str]] = []
        for where, name, value in pairs:
            if (wrong := bounds.env_name_problem(name)) is not None:
                self.refuse(where, wrong)
                continue
            if value is None:  # passed through from the harness's environment
                if name not in self.variables:
                    self.refuse(where, f"{name} has no value; give it as a suite variable")
                    continue
                value = self.variables[name]
            if isinstance(value, bool):
                value = "true" if value else "false"
            if not isinstance(value, str | int | float):
                self.refuse(where, "must be a string or a number")
                continue
            text = self.expand(where, str(value))
            if text is not None and (wrong := bounds.env_value_problem(text)) is not None:
                self.refuse(where, wrong)
            elif text is not None:
                out.append((name, text))
        return tuple(out)


def reduce_compose(
    text: str,
    file: str,
    variables: Mapping[str, str],
    *,
    log_mounts: frozenset[str] = frozenset(),
) -> tuple[ComposeService | None, list[Problem]]:
    """The one service of a compose file, or the problems that keep it from being one.
    `log_mounts` are the volume sources (as written, e.g. `${T_BENCH_TASK_LOGS_PATH}`)
    that are the harness's own log folders, which runner may leave out."""
    data, lines, problems = load_yaml(text, file)
    if problems:
        return None, problems
    reducer = _Reducer(file, lines, variables, log_mounts)
    if not isinstance(data, dict):
        reducer.refuse((), "a compose file must be a mapping with `services:`")
        return None, reducer.problems
    for key in data:
        if key not in _TOP_KEYS:
            why = (
                "not supported: runner runs the task as one container"
                if key in _COMPOSE_TOP_KEYS
                else "not a key of a compose file"
            )
            reducer.refuse((str(key),), f"{why}; allowed here: {', '.join(sorted(_TOP_KEYS))}")
    services = data.get("services")
    if not isinstance(services, dict) or not services:
        reducer.refuse(("services",), "must name the task's one service")
        return None, reducer.problems
    if len(services) > 1:
        names = ", ".join(str(n) for n in services)
        reducer.refuse(
            ("services", str(list(services)[1])),
            f"only one service is supported, this file has {len(services)} ({names})",
        )
        return None, reducer.problems
    name, svc = next(iter(services.items()))
    service = reducer.service(str(name), svc)
    return (None if reducer.problems else service), reducer.problems


def _is_here(context: str) -> bool:
    """`context` names the compose file's own folder (`.`, `./`), written relative."""
    return context != "" and not context.startswith("/") and posixpath.normpath(context) == "."
