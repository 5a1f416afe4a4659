"""Workspaces on real git repositories in tmp_path: isolation, results, scope, safety, push."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from runner import workspace as wsm
from runner.hostfs import remove_tree
from runner.workspace import Result, Scope, Workspace, WorkspaceError

pytestmark = pytest.mark.anyio

TEMPLATE = "runner/{run}/{task}-{model}"
FIELDS = {"run": "r1", "task": "fix", "model": "openai/gpt-5.5", "repeat": "1"}
BRANCH = "runner/r1/fix-openai-gpt-5.5"
BINARY = bytes(range(256)) * 4

# The test's own git calls must not set off the canaries planted in some tests either.
SAFE = [
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "filter.evil.clean=",
    "-c",
    "filter.evil.smudge=",
    "-c",
    "filter.evil.process=",
    "-c",
    "filter.evil.required=false",
    "-c",
    "user.name=Test User",
    "-c",
    "user.email=test@example.com",
    "-c",
    "commit.gpgSign=false",
]


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_OPTIONAL_LOCKS="0")
    return env


def git(cwd: Path, *args: str, input: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *SAFE, *args],
        cwd=cwd,
        env=clean_env(),
        input=input,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode()


def plain_git(cwd: Path, args: list[str], env: dict[str, str], *, check: bool = True) -> None:
    """git without the test's own protections (for the agent's view and for controls)."""
    subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, check=check, timeout=30)


def make_repo(path: Path) -> Path:
    """A small repository: text in directories, a binary, an ignore file, one stash."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("def main():\n    return 1\n")
    (path / "src" / "util.py").write_text("".join(f"line {i}\n" for i in range(40)))
    (path / "README.md").write_text("# sample\n")
    (path / "old_name.txt").write_text("".join(f"keep {i}\n" for i in range(30)))
    (path / "gone.txt").write_text("delete me\n")
    (path / "blob.bin").write_bytes(BINARY)
    (path / ".gitignore").write_text("*.log\nbuild/\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "initial")
    (path / "README.md").write_text("# stashed change\n")
    git(path, "stash", "-q")
    return path


def snapshot(repo: Path, ignore_branches: tuple[str, ...] = ()) -> dict[str, str]:
    """Everything of the user's repository the runner must leave as it was: status, HEAD,
    refs, stash, and the bytes of every file (work tree and .git, index included) except
    the object store and the refs of `ignore_branches` (the results)."""
    skip = {f".git/refs/heads/{b}" for b in ignore_branches}
    skip |= {f".git/logs/refs/heads/{b}" for b in ignore_branches}
    files: dict[str, str] = {}
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo).as_posix()
        if rel.startswith(".git/objects/") or rel in skip or p.is_dir():
            continue
        files[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if not p.is_symlink() else ""
    refs = "\n".join(
        line
        for line in git(repo, "for-each-ref").splitlines()
        if not any(line.endswith(f"refs/heads/{b}") for b in ignore_branches)
    )
    return {
        "status": git(repo, "status", "--porcelain=v2", "--branch", "--untracked-files"),
        "head": git(repo, "rev-parse", "HEAD"),
        "symref": git(repo, "symbolic-ref", "HEAD"),
        "refs": refs,
        "stash": git(repo, "stash", "list"),
        **files,
    }


def branches(repo: Path) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "user")


def edit(ws: Workspace) -> None:
    """An agent's typical work: edit, add, delete, rename, binary, ignored output."""
    p = ws.path
    (p / "src" / "app.py").write_text("def main():\n    return 2\n")
    (p / "src" / "new.py").write_text("NEW = True\n")
    (p / "gone.txt").unlink()
    (p / "old_name.txt").rename(p / "new_name.txt")
    (p / "blob.bin").write_bytes(BINARY[::-1])
    (p / "added.bin").write_bytes(b"\0\1\2\3" * 64)
    (p / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (p / "run.sh").chmod(0o755)
    (p / "link").symlink_to("src/app.py")
    (p / "debug.log").write_text("ignored\n")
    (p / "build").mkdir()
    (p / "build" / "out.o").write_bytes(b"ignored")


async def run_one(
    repo: Path, tmp_path: Path, name: str = "r1", *, change: bool = True, **kw: object
) -> tuple[Workspace, Result | None]:
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name=name)
    if change:
        edit(ws)
    res = await wsm.finish(
        ws,
        branch_template=TEMPLATE,
        fields=FIELDS,
        message="Fix it\n\nBody",
        patch_path=tmp_path / "out" / f"{name}.patch",
        **kw,
    )  # type: ignore[arg-type]
    return ws, res


