"""Running git, hardened: a scratch environment, forced config (`HARDENING`), no hooks,
helpers, pagers or filter drivers; the one place the runner starts git."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from runner.errors import GitError
from runner.fsutil import private_dirs
from runner.workspace.types import Workspace

IDENTITY = ("runner", "runner@localhost")
"""Author and committer of every result commit: fixed, so results never carry the
identity of whoever happens to run the batch, and commits are reproducible in tests."""

DEFAULT_FORBIDDEN = (
    ".github/workflows/**",
    ".github/actions/**",
    "CODEOWNERS",
    ".github/CODEOWNERS",
    "docs/CODEOWNERS",
    ".github/dependabot.yml",
    ".github/dependabot.yaml",
)
"""Paths no run may change unless an allowed pattern names them explicitly: a workflow,
or a local action it uses, edited by a model runs with the repository's CI secrets on the
next push; CODEOWNERS (in each of the three places GitHub reads it) decides who must
approve a change; dependabot.yml decides which registries and code get pulled in."""

HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", "/dev/null"),  # no hooks (pre-commit, reference-transaction, ...)
    ("core.fsmonitor", "false"),  # a configured fsmonitor is an arbitrary command
    ("core.protectNTFS", "true"),  # `.git` aliases refused (see runner/gitnames.py)
    ("core.protectHFS", "true"),
    ("core.untrackedCache", "false"),
    ("core.splitIndex", "false"),
    ("core.pager", "cat"),
    ("core.askPass", ""),
    ("credential.helper", ""),  # an empty value resets the helper list
    ("commit.gpgSign", "false"),  # signing runs gpg.program / gpg.ssh.program
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    ("gc.auto", "0"),  # no background repacks of the user's store
    ("maintenance.auto", "false"),
    ("advice.addEmbeddedRepo", "false"),
    ("advice.detachedHead", "false"),
)
"""Config forced on every git invocation (as `-c`, which beats repository config)."""

BLANKED_FILTER_KEYS = ("clean", "smudge", "process")

_ENV_DROP = frozenset({"PAGER", "EDITOR", "VISUAL", "SSH_ASKPASS", "LESSOPEN", "LESSCLOSE"})
_LOCAL_PROTOCOLS = "file"
PUSH_PROTOCOLS = "file:git:ssh:http:https"
PRIVATE_SUFFIX = ".runner"
MAX_COMPONENT = 100
MAX_BRANCH_SUFFIX = 1000
TEMPLATE_FIELDS = frozenset({"batch", "run", "task", "model", "repeat", "name", "variant"})
"""`{batch}` is the batch id; `{run}` is its older spelling, kept with the same meaning so
existing templates name branches as before (the run's own name is `{name}`)."""


def git_env(
    extra: Mapping[str, str] | None = None, *, protocols: str = _LOCAL_PROTOCOLS
) -> dict[str, str]:
    """The environment of every git child, built from scratch.

    Every inherited `GIT_*` variable is dropped: `GIT_DIR`, `GIT_WORK_TREE` or
    `GIT_INDEX_FILE` left by a hook would point our commands at the user's repository, and
    `GIT_CONFIG_PARAMETERS`/`GIT_EXTERNAL_DIFF`/`GIT_SSH_COMMAND` would run other code.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in _ENV_DROP}
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_OPTIONAL_LOCKS": "0",  # `status` must not refresh and rewrite the user's index
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_ALLOW_PROTOCOL": protocols,  # no ext::, fd::, and no network unless pushing
            "GIT_PAGER": "cat",
            "GIT_EDITOR": "true",
            "LC_ALL": "C",
            "LANGUAGE": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


def git_argv(args: Sequence[str], config: Iterable[tuple[str, str]] = ()) -> list[str]:
    argv = ["git"]
    for key, value in (*HARDENING, *config):
        argv += ["-c", f"{key}={value}"]
    return argv + list(args)


def run_git(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input: bytes | None = None,
    config: Iterable[tuple[str, str]] = (),
    secrets: Sequence[str] = (),
    protocols: str = _LOCAL_PROTOCOLS,
    check: bool = True,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`timeout` is for what talks to a network: a remote that accepts and never answers
    would otherwise hold the run (and the batch) forever."""
    argv = git_argv(args, config)
    try:
        proc = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            cwd=cwd,
            env=git_env(env, protocols=protocols),
            check=False,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        raise GitError(argv, -1, f"no answer within {timeout:g} s; stopped", args) from None
    if check and proc.returncode != 0:
        raise GitError(
            argv, proc.returncode, _scrub(proc.stderr.decode(errors="replace"), secrets), args
        )
    return proc


def run_git_to_file(args: Sequence[str], path: Path, *, env: Mapping[str, str], cwd: Path) -> None:
    """git's stdout written atomically to `path` (see `atomic_write_bytes`), streamed."""
    private_dirs(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            argv = git_argv(args)
            proc = subprocess.run(
                argv, stdout=f, stderr=subprocess.PIPE, cwd=cwd, env=git_env(env), check=False
            )
            if proc.returncode != 0:
                raise GitError(
                    argv, proc.returncode, proc.stderr.decode(errors="replace")[-4000:], args
                )
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def git_out(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    input: bytes | None = None,
) -> str:
    return (
        run_git(args, env=env, cwd=cwd, input=input).stdout.decode(errors="surrogateescape").strip()
    )


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Config as `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n`: unlike `-c key=value` a key may
    contain `=`, and a value never appears in the process list."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[REDACTED]")
    return text


def user_filter_blanks(repo: Path) -> list[tuple[str, str]]:
    """Config that disables every filter driver the user's config defines.

    `git status` in the user's tree runs a driver's clean command on every stat-dirty file
    that `.gitattributes` routes to it; blanking `clean`/`smudge`/`process` (an empty value
    means "no command") and clearing `required` turns them all into no-ops.
    """
    proc = run_git(["config", "--list", "--name-only", "-z"], cwd=repo, check=False)
    blanks: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name in proc.stdout.decode(errors="replace").split("\0"):
        if not name.lower().startswith("filter.") or name.count(".") < 2:
            continue
        driver = name[len("filter.") : name.rindex(".")]
        if driver in seen:
            continue
        seen.add(driver)
        blanks += [(f"filter.{driver}.{k}", "") for k in BLANKED_FILTER_KEYS]
        blanks.append((f"filter.{driver}.required", "false"))
    return blanks


def staging_env(ws: Workspace) -> dict[str, str]:
    """`private_env` with new objects written to the private store (the user's is read
    through alternates): `publish` then moves them in as packs, never as loose files."""
    return {
        **private_env(ws),
        "GIT_OBJECT_DIRECTORY": str(ws._private_git / "objects"),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(ws.objects),
    }


def publish(ws: Workspace, env: Mapping[str, str], commit: str) -> None:
    """Give the user's object store the result's new objects as whole packs: 100k files
    written by an agent become one pack, not 100k loose objects.

    Loose objects are packed (`--incremental` skips what is packed already, such as a
    huge file `git add` streamed into its own pack; `--local` skips the user's own
    objects); then each private pack is moved in, its `.idx` last, since git only sees
    a pack once its index is there."""
    store = ws._private_git / "objects" / "pack"
    run_git(
        ["pack-objects", "--revs", "--local", "--incremental", "-q", str(store / "pack")],
        env=env,
        cwd=ws.path,
        input=f"{commit}\n^{ws.base}\n".encode(),
    )
    dest = ws.objects / "pack"
    dest.mkdir(exist_ok=True)
    for pack in sorted(store.glob("pack-*.pack")):
        for suffix in (".pack", ".rev", ".idx"):
            src = pack.with_suffix(suffix)
            if src.exists():
                _move_into(src, dest / src.name)


def _move_into(src: Path, dst: Path) -> None:
    """Rename where possible; across filesystems copy to a temporary name, then rename,
    so git never sees half a file."""
    if dst.exists():
        return  # the same pack (named by its content) is already there
    try:
        os.replace(src, dst)
    except OSError:
        tmp = dst.with_name(f".tmp-{dst.name}")
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o444)
        os.replace(tmp, dst)


def private_env(ws: Workspace) -> dict[str, str]:
    return {
        "GIT_DIR": str(ws._private_git),
        "GIT_WORK_TREE": str(ws.path),
        "GIT_INDEX_FILE": str(ws._index),
        "GIT_OBJECT_DIRECTORY": str(ws.objects),
    }


def common_dir(git_dir: Path) -> Path:
    marker = git_dir / "commondir"
    if marker.exists():
        return (git_dir / marker.read_text().strip()).resolve()
    return git_dir


_ref_locks: dict[str, threading.Lock] = {}
_ref_locks_guard = threading.Lock()


def ref_lock(git_dir: Path) -> threading.Lock:
    """One lock per user repository: concurrent `update-ref`s in one repo would race on
    `packed-refs.lock` and on creating shared parent directories."""
    key = str(common_dir(git_dir))
    with _ref_locks_guard:
        return _ref_locks.setdefault(key, threading.Lock())


def read_git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A git command on a repository the runner only reads or compare-and-deletes in
    (`report branches`, the Action's checks): hardened like every other, text output,
    never raising; the caller reads `returncode`."""
    return subprocess.run(
        git_argv(args),
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
        env=git_env(),
    )
