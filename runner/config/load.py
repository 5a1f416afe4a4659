"""A task file from text (pure) or from a path (read as a bounded regular file), validated
into a `TaskFile`; anything wrong ends as one `ConfigError` listing located problems."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from runner import hostfs
from runner.config.messages import validation_problems
from runner.config.schema import BUILTIN_PROVIDERS, LineMap, written
from runner.config.taskfile import TaskFile
from runner.config.text import Path_, describe, dotted, esc, line_for
from runner.config.yaml_lines import (
    LineIndex,
    TaskYamlLoader,
    TreeWalker,
    alias_problems,
    yaml_problem,
)
from runner.errors import ConfigError, Problem
from runner.nesting import TOO_DEEP, node_too_deep


def parse_task_file(text: str, file: str) -> TaskFile:
    """Parse and validate task file text. Pure: raises ConfigError with located problems."""
    at = LineIndex(text)
    try:
        loader = TaskYamlLoader(text)  # checks the characters of the whole text
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc, file, at)]) from None
    try:
        data, node, lines = _load(loader, text, file, at)
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ConfigError(
            [
                Problem(
                    file,
                    at(node.start_mark.index),
                    "(top level)",
                    f"expected a mapping with `version: 1` and `tasks:`, got {describe(data)}",
                )
            ]
        )
    try:
        tf = TaskFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(validation_problems(exc, file, lines)) from None
    except RecursionError:
        raise ConfigError(
            [Problem(file, at(node.start_mark.index), "(top level)", "nested too deeply")]
        ) from None
    _check_models(tf, file, lines)
    tf._lines = LineMap(lines)
    return tf


def _load(
    loader: TaskYamlLoader, text: str, file: str, at: LineIndex
) -> tuple[Any, yaml.Node, dict[Path_, int]]:
    """Compose once, check the tree, construct the data from the same tree."""
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc, file, at)]) from None
    except RecursionError:  # PyYAML's composer recurses once per level
        raise ConfigError(
            [Problem(file, at(loader.get_mark().index), "(syntax)", "YAML nested too deeply")]
        ) from None
    if node is None:
        raise ConfigError(
            [
                Problem(
                    file,
                    1,
                    "(top level)",
                    "the file is empty; expected a mapping with `version: 1` and `tasks:`",
                )
            ]
        )
    walker = TreeWalker(file, at, loader.alias_marks)
    try:
        walker.walk(node, ())
        problems = walker.problems or alias_problems(node, walker, loader.anchor_names)
    except RecursionError:
        raise ConfigError([Problem(file, None, "(syntax)", "YAML nested too deeply")]) from None
    if not problems and (deep := node_too_deep(node)) is not None:
        why = f"YAML {TOO_DEEP}, counting what its aliases repeat where they stand"
        problems = [Problem(file, at(deep.start_mark.index), "(syntax)", why)]
    if problems:
        raise ConfigError(problems)
    try:
        data: Any = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc, file, at, walker.by_index)]) from None
    except (
        RecursionError,
        ValueError,
        TypeError,
        LookupError,
        AttributeError,
        ArithmeticError,
    ) as exc:
        raise ConfigError(
            [
                Problem(
                    file,
                    None,
                    "(syntax)",
                    f"cannot read a value: {esc(str(exc)) or 'unknown error'}",
                )
            ]
        ) from None
    return data, node, walker.lines


def _check_models(tf: TaskFile, file: str, lines: dict[Path_, int]) -> None:
    if tf.codex_config:  # its providers are read (and models checked) by `resolve`
        return
    known = set(BUILTIN_PROVIDERS) | set(tf.providers)
    problems: list[Problem] = []
    candidates: list[tuple[Path_, str]] = [(("defaults", "model"), tf.defaults.model)]
    candidates += [
        (("tasks", i, "model"), t.model) for i, t in enumerate(tf.tasks) if written(t, "model")
    ]
    for path, model in candidates:
        provider = model.split("/", 1)[0]
        if provider not in known:
            problems.append(
                Problem(
                    file, line_for(path, lines), dotted(path), unknown_provider(provider, known)
                )
            )
    if problems:
        raise ConfigError(problems)


def unknown_provider(name: str, known: set[str]) -> str:
    return (
        f"unknown provider {name!r}; allowed: {', '.join(sorted(known))} "
        f"(add it under `providers:`)"
    )


MAX_TASK_FILE_BYTES = 4 * 1024 * 1024


def _read_regular(path: Path, limit: int) -> bytes:
    """At most `limit` bytes of a regular file: a FIFO, a device (/dev/zero) or a
    directory is refused before anything is read, so nothing blocks or fills memory."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
            raise OSError(
                errno.EINVAL,
                f"Is {kind}"
                if kind == "a directory"
                else "not a regular file (a FIFO, device or socket)",
            )
        return hostfs.read_bytes(fd, limit)
    finally:
        os.close(fd)


def load_task_file(path: Path) -> TaskFile:
    file = str(path)
    try:
        raw = _read_regular(path, MAX_TASK_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            [Problem(file, None, "(file)", f"cannot read: {exc.strerror or exc}")]
        ) from None
    if len(raw) > MAX_TASK_FILE_BYTES:
        raise ConfigError(
            [Problem(file, None, "(file)", f"file is larger than {MAX_TASK_FILE_BYTES} bytes")]
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [Problem(file, None, "(file)", f"not UTF-8 text (byte {exc.start})")]
        ) from None
    tf = parse_task_file(text, file)
    tf._lines = LineMap(tf._lines.lines, hashlib.sha256(raw).hexdigest())
    return tf