# ---------------------------------------------------------------------------------------
# isolation and results


async def test_result_branch_and_user_repo_untouched(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    ws, res = await run_one(repo, tmp_path)
    assert res is not None
    assert res.branch == BRANCH
    assert snapshot(repo, ignore_branches=(BRANCH,)) == before
    assert branches(repo) == ["main", BRANCH]
    assert not (repo / ".git" / "worktrees").exists()
    assert git(repo, "rev-parse", BRANCH).strip() == res.commit
    assert git(repo, "rev-parse", f"{res.commit}^").strip() == ws.base
    assert git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>|%B", res.commit).strip() == (
        "runner <runner@localhost>|runner <runner@localhost>|Fix it\n\nBody"
    )
    by_path = {f.path: f for f in res.files}
    assert by_path["new_name.txt"].status == "R"
    assert by_path["new_name.txt"].old_path == "old_name.txt"
    assert by_path["gone.txt"].status == "D"
    assert by_path["blob.bin"].binary and by_path["added.bin"].binary
    assert by_path["src/app.py"].insertions == 1 and by_path["src/app.py"].deletions == 1
    assert res.files_changed == 8 == len(set(res.files))
    assert (res.insertions, res.deletions) == (
        sum(f.insertions for f in res.files),
        sum(f.deletions for f in res.files),
    )
    assert res.deletions == 2  # app.py's old line and gone.txt's one line
    assert ws.setup_s > 0


async def test_gitignore_respected_untracked_included(repo: Path, tmp_path: Path) -> None:
    _, res = await run_one(repo, tmp_path)
    assert res is not None
    tree = git(repo, "ls-tree", "-r", "--name-only", res.commit).split()
    assert "src/new.py" in tree and "added.bin" in tree and "run.sh" in tree
    assert "debug.log" not in tree and "build/out.o" not in tree
    assert git(repo, "ls-tree", res.commit, "run.sh").split()[0] == "100755"
    assert git(repo, "ls-tree", res.commit, "link").split()[0] == "120000"


