"""SWE-bench instances (a JSONL file, one instance a line, or a JSON list) as `SuiteTask`s.

The official fields are read as the dataset writes them; FAIL_TO_PASS and PASS_TO_PASS may
be JSON-encoded lists (as on the dataset hub) or real lists. Since swebench 5 the harness no
longer derives how to run an instance's tests from its repo and version: the 5.x datasets
carry `eval_script`, `log_parser`, `eval_type` and `image` per instance, and so this reader
takes them from there. An instance built locally (a tiny repository, a private fork) may say
`test_cmd` instead of `eval_script`: the shell command that runs its tests in `/testbed`,
around which runner writes an eval script of the official shape (test files reset to
`base_commit`, `test_patch` applied, the output between the harness's markers, the test
command's exit status recorded after them). An instance may name its `log_parser` (a name
of swebench's `PARSER_REGISTRY`); one that does not (the classic datasets) gets the parser
the swebench package maps its `repo` to, since the parser is what grading reads the log
with. The test command is not defaulted that way: the 5.x package no longer holds one per
repo and version.

Columns runner does not read are accepted, and kept in the report as the task's metadata
when they are text or numbers: the public datasets add columns (SWE-bench Verified's
`difficulty`, the newer datasets' own), and a user must be able to run a newer dataset as it
is. What is refused is a name a letter or two from one runner reads (a misspelt `test_cmd`
would otherwise drop a setting silently), a column runner knows it cannot honour
(`image_assets`), and a key written twice in one object (JSON readers keep the last).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from string import Formatter
from typing import Any

from runner.errors import ConfigError, Problem, UnsafeFileError
from runner.hostfs import read_regular
from runner.suites.bounds import image_problem
from runner.suites.model import (
    Listed,
    Solution,
    SuiteEnvironment,
    SuiteListing,
    SuiteTask,
    Verifier,
)
from runner.suites.swe_eval import DIFF_HEADER, END_TEST_OUTPUT, WORKDIR, eval_script
from runner.suites.swe_grading import default_log_parser

MAX_INSTANCES_FILE_BYTES = 512 << 20
"""The full SWE-bench test split is about 100 MB as JSONL; five times that is a mistake."""
MAX_SCRIPT_BYTES = 120_000
"""The eval script reaches the environment as one `bash -c` argument, and Linux refuses an
argument over 128 KiB (MAX_ARG_STRLEN)."""
VERIFY_TIMEOUT_S = 1800.0
"""The official harness's per-instance timeout."""

DEFAULT_PROMPT_TEMPLATE = """\
The repository {repo} is checked out in /testbed. A user reported the problem below.

Change the code in /testbed so that the problem is fixed. Keep the change as small as \
the fix needs. The maintainers will check your work with tests of their own: you may \
write or run tests, but your changes to existing tests are not kept.

<problem>
{problem_statement}
</problem>
"""
PROMPT_FIELDS = frozenset(
    {
        "problem_statement",
        "repo",
        "instance_id",
        "hints_text",
        "base_commit",
        "version",
        "created_at",
        "workdir",
    }
)
DEFAULT_IMAGE_TEMPLATE = "swebench/sweb.eval.x86_64.{image_id}:latest"
IMAGE_FIELDS = frozenset({"image_id", "instance_id", "repo", "version"})
"""`image_id` is the official image key: the instance id lowercased, "__" → "_1776_"
(Docker Hub refuses a double underscore)."""

REQUIRED = (
    "repo",
    "instance_id",
    "base_commit",
    "patch",
    "test_patch",
    "problem_statement",
    "FAIL_TO_PASS",
    "PASS_TO_PASS",
)
OPTIONAL_TEXT = (
    "hints_text",
    "created_at",
    "version",
    "environment_setup_commit",
    "image",
    "eval_script",
    "test_cmd",
    "eval_type",
    "log_parser",
)
ALLOWED = frozenset({*REQUIRED, *OPTIONAL_TEXT, "image_assets"})
EVAL_TYPES = ("pass_and_fail", "fail_only")

_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9._-]+")
_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_COMMIT = re.compile(r"[0-9a-f]{7,40}")
_PARSER = re.compile(r"parse_log_[a-z0-9_]+")


def read_swe_bench(
    path: Path,
    *,
    prompt_template: str | None = None,
    image_template: str | None = None,
    build_dir: Path | None = None,
) -> list[SuiteTask]:
    """The instances of `path`, every problem of every instance reported at once.

    `image_template` overrides the instances' own `image`; `build_dir` (a folder with a
    Dockerfile, relative to the instances file) is built instead of any image."""
    return list_swe_bench(
        path, prompt_template=prompt_template, image_template=image_template, build_dir=build_dir
    ).read_all()


