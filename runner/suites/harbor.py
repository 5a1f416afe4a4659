"""Harbor task folders (task schema 1.x) read as `SuiteTask`s.

A task is `instruction.md` (the prompt), `task.toml` (timeouts, resources, network,
users, variables), `environment/Dockerfile` or `[environment].docker_image`, `tests/`
with `tests/test.sh` (copied to `/tests` after the agent's phase, graded by the reward
file it leaves) and `solution/solve.sh` for the oracle.

Every field runner cannot honour is refused, named and located (file, line, field, what
is allowed): multi-step tasks, compose environments, GPUs, allow-listed networks, a
separate verifier environment, MCP servers, skills, healthchecks, artifacts, unknown
keys. Running a task without them would grade a different task than Harbor does."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.errors import Problem
from runner.nesting import toml_loads
from runner.suites import bounds
from runner.suites.folder import TaskFolder, apart, dockerfile_workdir, expand, list_tasks
from runner.suites.model import Solution, SuiteEnvironment, SuiteListing, SuiteTask, Verifier

VERIFIER_TIMEOUT_S = 600.0
BUILD_TIMEOUT_S = 600.0
TESTS_AT = "/tests"
DEFAULT_WORKDIR = "/app"
_NETWORKS = {"public": "bridge", "no-network": "none"}

_TOP = {"version", "schema_version", "metadata", "task", "source", "agent", "verifier",
        "environment", "solution"}  # fmt: skip
_REFUSED_TOP = {
    "steps": "multi-step tasks are not supported: runner gives one instruction per run",
    "artifacts": "artifact collection is not supported: runner keeps the run's own outputs",
}
_AGENT = {"timeout_sec", "user", "network_mode", "allowed_hosts"}
_VERIFIER = {"timeout_sec", "env", "user", "environment_mode", "network_mode", "allowed_hosts"}
_ENVIRONMENT = {"build_timeout_sec", "docker_image", "os", "cpus", "memory_mb", "memory",
                "storage_mb", "storage", "gpus", "gpu_types", "env", "workdir", "network_mode",
                "allow_internet", "allowed_hosts"}  # fmt: skip
_REFUSED_ENVIRONMENT = {
    "mcp_servers": "MCP servers in the task's environment are not supported",
    "skills_dir": "a task's skills folder is not supported",
    "healthcheck": "healthchecks are not supported: runner starts one plain container",
}
_SOLUTION = {"env"}
_TASK = {"name", "description", "authors", "keywords"}


def read_harbor(path: Path, variables: Mapping[str, str] | None = None) -> list[SuiteTask]:
    """Every task under `path` (a task folder, or a folder of them), or one ConfigError
    listing every problem of every task. `variables` fill `${VAR}` and `${VAR:-default}`
    in the `env` tables: what the user gave, never the whole host environment."""
    return list_harbor(path, variables).read_all()


def list_harbor(path: Path, variables: Mapping[str, str] | None = None) -> SuiteListing:
    """The tasks under `path` by folder name, each read only when asked (`read_harbor`)."""
    given = dict(variables or {})
    return list_tasks(path, "task.toml", "Harbor", lambda folder: _read_task(folder, given), _tags)


def _tags(root: Path) -> tuple[tuple[str, ...], list[Problem]]:
    """The task's tags from its task.toml alone (`[metadata].tags`, `[task].keywords`):
    what a `select: {tags: ...}` needs, without the rest of the folder."""
    folder = TaskFolder(root)
    doc = _parsed(folder)
    if doc is None:
        return (), folder.problems
    tags, _ = _metadata(doc)
    return tags, folder.problems


def _parsed(folder: TaskFolder, variables: Mapping[str, str] | None = None) -> _Toml | None:
    """task.toml read and parsed; None (its problem kept) when it cannot be."""
    text = folder.text("task.toml")
    if text is None:
        if not folder.problems:
            folder.refuse("task.toml", None, "(file)", "missing")
        return None
    try:
        data = toml_loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        folder.refuse(
            "task.toml",
            int(match.group(1)) if match else None,
            "(syntax)",
            f"not valid TOML: {exc}",
        )
        return None
    except ValueError as exc:  # too deep, or an integer of more digits than Python converts
        folder.refuse("task.toml", None, "(syntax)", f"not valid TOML: {exc}")
        return None
    written: dict[Key, str] = {}
    return _Toml(folder, data, toml_lines(text, written), variables or {}, written)


# -- task.toml: lines of keys ---------------------------------------------------------------

Key = tuple[str, ...]
_HEADER = re.compile(r"^\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(
    r"""^((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)  # noqa: E501


def _split_key(text: str) -> Key:
    parts = re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


_NUMBER = re.compile(r"([-+]?[0-9a-z_.+-]+)\s*(#.*)?", re.IGNORECASE)


def toml_lines(text: str, written: dict[Key, str] | None = None) -> dict[Key, int]:
    """The line each table and key of a TOML text is written on, by a small scan (tomllib
    keeps no positions). Lines inside multi-line strings are skipped; an inline table's
    keys share its line. `written` gains each number's text as written (`1e12`), for
    messages to quote the file rather than Python's float."""
    lines: dict[Key, int] = {}
    table: Key = ()
    quote: str | None = None
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if quote is not None:
            if line.count(quote) % 2 == 1:
                quote = None
            continue
        header = _HEADER.match(line)
        if header:
            table = _split_key(header.group(1))
            lines.setdefault(table, number)
            continue
        assign = _ASSIGN.match(line)
        if assign:
            key = table + _split_key(assign.group(1))
            lines.setdefault(key, number)
            rest = line[assign.end() :]
            bare = _NUMBER.fullmatch(rest.strip())
            if written is not None and bare:
                written.setdefault(key, bare.group(1))
            for q in ('"""', "'''"):
                if rest.count(q) % 2 == 1:
                    quote = q
                    break
    return lines


# -- task.toml: fields -----------------------------------------------------------------------


@dataclass
class _Toml:
    folder: TaskFolder
    data: dict[str, Any]
    lines: dict[Key, int]
    variables: Mapping[str, str]
    written: dict[Key, str] = field(default_factory=dict)

    def line(self, key: Key) -> int | None:
        for n in range(len(key), 0, -1):
            if key[:n] in self.lines:
                return self.lines[key[:n]]
        return None

    def refuse(self, key: Key, message: str) -> None:
        self.folder.refuse("task.toml", self.line(key), _dotted(key), message)

    def table(self, name: str, allowed: set[str], refused: Mapping[str, str]) -> dict[str, Any]:
        value = self.data.get(name, {})
        if not isinstance(value, dict):
            self.refuse((name,), "must be a table")
            return {}
        for key, item in value.items():
            if key in refused:
                if item not in (None, [], {}, ""):
                    self.refuse((name, key), refused[key])
            elif key not in allowed:
                self.refuse(
                    (name, key), "unknown field; allowed here: " + ", ".join(sorted(allowed))
                )
        return value

    def seconds(
        self, table: dict[str, Any], key: Key, default: float | None, most: float
    ) -> float | None:
        value = table.get(key[-1])
        if value is None:
            return default
        wrong = bounds.seconds_problem(value, most, self.written.get(key))
        if wrong is not None:
            self.refuse(key, wrong)
            return default
        return float(value)

    def user(self, table: dict[str, Any], key: Key) -> str | None:
        value = table.get(key[-1])
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
            self.refuse(key, "must be a user name or a uid")
            return None
        wrong = bounds.user_problem(str(value))
        if wrong is not None:
            self.refuse(key, wrong)
            return None
        return str(value)

    def env(self, table: dict[str, Any], key: Key) -> tuple[tuple[str, str], ...]:
        value = table.get(key[-1], {})
        if not isinstance(value, dict):
            self.refuse(key, 'must be a table of NAME = "value"')
            return ()
        out = []
        for name, text in value.items():
            wrong = bounds.env_name_problem(name)
            if wrong is None and not isinstance(text, str):
                wrong = f"must be a string, got {bounds.shown(text)}"
            if wrong is not None:
                self.refuse((*key, name), wrong)
                continue
            try:
                expanded = expand(text, self.variables)
            except KeyError as exc:
                self.refuse(
                    (*key, name),
                    f"${{{exc.args[0]}}} is not set and has no default (write "
                    f"${{{exc.args[0]}:-default}}, or give it as a suite variable)",
                )
                continue
            wrong = bounds.env_value_problem(expanded)
            if wrong is not None:
                self.refuse((*key, name), wrong)
                continue
            out.append((name, expanded))
        return tuple(out)

    def network(self, table: dict[str, Any], key: Key) -> str | None:
        """runner's network for Harbor's `network_mode`, or None when not written."""
        hosts_key = (*key[:-1], "allowed_hosts")
        if table.get("allowed_hosts"):
            self.refuse(hosts_key, "network allow-lists are not supported")
        value = table.get(key[-1])
        if value is None:
            return None
        if value == "allowlist":
            self.refuse(key, "`allowlist` is not supported; allowed: public, no-network")
            return None
        if value not in _NETWORKS:
            self.refuse(key, "must be one of: public, no-network")
            return None
        return _NETWORKS[value]


def _dotted(key: Key) -> str:
    """A key as TOML writes it: `environment.env."A B"`."""
    return ".".join(p if re.fullmatch(r"[A-Za-z0-9_-]+", p) else _quoted(p) for p in key)


def _quoted(part: str) -> str:
    return '"' + part.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'


def _read_task(root: Path, variables: Mapping[str, str]) -> tuple[SuiteTask | None, list[Problem]]:
    folder = TaskFolder(root)
    doc = _parsed(folder, variables)
    instruction = folder.text("instruction.md")
    if doc is None:
        return None, folder.problems
    data = doc.data
    if instruction is None and not folder.lexists("instruction.md"):
        folder.refuse("instruction.md", None, "(file)", "missing: it is the task's instruction")
    elif instruction is not None and not instruction.strip():
        folder.refuse("instruction.md", None, "(file)", "empty: it is the task's instruction")
    for key in data:
        if key in _REFUSED_TOP:
            doc.refuse((key,), _REFUSED_TOP[key])
        elif key not in _TOP:
            doc.refuse((key,), "unknown field; allowed: " + ", ".join(sorted(_TOP)))
    agent = doc.table("agent", _AGENT, {})
    verifier_t = doc.table("verifier", _VERIFIER, {})
    environment_t = doc.table("environment", _ENVIRONMENT, _REFUSED_ENVIRONMENT)
    doc.table("task", _TASK, {})
    tags, metadata = _metadata(doc)
    environment = _environment(doc, environment_t, agent)
    verifier = _verifier(doc, verifier_t)
    solution, solution_problems = apart(
        folder, lambda: _solution(doc, doc.table("solution", _SOLUTION, {}))
    )
    agent_s = doc.seconds(agent, ("agent", "timeout_sec"), None, bounds.MAX_AGENT_S)
    build_s = doc.seconds(
        environment_t, ("environment", "build_timeout_sec"), BUILD_TIMEOUT_S, bounds.MAX_BUILD_S
    )
    if folder.problems or environment is None or verifier is None or instruction is None:
        return None, folder.problems
    return (
        SuiteTask(
            id=root.name,
            format="harbor",
            source=root,
            instruction=instruction,
            environment=environment,
            verifier=verifier,
            solution=None if solution_problems else solution,
            agent_timeout_s=agent_s,
            build_timeout_s=build_s,
            tags=tags,
            metadata=metadata,
            solution_problems=solution_problems,
        ),
        [],
    )


def _metadata(doc: _Toml) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Harbor's free `[metadata]` table (and the package's name and keywords), kept for
    the report: tags become the run's tags, scalars are kept as text."""
    meta = doc.data.get("metadata", {})
    if not isinstance(meta, dict):
        doc.refuse(("metadata",), "must be a table")
        meta = {}
    task = doc.data.get("task", {})
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        doc.refuse(("metadata", "tags"), "must be a list of strings")
        tags = []
    keywords = task.get("keywords", []) if isinstance(task, dict) else []
    tags = [*tags, *(k for k in keywords if isinstance(k, str) and k not in tags)]
    pairs = [
        (key, str(value).lower() if isinstance(value, bool) else str(value))
        for key, value in meta.items()
        if key != "tags" and isinstance(value, str | int | float | bool)
    ]
    if isinstance(task, dict) and isinstance(task.get("name"), str):
        pairs.append(("package", task["name"]))
    if isinstance(doc.data.get("source"), str):
        pairs.append(("source", doc.data["source"]))
    return tuple(tags), tuple(pairs)