async def test_personal_ignore_files_do_not_change_the_result(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    (home / ".config" / "git" / "ignore").write_text("*.py\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "exclude").write_text("*.bin\n")
    _, res = await run_one(repo, tmp_path)
    assert res is not None
    assert {"src/new.py", "added.bin"} <= {f.path for f in res.files}


async def test_dirty_user_tree_is_reported_not_included(repo: Path, tmp_path: Path) -> None:
    (repo / "README.md").write_text("# uncommitted\n")
    (repo / "src" / "staged.py").write_text("staged = 1\n")
    git(repo, "add", "src/staged.py")
    (repo / "scratch.txt").write_text("untracked\n")
    before = snapshot(repo)
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="d")
    assert ws.base_dirty
    assert (ws.path / "README.md").read_text() == "# sample\n"
    assert not (ws.path / "src" / "staged.py").exists()
    assert not (ws.path / "scratch.txt").exists()
    assert (
        await wsm.finish(
            ws,
            branch_template=TEMPLATE,
            fields=FIELDS,
            message="m",
            patch_path=tmp_path / "p.patch",
        )
        is None
    )
    assert snapshot(repo) == before


async def test_nothing_changed_gives_none_and_no_branch(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    ws, res = await run_one(repo, tmp_path, change=False)
    assert res is None
    assert not (tmp_path / "out" / "r1.patch").exists()
    assert branches(repo) == ["main"]
    (ws.path / "only.log").write_text("ignored files are no change\n")
    assert (
        await wsm.finish(
            ws,
            branch_template=TEMPLATE,
            fields=FIELDS,
            message="m",
            patch_path=tmp_path / "p.patch",
        )
        is None
    )
    assert snapshot(repo) == before


async def test_patch_applies_to_fresh_clone_and_round_trips(repo: Path, tmp_path: Path) -> None:
    ws, res = await run_one(repo, tmp_path)
    assert res is not None
    patch = res.patch_path.read_bytes()
    assert patch.startswith(f"From {res.commit} ".encode())
    for needle in (
        b"GIT binary patch",
        b"rename from old_name.txt",
        b"rename to new_name.txt",
        b"deleted file mode 100644",
        b"new file mode 100755",
        b"new file mode 120000",
        b"Subject: [PATCH] Fix it",
    ):
        assert needle in patch, needle
    assert not list(res.patch_path.parent.glob(".*tmp"))  # atomic write left no temp file
    want_tree = git(repo, "rev-parse", f"{res.commit}^{{tree}}").strip()

    for tool in ("apply", "am"):
        clone = tmp_path / f"clone-{tool}"
        git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
        git(clone, "checkout", "-q", "--detach", ws.base)
        if tool == "apply":
            git(clone, "apply", "--index", "--check", str(res.patch_path))
            git(clone, "apply", "--index", str(res.patch_path))
        else:
            git(clone, "am", "-q", str(res.patch_path))
            assert git(clone, "log", "-1", "--format=%s").strip() == "Fix it"
        assert git(clone, "write-tree").strip() == want_tree


async def test_branch_collision_gets_a_suffix_and_never_overwrites(
    repo: Path, tmp_path: Path
) -> None:
    main = git(repo, "rev-parse", "main").strip()
    git(repo, "branch", BRANCH, "main")
    _, first = await run_one(repo, tmp_path, "a")
    _, second = await run_one(repo, tmp_path, "b")
    assert first is not None and second is not None
    assert (first.branch, second.branch) == (f"{BRANCH}-2", f"{BRANCH}-3")
    assert git(repo, "rev-parse", BRANCH).strip() == main
    assert git(repo, "rev-parse", f"{BRANCH}-2").strip() == first.commit


async def test_branch_in_file_directory_conflict_fails_clearly(repo: Path, tmp_path: Path) -> None:
    git(repo, "branch", "runner/r1", "main")  # a file where the template needs a directory
    with pytest.raises(wsm.GitError, match="runner/r1"):
        await run_one(repo, tmp_path)
    assert branches(repo) == ["main", "runner/r1"]


async def test_eight_concurrent_workspaces_give_eight_branches(repo: Path, tmp_path: Path) -> None:
    before = snapshot(repo)
    results: dict[int, tuple[Workspace, Result | None]] = {}

    async def one(i: int) -> None:
        ws = await wsm.prepare(repo, root=tmp_path / "ws", name=f"w{i}")
        (ws.path / f"file{i}.txt").write_text(f"run {i}\n")
        (ws.path / "src" / "app.py").write_text(f"def main():\n    return {i}\n")
        res = await wsm.finish(
            ws,
            branch_template="runner/{run}/{task}",
            fields=FIELDS,
            message=f"run {i}",
            patch_path=tmp_path / f"{i}.patch",
        )
        results[i] = (ws, res)

    async with anyio.create_task_group() as tg:
        for i in range(8):
            tg.start_soon(one, i)
    names = {res.branch for _, res in results.values() if res}
    assert names == {"runner/r1/fix"} | {f"runner/r1/fix-{n}" for n in range(2, 9)}
    for i, (_, res) in results.items():
        assert res is not None and res.branch is not None
        assert git(repo, "show", f"{res.branch}:file{i}.txt") == f"run {i}\n"
        assert git(repo, "ls-tree", "-r", "--name-only", res.branch).count("file") == 1
    assert snapshot(repo, ignore_branches=tuple(names)) == before  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        for ws, _ in results.values():
            tg.start_soon(wsm.cleanup, ws)
    # Only the runs' store of the base's objects is left, kept until the root goes.
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [".objects"]
    assert not list((repo / ".git").rglob("*.lock"))


async def test_workspace_is_a_working_git_repository_for_the_agent(
    repo: Path, tmp_path: Path
) -> None:
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="g")
    assert git(ws.path, "status", "--porcelain") == ""
    assert git(ws.path, "rev-parse", "HEAD").strip() == ws.base
    assert git(ws.path, "remote") == ""  # nothing to push back into the user's repo
    (ws.path / "README.md").write_text("# agent\n")
    assert "+# agent" in git(ws.path, "diff")
    # The agent commits on its own (identity comes from the workspace config), then edits
    # again: the result is still one commit on the base with everything.
    plain_git(ws.path, ["-c", "core.hooksPath=/dev/null", "commit", "-qam", "agent"], clean_env())
    (ws.path / "more.txt").write_text("more\n")
    res = await wsm.finish(
        ws, branch_template=TEMPLATE, fields=FIELDS, message="m", patch_path=tmp_path / "p.patch"
    )
    assert res is not None
    assert git(repo, "rev-parse", f"{res.commit}^").strip() == ws.base
    assert {f.path for f in res.files} == {"README.md", "more.txt"}


async def test_shallow_user_clone(repo: Path, tmp_path: Path) -> None:
    (repo / "second.txt").write_text("2\n")
    git(repo, "add", "second.txt")
    git(repo, "commit", "-qm", "second")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth=1", f"file://{repo}", str(shallow))
    ws, res = await run_one(shallow, tmp_path)
    assert git(ws.path, "log", "--format=%s") == "second\n"
    assert res is not None and res.branch == BRANCH


async def test_sha256_repository(tmp_path: Path) -> None:
    repo = tmp_path / "u256"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256", "-b", "main")
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init")
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="s")
    (ws.path / "a.txt").write_text("b\n")
    res = await wsm.finish(
        ws, branch_template=TEMPLATE, fields=FIELDS, message="m", patch_path=tmp_path / "p.patch"
    )
    assert res is not None and len(res.commit) == 64 and res.branch == BRANCH
    assert git(repo, "rev-parse", BRANCH).strip() == res.commit