_Record = tuple[str, int | None, object]


def list_swe_bench(
    path: Path,
    *,
    prompt_template: str | None = None,
    image_template: str | None = None,
    build_dir: Path | None = None,
) -> SuiteListing:
    """The instances of `path` by `instance_id`, each made a task only when asked. The
    file is read and parsed whole (one JSON text); an instance is checked only when
    selected. One without a usable id is `unlisted`; an id written twice is a problem of
    that id."""
    problems = template_problems(prompt_template, PROMPT_FIELDS, "prompt_template")
    problems += template_problems(image_template, IMAGE_FIELDS, "image_template")
    build = _build_dir(path, build_dir, problems)
    if problems:
        raise ConfigError(problems)
    records: dict[str, list[_Record]] = {}
    unlisted: list[Problem] = []
    for where, line, raw in _records(path, _read(path)):
        iid = raw.get("instance_id") if isinstance(raw, dict) else None
        if isinstance(iid, str) and _INSTANCE_ID.fullmatch(iid):
            records.setdefault(iid, []).append((where, line, raw))
        else:  # its own problems name what is wrong with it, the id among them
            _task(raw, path, where, line, unlisted, prompt_template, image_template, build)
    if not records and not unlisted:
        raise ConfigError([Problem(str(path), None, "(instances)", "holds no instance")])

    def read(iid: str) -> tuple[SuiteTask | None, list[Problem]]:
        (where, line, raw), *again = records[iid]
        found: list[Problem] = []
        task = _task(raw, path, where, line, found, prompt_template, image_template, build)
        first = f"line {line}" if line else where.rstrip(".")
        for w, n, _ in again:
            found.append(
                Problem(str(path), n, f"{w}instance_id", f"{iid!r} is already the id of {first}")
            )
        return (None if found else task), found

    def tags(iid: str) -> tuple[tuple[str, ...], list[Problem]]:
        raw = records[iid][0][2]
        repo = raw.get("repo") if isinstance(raw, dict) else None
        return ((repo,) if isinstance(repo, str) else ()), []

    return SuiteListing(
        tuple(Listed(iid, partial(tags, iid), partial(read, iid)) for iid in records),
        tuple(unlisted),
    )