def _environment(
    doc: _Toml, env_t: dict[str, Any], agent: dict[str, Any]
) -> SuiteEnvironment | None:
    folder = doc.folder
    if env_t.get("os") not in (None, "linux"):
        doc.refuse(("environment", "os"), "only `linux` is supported")
    gpus = env_t.get("gpus", 0)
    if gpus != 0:
        doc.refuse(("environment", "gpus"), "GPUs are not supported; allowed: 0")
    if env_t.get("gpu_types"):
        doc.refuse(("environment", "gpu_types"), "GPUs are not supported")
    cpus = env_t.get("cpus")
    wrong = None if cpus is None else bounds.cpus_problem(cpus, doc.written.get(_CPUS))
    if wrong is not None:
        doc.refuse(_CPUS, wrong)
        cpus = None
    cpus_f = float(cpus) if cpus is not None else None
    memory_mb = _megabytes(doc, env_t, "memory_mb", "memory", bounded=True)
    _megabytes(doc, env_t, "storage_mb", "storage", bounded=False)  # no cap runner can set
    workdir = _text(doc, env_t, "workdir", bounds.workdir_problem, "an absolute path")
    network = _agent_network(doc, env_t, agent)
    env = doc.env(env_t, ("environment", "env"))
    user = doc.user(agent, ("agent", "user"))
    if folder.lexists("environment/docker-compose.yaml") or folder.lexists(
        "environment/docker-compose.yml"
    ):
        folder.refuse(
            "environment/docker-compose.yaml",
            None,
            "(file)",
            "compose environments (more services, mounts, ports) are not supported; give "
            "environment/Dockerfile or [environment].docker_image",
        )
        return None
    if "docker_image" in env_t:
        image = _text(doc, env_t, "docker_image", bounds.image_problem, "an image name")
        if image is None:
            return None
        return SuiteEnvironment(
            image=image, workdir=workdir or DEFAULT_WORKDIR, cpus=cpus_f, memory_mb=memory_mb,
            network=network, env=env, user=user,
        )  # fmt: skip
    dockerfile = folder.text("environment/Dockerfile")
    if dockerfile is None:
        if not folder.problems:
            folder.refuse(
                "environment/Dockerfile",
                None,
                "(file)",
                "missing, and task.toml names no [environment].docker_image",
            )
        return None
    build_dir = folder.folder("environment")
    if build_dir is None:
        return None
    return SuiteEnvironment(
        build_dir=build_dir, workdir=workdir or dockerfile_workdir(dockerfile) or DEFAULT_WORKDIR,
        cpus=cpus_f, memory_mb=memory_mb, network=network, env=env, user=user,
    )  # fmt: skip