async def test_user_repo_that_is_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    (linked / "feature.txt").write_text("on feature\n")
    git(linked, "add", "feature.txt")
    git(linked, "commit", "-qm", "feature work")
    before = snapshot(repo)
    ws, res = await run_one(linked, tmp_path)
    assert (ws.path / "feature.txt").exists()
    assert res is not None and res.branch == BRANCH
    assert git(repo, "rev-parse", f"{BRANCH}^").strip() == git(repo, "rev-parse", "feature").strip()
    assert snapshot(repo, ignore_branches=(BRANCH,)) == before


async def test_inherited_git_environment_is_ignored(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started from a git hook, the runner inherits GIT_DIR/GIT_INDEX_FILE/GIT_WORK_TREE
    pointing at the user's repository; none of them may steer its commands."""
    before = snapshot(repo)
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    monkeypatch.setenv("GIT_INDEX_FILE", str(repo / ".git" / "index"))
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", str(tmp_path / "elsewhere"))
    _, res = await run_one(repo, tmp_path)
    assert res is not None and res.branch == BRANCH
    monkeypatch.undo()
    assert snapshot(repo, ignore_branches=(BRANCH,)) == before


async def test_agent_pointing_its_git_at_the_user_repo_changes_nothing(
    repo: Path, tmp_path: Path
) -> None:
    """`.git` replaced by a symlink to the user's .git: the runner's own git never reads it,
    and cleanup removes the link, not what it points to."""
    before = snapshot(repo)
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="s")
    remove_tree(ws.path / ".git")
    (ws.path / ".git").symlink_to(repo / ".git")
    (ws.path / "x.txt").write_text("x\n")
    res = await wsm.finish(
        ws, branch_template=TEMPLATE, fields=FIELDS, message="m", patch_path=tmp_path / "p.patch"
    )
    assert res is not None and [f.path for f in res.files] == ["x.txt"]
    await wsm.cleanup(ws)
    assert snapshot(repo, ignore_branches=(BRANCH,)) == before


