"""Issue 25, points 2 and 3: a run sees its own workspace and the tools, nothing of the
batch or of the user. Another run's live transcript, the out dir, the user's repository
(work tree with its git-ignored `.env`, and `.git`) stay out of reach of the model's
commands, and no mount, process or variable in the sandbox names where they are.

Each test drives the real CLI (as root, and as a user created for the test through
`setpriv`) with the out dir and the repository under /home, /srv, /var and /tmp in turn:
places the host shows to the sandbox unless the runner hides them."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Awaitable, Iterator
from pathlib import Path

import anyio
import pytest

from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.isolation import PATH, Who, run_outputs, scripted
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    last_user_text,
    per_conversation,
    reply_message,
)
from tests.support.security import hold, let_go, sh, tasks

BASES = ("/home", "/srv", "/var", "/tmp")
T1_CANARY = "t1-answer-7c0d5e21"
ENV_CANARY = "DATABASE_PASSWORD=env-canary-" + secrets.token_hex(6)
"""Unique to this test process: the host outside the hidden places stays readable, so a
repository another process left under /srv or /var must not match."""


@pytest.fixture(params=BASES)
def place(request: pytest.FixtureRequest, who: Who) -> Iterator[Path]:
    """A directory under one of BASES, readable by everyone as such places usually are,
    owned by whoever runs the runner."""
    base = Path(tempfile.mkdtemp(prefix="runner-iso-", dir=request.param))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _repo(place: Path) -> Path:
    repo = make_git_repo(place / "repo", {"README.md": "x\n", ".gitignore": ".env\n"})
    (repo / ".env").write_text(ENV_CANARY + "\n")
    return repo


def _names(text: str, path: Path) -> bool:
    return re.search(re.escape(str(path)) + r"(?=[/\s]|$)", text) is not None


def test_a_run_cannot_read_another_runs_transcript_or_the_out_dir(
    loopback_thread: ThreadFactory, who: Who, place: Path
) -> None:
    """t2 looks for t1's live transcript while t1 waits; the out dir is not there for it,
    and every file the runner wrote there is private to the runner's user. t1 waits until
    t2's probe is over (the model server lets it go when t2 asks its next turn), and t2's
    probe is sent once t1's transcript is there on the host."""
    repo, out = _repo(place), place / "out"
    gate = Path(tempfile.mkdtemp(prefix="runner-iso-gate-", dir="/var/tmp"))
    gate.chmod(0o755)
    probe = (
        f"test -e {out} && echo OUT-VISIBLE || echo OUT-HIDDEN; "
        f"cat {out}/threads/t1.jsonl; ls -la {out} {out}/threads {out}/journal; "
        "echo siblings: $(ls -a ..)"
    )
    steps = {
        "t1": [sh(f"echo {T1_CANARY}; {hold(str(gate / 'go'))}", "a"), reply_message("done")],
        "t2": [sh(probe, "b"), reply_message("done")],
    }

    async def after_t1_started() -> Reply:
        for _ in range(1200):
            if (out / "threads" / "t1.jsonl").exists():
                break
            await anyio.sleep(0.05)
        return steps["t2"][0]

    def script(req: RecordedRequest, turn: int) -> Reply | Awaitable[Reply]:
        name = last_user_text(req).strip()
        if name == "t2" and turn == 0:
            return after_t1_started()
        if name == "t2":
            (gate / "go").touch()  # t2's probe is over
        return steps[name][min(turn, 1)]

    srv = loopback_thread(per_conversation(script))
    who.own(place)
    try:
        res = who.cli(
            "run",
            tasks(place, srv.base_url, repo, ["t1", "t2"]),
            "--out",
            out,
            "--concurrency",
            "2",
        )
    finally:
        shutil.rmtree(gate, ignore_errors=True)
    assert res.returncode == 0, res.stderr
    seen = run_outputs(out, "t2")
    assert T1_CANARY in run_outputs(out, "t1")
    assert T1_CANARY not in seen, seen
    assert "OUT-HIDDEN" in seen and "OUT-VISIBLE" not in seen, seen
    siblings = seen.split("siblings:")[-1].split()
    assert "t2" in siblings and "t1" not in siblings and ".t2.runner" not in siblings, seen
    for path in [out, *out.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_a_command_cannot_find_or_read_the_users_repository(
    loopback_thread: ThreadFactory, who: Who, place: Path
) -> None:
    """The model looks for the repository by every road it has: the mount table, the
    sandbox's process 1, the environment (PATH holds the repository's virtualenv), and
    guessing. Nothing names the repository, the out dir or the runner's home, and the
    git-ignored `.env` stays unread."""
    repo, out = _repo(place), place / "out"
    (repo / ".venv" / "bin").mkdir(parents=True)
    probe = (
        "echo ==WHERE==; cat /proc/self/mountinfo; tr '\\0' ' ' </proc/1/cmdline; echo; "
        "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' <$f; done; echo ==END==; "
        "for d in $(awk '{print $4; print $5}' /proc/self/mountinfo); do "
        'for up in . .. ../.. ../../..; do cat "$d/$up/.env"; done; done 2>/dev/null; '
        f"cat {repo}/.env {repo}/.git/config; ls -la {repo}; "
        f"cat /proc/1/root{repo}/.env /proc/self/root{repo}/.env /proc/1/cwd/.env; "
        "find / -maxdepth 4 \\( -path /proc -o -path /sys -o -path /usr -o -path /dev \\) "
        "-prune -o -name .env -print 2>/dev/null | while read f; do cat $f; done; "
        "git -C . log --oneline | head -1; echo probe-done"
    )
    steps = {"t": [sh(probe, "c"), reply_message("done")]}
    srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
    who.own(place)
    res = who.cli(
        "run",
        tasks(place, srv.base_url, repo, ["t"]),
        "--out",
        out,
        path=f"{repo}/.venv/bin:{PATH}",
    )
    assert res.returncode == 0, res.stderr
    seen = run_outputs(out, "t")
    assert "probe-done" in seen and " base" in seen, seen  # ran to the end; git works
    assert ENV_CANARY not in seen, seen
    assert all(ENV_CANARY.encode() not in r.raw for r in srv.requests)
    where = seen.split("==WHERE==")[1].split("==END==")[0]
    for path in (repo, out, who.home):
        assert not _names(where, path), (path, where)


def test_a_skill_in_the_repository_is_readable_without_naming_the_repository(
    loopback_thread: ThreadFactory, who: Who
) -> None:
    """The model opens a skill's SKILL.md itself (and runs its scripts). Review 2 of issue
    25, item 4: a skill kept in the hidden repository is shown from the runner's copy at
    a fixed path, so neither the prompt, nor the mount table, nor any path names the
    repository, and nothing else of the repository is readable."""
    place = Path(tempfile.mkdtemp(prefix="runner-iso-", dir="/srv"))
    try:
        place.chmod(0o755)
        repo = _repo(place)
        skill = repo / "skills" / "notes"
        (skill / "scripts").mkdir(parents=True)
        (skill / "SKILL.md").write_text("---\nname: notes\ndescription: d\n---\nskill-body-1f\n")
        (skill / "scripts" / "run.sh").write_text("#!/bin/sh\necho script-ran-4b\n")
        (skill / "scripts" / "run.sh").chmod(0o755)
        os.symlink("../../.env", skill / "env-link")  # out of the skill: left out
        os.symlink("/etc/hostname", skill / "out-link")
        at = "/tmp/.runner/skills/0"
        probe = (
            f"cat {at}/SKILL.md; {at}/scripts/run.sh; ls -a {at}; "
            f"cat {at}/env-link {at}/out-link; echo ==WHERE==; "
            f"cat /proc/self/mountinfo; echo ==END==; cat {skill}/SKILL.md {repo}/.env; "
            f"ls {repo}; echo probe-done"
        )
        steps = {"t": [sh(probe, "c"), reply_message("done")]}
        srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
        out = place / "out"
        task_file = tasks(place, srv.base_url, repo, ["t"], extra=f"  skills: ['{skill}']")
        who.own(place)
        res = who.cli("run", task_file, "--out", out)
        assert res.returncode == 0, res.stderr
        seen = run_outputs(out, "t")
        assert "probe-done" in seen and "skill-body-1f" in seen, seen
        assert "script-ran-4b" in seen, seen
        assert seen.count("skill-body-1f") == 1, "read at the real path too"
        assert ENV_CANARY not in seen, seen
        assert f"ls: cannot access '{repo}'" in seen, seen  # the repository is not there
        where = seen.split("==WHERE==")[1].split("==END==")[0]
        assert not _names(where, repo) and not _names(where, place), where
        first = srv.requests[0].raw.decode()
        assert f"{at}/SKILL.md" in first and str(place) not in first
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.parametrize("work", ["/tmp", "/dev/shm"])
def test_a_borrowing_repository_keeps_its_history_without_naming_either_store(
    tmp_path: Path, work: str
) -> None:
    """A `git clone --shared` borrows the objects of the repository it came from: both
    stores reach the sandbox through the runner's pack of what the base reaches (on this
    filesystem or another, such as /dev/shm), git reads the whole history, and the mount
    table names neither repository."""
    if os.geteuid() != 0:
        pytest.skip("places the repositories under /srv: needs root")
    from runner import workspace
    from runner.sandbox import make_executor, make_policy

    place = Path(tempfile.mkdtemp(prefix="runner-iso-", dir="/srv"))
    root = Path(tempfile.mkdtemp(prefix="runner-iso-work-", dir=work))
    try:
        src = make_git_repo(place / "src")
        clone = place / "clone"
        subprocess.run(["git", "clone", "-q", "--shared", str(src), str(clone)], check=True)
        (clone / "b.txt").write_text("b\n")
        subprocess.run(["git", "-C", str(clone), "add", "b.txt"], check=True)
        subprocess.run(
            ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t"]
            + ["commit", "-q", "-m", "second"],
            check=True,
        )
        ws = workspace.prepare_sync(clone, root=root / "0", name="t")
        try:
            policy = make_policy(
                "workspace-write", workspace=ws.path, hidden=[root, *ws.user_paths]
            )
            script = (
                "git log --oneline | wc -l; git show HEAD~1:README.md; cat /proc/self/mountinfo"
            )
            res = anyio.run(
                lambda: make_executor(policy).run(
                    ["bash", "-c", script], cwd=ws.path, timeout_s=30, env={"PATH": PATH}
                )
            )
            text = res.output.decode()
            assert text.split()[0] == "2" and "# sample" in text, text
            assert not _names(text, src) and not _names(text, clone), text
        finally:
            workspace.cleanup_sync(ws)
    finally:
        shutil.rmtree(place, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _git_in(repo: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@t", "-c", "safe.directory=*"]
    return subprocess.run(
        ["git", "-C", str(repo), *ident, *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_a_run_sees_only_the_objects_its_base_reaches(
    loopback_thread: ThreadFactory, who: Who
) -> None:
    """Issue 25 review, finding 1: t1's result commit lands in the user's object store
    before t2 starts (`--concurrency 1`). t2 dumps every object git can read, and finds
    neither t1's answer, nor another branch's, nor a dangling blob: only what its base
    commit reaches. Its own history still reads."""
    place = Path(tempfile.mkdtemp(prefix="runner-iso-", dir="/var/tmp"))
    place.chmod(0o755)
    try:
        repo, out = _repo(place), place / "out"
        _git_in(repo, "checkout", "-q", "-b", "other")
        (repo / "other.txt").write_text("other-branch-canary-31c7\n")
        _git_in(repo, "add", "other.txt")
        _git_in(repo, "commit", "-qm", "other")
        _git_in(repo, "checkout", "-q", "-")
        subprocess.run(
            ["git", "-C", str(repo), "hash-object", "-w", "--stdin"],
            input="dangling-blob-canary-08e2\n",
            text=True,
            check=True,
            capture_output=True,
        )
        probe = (
            "git cat-file --batch-all-objects --batch; "
            "echo count=$(git cat-file --batch-all-objects --batch-check | wc -l); "
            "git log --oneline | wc -l; echo probe-done"
        )
        steps = {
            "t1": [sh(f"echo {T1_CANARY} > answer.txt", "a"), reply_message("done")],
            "t2": [sh(probe, "b"), reply_message("done")],
        }
        srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
        who.own(place)
        res = who.cli(
            "run",
            tasks(place, srv.base_url, repo, ["t1", "t2"]),
            "--out",
            out,
            "--concurrency",
            "1",
        )
        assert res.returncode == 0, res.stderr
        assert T1_CANARY in _git_in(repo, "log", "--all", "-p"), "t1's result is in the store"
        seen = run_outputs(out, "t2")
        assert "probe-done" in seen and "\n\nbase\n" in seen, seen
        for canary in (T1_CANARY, "other-branch-canary-31c7", "dangling-blob-canary-08e2"):
            assert canary not in seen, (canary, seen)
    finally:
        shutil.rmtree(place, ignore_errors=True)


@pytest.mark.parametrize("deep", [False, True])
def test_a_batch_cannot_reach_another_batchs_run_directories(
    loopback_thread: ThreadFactory, who: Who, deep: bool
) -> None:
    """Issue 25 review, finding 2: batch A runs with TMPDIR under /var/tmp (a folder
    anyone may enter), batch B with its usual TMPDIR at the same time. B's command
    looks for A's live workspace, A's private dir and its objects by their known paths
    and finds nothing there, while B's own workspace works. `deep`: A's TMPDIR lies
    where no search of the temp roots finds it (review 2 of issue 25, item 3): A's
    registered `runner-work` is left out all the same, also for one unprivileged uid."""
    place = Path(tempfile.mkdtemp(prefix="runner-iso-", dir="/var/tmp"))
    place.chmod(0o755)
    tmp_a = Path(tempfile.mkdtemp(prefix="runner-iso-tmpA-", dir="/var/tmp"))
    tmp_a.chmod(0o755)
    if deep:
        tmp_a = tmp_a / "x" / "y"
        tmp_a.mkdir(parents=True)
        for p in (tmp_a, tmp_a.parent):
            p.chmod(0o755)
    try:
        (place / "a").mkdir()
        (place / "b").mkdir()
        repo = _repo(place)
        work = tmp_a / "runner-work"
        probe = (
            f"ls -la {work} {work}/0 {work}/0/a1 {work}/0/.a1.runner; "
            f"find {work} -maxdepth 4; cat {work}/0/a1/secret.txt; "
            f"git -C {work}/0/a1 log -1; echo mine: $(cat README.md); echo probe-done"
        )
        canary = "batch-a-live-canary-6d1f"
        steps = {
            # A lasts until B has looked (`let_go`), not a fixed 12 s B had to finish in.
            "a1": [sh(f"echo {canary} > secret.txt; {hold()}", "a"), reply_message("done")],
            "b1": [sh(probe, "b"), reply_message("done")],
        }
        srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
        task_a = tasks(place / "a", srv.base_url, repo, ["a1"])
        task_b = tasks(place / "b", srv.base_url, repo, ["b1"])
        who.own(place)
        who.own(tmp_a)
        env_a = {**who.env, "PATH": PATH, "TMPDIR": str(tmp_a)}
        a = subprocess.Popen(
            who.argv("run", task_a, "--out", place / "a" / "out"),
            env=env_a,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        try:
            for _ in range(300):
                if (work / "0" / "a1" / "secret.txt").exists() or a.poll() is not None:
                    break
                time.sleep(0.05)
            assert (work / "0" / "a1" / "secret.txt").exists(), a.communicate(timeout=60)
            for p in (work, work / "0", work / "0" / "a1", work / "0" / ".a1.runner"):
                assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
            res = who.cli("run", task_b, "--out", place / "b" / "out")
            assert a.poll() is None, "batch A ended before B looked"
        finally:
            held = let_go(work / "0" / "a1")
            a_out, a_err = a.communicate(timeout=180)
        assert res.returncode == 0, res.stderr
        assert a.returncode == 0, a_err
        assert held, "no workspace of A's to let its command end"
        seen = run_outputs(place / "b" / "out", "b1")
        assert "probe-done" in seen and "mine: x" in seen, seen
        assert canary not in seen, seen
        listed = re.sub(re.escape(str(work)) + r"\S*", "", seen)
        for name in ("a1", "secret", ".runner", ".objects"):
            assert name not in listed, (name, seen)
    finally:
        shutil.rmtree(place, ignore_errors=True)
        shutil.rmtree(tmp_a.parents[1] if deep else tmp_a, ignore_errors=True)


def test_a_command_cannot_read_the_task_file_or_what_lies_beside_it(
    loopback_thread: ThreadFactory, who: Who, place: Path
) -> None:
    """Review 2 of issue 25, item 5: a benchmark keeps its task file (check commands,
    expected answers) and an answers file beside the repository. The command knows their
    paths (it may guess them from its own) and reads neither, and the folder holding them
    lists nothing; the task file is hidden even in a folder that stays shown (`/var/x`)."""
    bench = place / "bench"
    bench.mkdir()
    repo = _repo(bench)
    answer = "expected-answer-canary-" + secrets.token_hex(4)
    (bench / "answers.txt").write_text(answer + "\n")
    probe = (
        f"cat {bench}/tasks.yaml {bench}/answers.txt {place}/top.yaml; "
        f"echo listed: $(ls -a {bench} {place}); echo probe-done"
    )
    steps = {"t": [sh(probe, "c"), reply_message("done")]}
    srv = loopback_thread(scripted(steps))  # type: ignore[arg-type]
    task_file = tasks(bench, srv.base_url, repo, ["t"], extra=f"# {answer}-in-tasks")
    who.own(place)
    out = bench / "out"
    for file in (task_file, place / "top.yaml"):
        if file != task_file:  # a task file right under a folder that stays shown
            shutil.copy(task_file, file)
            who.own(file)
        res = who.cli("run", file, "--out", out)
        assert res.returncode == 0, res.stderr
        seen = run_outputs(out, "t")
        assert "probe-done" in seen, seen
        assert answer not in seen, seen
        listed = seen.split("listed:")[-1]
        for name in ("answers.txt", "tasks.yaml", "top.yaml", "repo", "out"):
            assert name not in listed, (name, seen)
        shutil.rmtree(out)