_CPUS = ("environment", "cpus")
_MOST_MB = 1 << 62
"""Any size past this is over every limit; no need to carry its digits."""


def _text(
    doc: _Toml, env_t: dict[str, Any], key: str, check: Callable[[str], str | None], kind: str
) -> str | None:
    """`[environment].key` when it is text `check` finds nothing wrong with; else None,
    refused at its line (or not written)."""
    value = env_t.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        doc.refuse(("environment", key), f"must be {kind}, got {bounds.shown(value)}")
        return None
    if (wrong := check(value)) is not None:
        doc.refuse(("environment", key), wrong)
        return None
    return value


def _megabytes(
    doc: _Toml, table: dict[str, Any], key: str, old: str, *, bounded: bool
) -> int | None:
    """`key` (whole MB), or the older `old = "2G"` Harbor still reads. Each one written is
    checked on its own (against runner's memory bounds when `bounded`), so an absurd one
    is named even beside a sound one; two sound ones that disagree are refused, since
    which of them Harbor honours is not for runner to guess. None when neither is written
    or one is refused."""
    sizes: dict[str, int] = {}
    refused = False
    for name, size in ((key, _whole_mb(doc, table, key)), (old, _size_mb(doc, table, old, key))):
        if size is None:
            refused = refused or table.get(name) is not None
            continue
        said = doc.written.get(("environment", name)) or bounds.shown(table.get(name))
        if bounded and (wrong := bounds.memory_problem(size, said)) is not None:
            doc.refuse(("environment", name), wrong)
            refused = True
            continue
        sizes[name] = size
    if len(sizes) == 2 and sizes[key] != sizes[old]:
        doc.refuse(
            ("environment", old),
            f"says {sizes[old]} MB and {key} says {sizes[key]} MB: keep one of them",
        )
        return None
    return None if refused or not sizes else next(iter(sizes.values()))