async def test_scope_violation_keeps_patch_but_no_branch(repo: Path, tmp_path: Path) -> None:
    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="s")
    (ws.path / ".github" / "workflows").mkdir(parents=True)
    (ws.path / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
    (ws.path / "old_name.txt").rename(ws.path / "docs.txt")
    res = await wsm.finish(
        ws,
        branch_template=TEMPLATE,
        fields=FIELDS,
        message="m",
        patch_path=tmp_path / "s.patch",
        scope=Scope(allowed=["docs.txt", "**/*.yml"], max_diff_lines=0),
    )
    assert res is not None and res.branch is None
    assert res.patch_path.exists()
    assert set(res.changed_paths) == {".github/workflows/ci.yml", "old_name.txt", "docs.txt"}
    assert [v.split(":")[0] for v in res.violations] == [
        ".github/workflows/ci.yml",
        "old_name.txt",
        "diff has 1 changed lines; the limit is 0",
    ]
    assert branches(repo) == ["main"]
    assert git(repo, "cat-file", "-t", res.commit).strip() == "commit"  # kept for later


async def test_create_branch_false(repo: Path, tmp_path: Path) -> None:
    _, res = await run_one(repo, tmp_path, create_branch=False)
    assert res is not None and res.branch is None and res.violations == ()
    assert res.patch_path.exists()
    assert branches(repo) == ["main"]


# ---------------------------------------------------------------------------------------
# git safety


def plant(git_dir: Path, marker_dir: Path, tag: str) -> None:
    """Make every config- or hook-driven way of running code write a marker file."""
    hooks = git_dir / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in (
        "pre-commit",
        "post-commit",
        "post-checkout",
        "reference-transaction",
        "pre-push",
        "post-index-change",
        "pre-auto-gc",
        "post-rewrite",
    ):
        (hooks / hook).write_text(f"#!/bin/sh\ntouch '{marker_dir}/{tag}-hook-{hook}'\n")
        (hooks / hook).chmod(0o755)
    script = git_dir / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch '{marker_dir}/{tag}-'\"$1\"\ncat\n")
    script.chmod(0o755)
    with (git_dir / "config").open("a") as f:
        f.write(f"""[core]
\tfsmonitor = {script} fsmonitor
\thooksPath = {hooks}
\tpager = {script} pager
\talternateRefsCommand = {script} altrefs
[filter "evil"]
\tclean = {script} clean
\tsmudge = {script} smudge
\tprocess = {script} process
\trequired = true
[diff]
\texternal = {script} extdiff
[diff "evil"]
\ttextconv = {script} textconv
[commit]
\tgpgSign = true
[gpg]
\tprogram = {script}
[credential]
\thelper = !{script} credential
""")


async def test_hooks_fsmonitor_filters_never_run(repo: Path, tmp_path: Path) -> None:
    markers = tmp_path / "markers"
    markers.mkdir()
    (repo / ".gitattributes").write_text("*.txt filter=evil diff=evil\n")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-qm", "attributes")
    plant(repo / ".git", markers, "user")
    (repo / "README.md").touch()  # stat-dirty: status would consult fsmonitor and filters

    ws = await wsm.prepare(repo, root=tmp_path / "ws", name="h")
    plant(ws.path / ".git", markers, "agent")  # the agent tampers with its own .git too
    with (ws.path / ".git" / "config").open("a") as f:
        f.write(f"[core]\n\tworktree = {repo}\n")
    (ws.path / ".git" / "index").write_bytes(b"garbage")
    (ws.path / "old_name.txt").write_text("changed text file, filter=evil\n")
    (ws.path / "new.txt").write_text("new\n")
    res = await wsm.finish(
        ws, branch_template=TEMPLATE, fields=FIELDS, message="m", patch_path=tmp_path / "h.patch"
    )
    assert res is not None and res.branch == BRANCH
    assert {f.path for f in res.files} == {"old_name.txt", "new.txt"}
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    await wsm.push(repo, BRANCH, remote=str(bare), token="tok-0123456789abcdef")
    await wsm.cleanup(ws)
    assert sorted(p.name for p in markers.iterdir()) == []

    # Control: the plants are live, so the empty list above means something.
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    env = {k: v for k, v in env.items() if not k.startswith("GIT_") or "CONFIG" in k}
    # A changed mtime makes status hash the file through the planted filter (without it,
    # that happened only when the test ran within git's racy-clean second).
    stamp = time.time() + 5
    os.utime(repo / "old_name.txt", (stamp, stamp))
    plain_git(repo, ["status"], env, check=False)  # the planted filter breaks it
    plain_git(repo, ["branch", "control"], env)
    found = {p.name for p in markers.iterdir()}
    assert {"user-fsmonitor", "user-process", "user-hook-reference-transaction"} <= found