def template_problems(template: str | None, fields: frozenset[str], name: str) -> list[Problem]:
    """A template may use only bare `{field}`s from `fields` (no `.attr`, `[i]`, `!r` or
    `:spec`: a template is text, not a way to reach into runner's objects)."""
    if template is None:
        return []
    allowed = ", ".join(f"{{{f}}}" for f in sorted(fields))
    try:
        pieces = list(Formatter().parse(template))
    except ValueError as exc:
        return [
            Problem(
                name,
                None,
                name,
                f"not a valid template ({exc}); use {{{{ and }}}} for literal braces",
            )
        ]
    for _, field, spec, conversion in pieces:
        if field is None:
            continue
        if field not in fields or spec or conversion:
            shown = (
                "{"
                + field
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            return [
                Problem(name, None, name, f"{shown} is not a placeholder here; allowed: {allowed}")
            ]
    return []


def render(template: str, values: Mapping[str, str]) -> str:
    """`template` with its placeholders filled; checked by `template_problems` first."""
    out: list[str] = []
    for literal, field, _, _ in Formatter().parse(template):
        out.append(literal)
        if field is not None:
            out.append(values[field])
    return "".join(out)


def image_id(instance_id: str) -> str:
    return instance_id.lower().replace("__", "_1776_")


def _build_dir(path: Path, build_dir: Path | None, problems: list[Problem]) -> Path | None:
    if build_dir is None:
        return None
    folder = build_dir if build_dir.is_absolute() else path.parent / build_dir
    if not (folder / "Dockerfile").is_file():
        problems.append(
            Problem(str(path), None, "build_dir", f"{build_dir} is not a folder with a Dockerfile")
        )
    return folder


def _read(path: Path) -> str:
    try:
        data = read_regular(path, MAX_INSTANCES_FILE_BYTES + 1)
    except (OSError, UnsafeFileError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([Problem(str(path), None, "(file)", f"cannot read: {reason}")]) from None
    if len(data) > MAX_INSTANCES_FILE_BYTES:
        raise ConfigError(
            [
                Problem(
                    str(path), None, "(file)", f"larger than {MAX_INSTANCES_FILE_BYTES >> 20} MiB"
                )
            ]
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError([Problem(str(path), line, "(file)", "not UTF-8 text")]) from None


class _Twice(ValueError):
    """A key written twice in one JSON object."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Twice(key)
        out[key] = value
    return out


def _twice(path: Path, line: int | None, exc: _Twice) -> ConfigError:
    key = str(exc.args[0])
    shown = repr(key if len(key) <= 60 else key[:60] + "...")
    return ConfigError(
        [
            Problem(
                str(path),
                line,
                "(file)" if line is None else "(line)",
                f"the key {shown} is written twice in one object; a JSON reader silently "
                "keeps only the last: keep one",
            )
        ]
    )


def _records(path: Path, text: str) -> Iterator[tuple[str, int | None, object]]:
    """(field prefix, JSONL line, instance) for each instance: a JSON list is told from
    JSONL by its first character."""
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text, object_pairs_hook=_once)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                [Problem(str(path), exc.lineno, "(file)", f"not valid JSON: {exc.msg}")]
            ) from None
        except _Twice as exc:
            raise _twice(path, None, exc) from None
        except RecursionError:
            raise ConfigError([Problem(str(path), None, "(file)", "nested too deeply")]) from None
        for i, item in enumerate(items):
            yield f"[{i}].", None, item
        return
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line, object_pairs_hook=_once)
        except _Twice as exc:
            raise _twice(path, number, exc) from None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                [
                    Problem(
                        str(path),
                        number,
                        "(line)",
                        f"not a JSON object ({exc.msg} at column {exc.colno}); "
                        "JSONL holds one instance a line",
                    )
                ]
            ) from None
        except RecursionError:
            raise ConfigError([Problem(str(path), number, "(line)", "nested too deeply")]) from None
        yield "", number, item


def _other_columns(
    raw: dict[object, object], bad: Callable[[str, str], None]
) -> tuple[tuple[str, str], ...]:
    """Datasets carry columns runner has no use for (SWE-bench Verified's `difficulty`):
    those are kept as metadata. A name a letter or two from one runner reads is a
    misspelling that would silently drop a setting, so it is refused."""
    extra: list[tuple[str, str]] = []
    for key in sorted(set(raw) - ALLOWED, key=str):
        near = difflib.get_close_matches(str(key), sorted(ALLOWED), n=1, cutoff=0.8)
        if near:
            bad(str(key), f"not a SWE-bench field runner reads; did you mean {near[0]}?")
        elif isinstance(raw[key], str | int | float | bool):
            extra.append((str(key)[:64], str(raw[key])[:200]))
    return tuple(extra)


def _task(
    raw: object,
    path: Path,
    where: str,
    line: int | None,
    problems: list[Problem],
    prompt_template: str | None,
    image_template: str | None,
    build: Path | None,
) -> SuiteTask | None:
    file = str(path)
    found: list[Problem] = []

    def bad(field: str, message: str) -> None:
        found.append(Problem(file, line, f"{where}{field}", message))

    if not isinstance(raw, dict):
        bad("(instance)", f"expected an object with the SWE-bench fields, got {_kind(raw)}")
        problems.extend(found)
        return None
    extra = _other_columns(raw, bad)
    text: dict[str, str] = {}
    for key in (*REQUIRED, *OPTIONAL_TEXT):
        if key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            continue
        value = raw.get(key)
        if value is None:
            if key in REQUIRED:
                bad(key, "missing")
            continue
        if not isinstance(value, str):
            bad(key, f"expected a string, got {_kind(value)}")
            continue
        text[key] = value
    f2p = _test_ids(raw, "FAIL_TO_PASS", bad)
    p2p = _test_ids(raw, "PASS_TO_PASS", bad)
    _check_shapes(raw, text, bad)
    if not found and "log_parser" not in text:
        _default_parser(text, bad)
    if found:
        problems.extend(found)
        return None
    script = eval_script(text)
    if len(script.encode()) > MAX_SCRIPT_BYTES:
        field = "eval_script" if "eval_script" in text else "test_patch"
        bad(
            field,
            f"the eval script would be {len(script.encode())} bytes; runner passes it "
            f"as one argument, of at most {MAX_SCRIPT_BYTES}",
        )
        problems.extend(found)
        return None
    values = {
        "problem_statement": text["problem_statement"],
        "repo": text["repo"],
        "instance_id": text["instance_id"],
        "hints_text": text.get("hints_text", ""),
        "base_commit": text["base_commit"],
        "version": text.get("version", ""),
        "created_at": text.get("created_at", ""),
        "workdir": WORKDIR,
        "image_id": image_id(text["instance_id"]),
    }
    if build is not None:
        image = None
    elif image_template is not None:
        image = render(image_template, values)
    else:
        image = text.get("image") or render(DEFAULT_IMAGE_TEMPLATE, values)
    if image is not None and (wrong := image_problem(image)) is not None:
        field = "image" if image_template is None and "image" in text else "image_template"
        bad(field, wrong if field == "image" else f"gives a name that is refused: {wrong}")
        problems.extend(found)
        return None
    metadata = (
        tuple(
            (key, text[key])
            for key in ("repo", "version", "base_commit", "environment_setup_commit", "created_at")
            if text.get(key)
        )
        + extra
    )
    return SuiteTask(
        id=text["instance_id"],
        format="swe-bench",
        source=path,
        instruction=render(prompt_template or DEFAULT_PROMPT_TEMPLATE, values),
        environment=SuiteEnvironment(image=image, build_dir=build, workdir=WORKDIR),
        verifier=Verifier(
            grading="swe-bench",
            tests_dir=None,
            command=("bash", "-c", script),
            timeout_s=VERIFY_TIMEOUT_S,
            fail_to_pass=f2p,
            pass_to_pass=p2p,
            test_patch=text["test_patch"],
            repo=text["repo"],
            log_parser=text["log_parser"],
            eval_type=text.get("eval_type"),
        ),
        solution=Solution(patch=text["patch"]),
        tags=(text["repo"],),
        metadata=metadata,
    )


def _test_ids(raw: dict[str, Any], key: str, bad: Any) -> tuple[str, ...]:
    value = raw.get(key)
    if value is None:
        bad(key, "missing")
        return ()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            bad(
                key,
                "a string that is not a JSON list; expected a list of test ids, or its JSON text",
            )
            return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        bad(key, f"expected a list of test ids (strings), got {_kind(value)}")
        return ()
    return tuple(value)


def _check_shapes(raw: dict[str, Any], text: dict[str, str], bad: Any) -> None:
    checks = (
        ("repo", _REPO, "owner/name"),
        ("instance_id", _INSTANCE_ID, "letters, digits, `.`, `_` and `-`, at most 200"),
        ("base_commit", _COMMIT, "a commit id (7 to 40 lowercase hex digits)"),
        ("environment_setup_commit", _COMMIT, "a commit id (7 to 40 lowercase hex digits)"),
        ("log_parser", _PARSER, "a name of swebench's PARSER_REGISTRY, e.g. parse_log_pytest"),
    )
    for key, pattern, allowed in checks:
        if key in text and not pattern.fullmatch(text[key]):
            bad(key, f"{text[key][:80]!r} is not {allowed}")
    if "eval_type" in text and text["eval_type"] not in EVAL_TYPES:
        bad("eval_type", f"{text['eval_type'][:80]!r} is not one of {', '.join(EVAL_TYPES)}")
    if "eval_script" in text and "test_cmd" in text:
        bad("test_cmd", "give `eval_script` (the official harness's) or `test_cmd`, not both")
    elif "eval_script" not in text and "test_cmd" not in text:
        bad(
            "eval_script",
            "missing, and so is `test_cmd`: runner cannot know how to run this "
            "instance's tests. The swebench 5.x package no longer derives the test command "
            "from the repo and version, so the instance must carry its `eval_script`, as "
            "the 5.x datasets do (an instance built locally may say `test_cmd` instead)",
        )
    if "eval_script" in text and END_TEST_OUTPUT not in text["eval_script"]:
        bad("eval_script", f"does not print {END_TEST_OUTPUT!r}, so no grading can read it")
    if raw.get("image_assets"):
        bad("image_assets", "binary test assets (SWE-bench Multimodal) are not supported")
    if "test_patch" in text and not DIFF_HEADER.search(text["test_patch"]):
        bad("test_patch", "not a git diff (no `diff --git a/... b/...` line)")


def _default_parser(text: dict[str, str], bad: Any) -> None:
    """`log_parser` from the swebench package's repo → parser maps, into `text`."""
    try:
        name = default_log_parser(text["repo"])
    except ConfigError as exc:
        bad(
            "log_parser",
            "missing, and runner takes the default from the swebench package's repo map: "
            + exc.problems[0].message,
        )
        return
    if name is None:
        bad(
            "log_parser",
            f"missing, and the swebench package maps no parser to {text['repo']!r}; name one "
            "of its PARSER_REGISTRY, e.g. parse_log_pytest",
        )
        return
    text["log_parser"] = name


def _kind(value: object) -> str:
    if value is None:
        return "null"
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), type(value).__name__)