def _whole_mb(doc: _Toml, table: dict[str, Any], key: str) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        said = doc.written.get(("environment", key)) or bounds.shown(value)
        doc.refuse(("environment", key), f"must be a whole number of MB above 0, got {said}")
        return None
    return min(value, _MOST_MB)


def _size_mb(doc: _Toml, table: dict[str, Any], old: str, key: str) -> int | None:
    text = table.get(old)
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])\s*", str(text), re.IGNORECASE)
    if not match or not isinstance(text, str):
        doc.refuse(
            ("environment", old),
            f'must be a size such as "2G", "512M" (or write {key}), got {bounds.shown(text)}',
        )
        return None
    scale = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}[match.group(2).upper()]
    megabytes = float(match.group(1)) * scale  # inf for digits past a float's range
    return int(megabytes) if megabytes < _MOST_MB else _MOST_MB


def _agent_network(doc: _Toml, env_t: dict[str, Any], agent: dict[str, Any]) -> Any:
    """The agent phase's network: `[agent].network_mode`, else the environment's, else
    `allow_internet = true` written out; unwritten, none (runner's default, not Harbor's)."""
    agent_net = doc.network(agent, ("agent", "network_mode"))
    env_net = doc.network(env_t, ("environment", "network_mode"))
    allow = env_t.get("allow_internet")
    if allow is not None and not isinstance(allow, bool):
        doc.refuse(("environment", "allow_internet"), "must be true or false")
        allow = None
    return agent_net or env_net or ("bridge" if allow else "none")