# ---------------------------------------------------------------------------------------
# push

TOKEN = "ghs_TOKEN0123456789abcdefSECRET"


def token_forms() -> list[str]:
    return [TOKEN, base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()]


def assert_no_token(*texts: object) -> None:
    for text in texts:
        for form in token_forms():
            assert form not in str(text) and form not in repr(text)


async def test_push_with_token_to_a_local_bare_repository(repo: Path, tmp_path: Path) -> None:
    _, res = await run_one(repo, tmp_path)
    assert res is not None and res.branch is not None
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(repo, "remote", "add", "origin", str(bare))
    before = snapshot(repo, ignore_branches=(res.branch,))
    pushed = await wsm.push(repo, res.branch, remote="origin", token=TOKEN)
    assert git(bare, "rev-parse", res.branch).strip() == res.commit
    assert_no_token(pushed)
    assert snapshot(repo, ignore_branches=(res.branch,)) == before

    assert_no_token(await wsm.push(repo, res.branch, remote=str(bare), token=TOKEN))
    main = git(repo, "rev-parse", "main").strip()  # same commit again: a no-op
    git(bare, "update-ref", f"refs/heads/{res.branch}", main)
    with pytest.raises(WorkspaceError) as exc:  # someone else's branch: never overwritten
        await wsm.push(repo, res.branch, remote=str(bare), token=TOKEN)
    assert git(bare, "rev-parse", res.branch).strip() == main
    assert_no_token(
        exc.value, exc.value.args, getattr(exc.value, "stderr", ""), getattr(exc.value, "argv", "")
    )
    with pytest.raises(WorkspaceError) as exc:
        await wsm.push(repo, res.branch, remote=str(tmp_path / "missing.git"), token=TOKEN)
    assert_no_token(exc.value, exc.value.args)
    with pytest.raises(WorkspaceError):
        await wsm.push(repo, "no-such-branch", remote="origin", token=TOKEN)
    with pytest.raises(WorkspaceError):
        await wsm.push(repo, res.branch, remote="--upload-pack=touch /tmp/x", token=TOKEN)


@pytest.fixture
def auth_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP 'remote' that records Authorization headers and refuses everything."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(403)
            self.end_headers()
            self.wfile.write(b"denied")

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/repo.git", seen
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join()


async def test_a_push_to_a_remote_that_never_answers_is_stopped(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts the connection and says nothing: the push ends in a bounded
    time with its own error, and the batch is not held."""
    import socket

    from runner.workspace import refs

    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(refs, "PUSH_TIMEOUT_S", 2.0)
    _, res = await run_one(repo, tmp_path)
    assert res is not None and res.branch is not None
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/r.git"
        started = time.monotonic()
        with pytest.raises(WorkspaceError, match="no answer within 2 s"):
            await wsm.push(repo, res.branch, remote=url, token=TOKEN)
    assert time.monotonic() - started < 30


async def test_push_token_reaches_http_remote_only_as_header(
    repo: Path, tmp_path: Path, auth_server: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    url, seen = auth_server
    _, res = await run_one(repo, tmp_path)
    assert res is not None and res.branch is not None
    with pytest.raises(WorkspaceError) as exc:
        await wsm.push(repo, res.branch, remote=url, token=TOKEN)
    assert seen and seen[0] == f"Basic {token_forms()[1]}"
    assert_no_token(exc.value, exc.value.args, getattr(exc.value, "stderr", ""))