def _verifier(doc: _Toml, table: dict[str, Any]) -> Verifier | None:
    mode = table.get("environment_mode")
    if mode not in (None, "shared"):
        doc.refuse(
            ("verifier", "environment_mode"),
            "only `shared` is supported: the tests run in the agent's container",
        )
    if table.get("network_mode") is not None or table.get("allowed_hosts"):
        key = "network_mode" if table.get("network_mode") is not None else "allowed_hosts"
        doc.refuse(
            ("verifier", key),
            "a network of the verifier's own is not supported: it runs in the agent's container",
        )
    timeout_s = doc.seconds(
        table, ("verifier", "timeout_sec"), VERIFIER_TIMEOUT_S, bounds.MAX_VERIFY_S
    )
    env = doc.env(table, ("verifier", "env"))
    user = doc.user(table, ("verifier", "user"))
    tests = doc.folder.folder("tests")
    script = doc.folder.file("tests/test.sh") if tests is not None else None
    if script is None:
        if not doc.folder.lexists("tests/test.sh"):
            doc.folder.refuse("tests/test.sh", None, "(file)", "missing: it is the verifier")
        return None
    return Verifier(
        grading="reward-file",
        tests_dir=tests,
        command=("bash", f"{TESTS_AT}/test.sh"),
        tests_at=TESTS_AT,
        timeout_s=timeout_s or VERIFIER_TIMEOUT_S,
        env=env,
        user=user,
    )


def _solution(doc: _Toml, table: dict[str, Any]) -> Solution | None:
    env = doc.env(table, ("solution", "env"))
    if doc.folder.folder("solution") is None:
        return None
    script = doc.folder.file("solution/solve.sh")
    return Solution(script=script, env=env) if script is not None else None
