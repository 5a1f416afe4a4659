"""A report directory is data from wherever it came (a CI artifact, an edited file): the
paths it names are never followed out of its own folders, nothing it holds is printed in
a form a GitHub Actions log would obey, and its claims alone never get a branch deleted.

Every test drives the real CLI in a subprocess on a real batch (scripted loopback model,
real git repository)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import last_user_text, per_conversation, reply_message
from tests.support.security import KEY, cli, sh, tasks

SECRET = "host-secret-7f3a9c"
"""The content of a file on the merging machine that no report may carry."""


def _batch(loopback: ThreadFactory, tmp: Path, repo: Path, out: Path, answer: str = "ok") -> Path:
    """One run that changes a file: a branch, a patch and an events file."""
    srv = loopback(
        per_conversation(
            lambda req, i: sh("echo x > note.txt", f"c{i}") if i == 0 else reply_message(answer)
        )
    )
    tf = tasks(tmp, srv.base_url, repo, ["a"])
    res = cli("run", tf, "--out", out, env={"GITHUB_ACTIONS": ""})
    assert res.returncode == 0, res.stderr
    return out


def _next_second() -> None:
    """Wait into the next whole second of the clock: reflog times are whole seconds, and
    what starts now must stand after everything already written (1.1 s was the most)."""
    time.sleep(1.01 - time.time() % 1)


def _edit(out: Path, change: Any) -> dict[str, Any]:
    path = out / "report.json"
    rep: dict[str, Any] = json.loads(path.read_text())
    change(rep)
    path.write_text(json.dumps(rep))
    return rep


def _everything_written(top: Path) -> str:
    return "".join(
        p.read_text(errors="replace") for p in top.rglob("*") if p.is_file() and not p.is_symlink()
    )


# 1. Every file a report names is data, never a path to follow.


def _bad_paths(tmp: Path) -> list[tuple[str, str, str]]:
    secret = tmp / "secret.txt"
    return [
        ("patch", str(secret), "result.patch"),
        ("patch", "../secret.txt", "result.patch"),
        ("patch", "patches/../../secret.txt", "result.patch"),
        ("patch", "threads/a.jsonl", "result.patch"),
        ("patch", "patches/link.patch", "result.patch"),
        ("events", str(secret), "events_file"),
        ("events", "threads/../../secret.txt", "events_file"),
        ("events", "threads/sub/e.jsonl", "events_file"),
    ]


def test_a_report_cannot_name_a_file_outside_its_folders(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """An absolute path, `..`, another folder or a link as `result.patch` or `events_file`
    is an input error naming the file and field for merge, compare and branches alike;
    nothing of the host file reaches the merged page."""
    repo = make_git_repo(tmp_path / "repo")
    good = _batch(loopback_thread, tmp_path, repo, tmp_path / "good")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    for n, (kind, value, field) in enumerate(_bad_paths(tmp_path)):
        shard = tmp_path / f"s{n}"
        shutil.copytree(good, shard)
        if value == "patches/link.patch":
            os.symlink(tmp_path / "secret.txt", shard / value)
        if value == "threads/sub/e.jsonl":
            (shard / "threads" / "sub").symlink_to(tmp_path, target_is_directory=True)
            os.link(tmp_path / "secret.txt", tmp_path / "e.jsonl")

        def change(rep: dict[str, Any], kind: str = kind, value: str = value) -> None:
            t = rep["runs"][0]
            if kind == "patch":
                t["result"]["patch"] = value
            else:
                t["events_file"] = value

        _edit(shard, change)
        where = f"{shard}/report.json: runs[0].{field}: "
        merged = tmp_path / f"m{n}"
        for args in (
            ("report", "merge", shard, "--out", merged),
            ("report", "compare", good, shard),
            ("report", "branches", shard, "--repo", repo),
        ):
            res = cli(*args)
            shown = (value, args[1])
            assert res.returncode == 2, (shown, res.stdout, res.stderr)
            assert where in res.stderr, (shown, res.stderr)
            assert "relative path under" in res.stderr, (shown, res.stderr)
            assert "Traceback" not in res.stderr and SECRET not in res.stdout + res.stderr
            assert not merged.exists() or SECRET not in _everything_written(merged), shown
    # A good shard still merges, with its transcript and patch on the page.
    ok = cli("report", "merge", good, "--out", tmp_path / "ok")
    assert ok.returncode == 0, ok.stderr
    page = (tmp_path / "ok" / "report.html").read_text()
    assert "+x" in page and "echo x \\u003e note.txt" in page  # in the viewer's JSON


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_no_link_is_read_where_a_report_file_should_be(
    loopback_thread: ThreadFactory, tmp_path: Path, link: str
) -> None:
    """The names are right (`patches/a.patch`), but the files are links to a host file:
    merge refuses them, naming the field, and writes nothing."""
    repo = make_git_repo(tmp_path / "repo")
    shard = _batch(loopback_thread, tmp_path, repo, tmp_path / "shard")
    (tmp_path / "secret.txt").write_text(SECRET + "\n")
    rep = json.loads((shard / "report.json").read_text())
    t = rep["runs"][0]
    for name in (t["result"]["patch"], t["events_file"]):
        (shard / name).unlink()
        (os.symlink if link == "symbolic" else os.link)(tmp_path / "secret.txt", shard / name)
    res = cli("report", "merge", shard, "--out", tmp_path / "m")
    assert res.returncode == 2, res.stderr
    assert f"{shard}/report.json: runs[0].result.patch: " in res.stderr, res.stderr
    assert f"{shard}/report.json: runs[0].events_file: " in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "m").exists() or SECRET not in _everything_written(tmp_path / "m")


# 2. Nothing printed from a report or a run can become a workflow command.

HOSTILE = "ok\n::error::planted\n  ::add-mask::secret\r::warning::cr\n##[error]legacy"


def _strings(obj: Any) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        obj = list(obj.values())
    return [s for v in obj for s in _strings(v)] if isinstance(obj, list) else []


def _no_workflow_command(text: str) -> None:
    """No line but the progress display's own log groups is a workflow command."""
    for line in text.replace("\r", "\n").split("\n"):
        if line.startswith("::group::") or line == "::endgroup::":
            continue
        assert not line.lstrip().startswith("::"), repr(line)
        assert "##[" not in line, repr(line)


def test_no_printer_lets_a_report_or_run_issue_workflow_commands(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Branch names, task ids, models and answers from a batch or an edited report are
    printed escaped by every subcommand, under Actions or not."""
    repo = make_git_repo(tmp_path / "repo")
    out = _batch(loopback_thread, tmp_path, repo, tmp_path / "out", answer=HOSTILE)
    for actions in ("true", ""):
        again = cli(
            "run", tmp_path / "tasks.yaml", "--out", tmp_path / f"o{actions}",
            env={"GITHUB_ACTIONS": actions},
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        _no_workflow_command(again.stdout + again.stderr)
        assert "planted" in again.stdout  # shown, but inert

    def change(rep: dict[str, Any]) -> None:
        t = rep["runs"][0]
        t["result"]["branch"] = "x\n::error::planted\n::add-mask::secret\n##[error]legacy"
        t["model"] = "fake/m\n::error::model"
        t["id"] = t["run"] = "a\n::error::id"
        t["error"] = HOSTILE
        rep["task_file"] = "t.yaml\n::error::task-file"

    _edit(out, change)
    for args in (
        ("report", "branches", out, "--repo", repo),
        ("report", "branches", out, "--repo", repo, "--delete"),
        ("report", "merge", out, "--out", tmp_path / "merged"),
        ("report", "compare", out, out),
        ("report", "compare", out, out, "--format", "json"),
    ):
        res = cli(*args, env={"GITHUB_ACTIONS": "true"})
        assert res.returncode in (0, 1), (args, res.stderr)
        _no_workflow_command(res.stdout + res.stderr)
    # The JSON form still parses to the report's own text.
    data = json.loads(cli("report", "compare", out, out, "--format", "json").stdout)
    assert "fake/m\n::error::model" in _strings(data)
    # An error that quotes the report is escaped too.
    _edit(out, lambda rep: rep.update({"\n::error::key": 1}))
    bad = cli("report", "branches", out, "--repo", repo)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    _no_workflow_command(bad.stdout + bad.stderr)


# 3. Which branches are the batch's own: facts the repository holds.


def test_a_report_copying_an_older_batch_cannot_delete_its_branch(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Batch B's report is edited to carry batch A's run id and A's entry (or A's id as a
    shard): A's untouched branch is `foreign` and kept, reflog and all; B's own branch,
    from B's own report, is still deleted."""
    repo = make_git_repo(tmp_path / "repo")
    a = _batch(loopback_thread, tmp_path, repo, tmp_path / "a")
    a_rep = json.loads((a / "report.json").read_text())
    a_entry = a_rep["runs"][0]
    a_branch = a_entry["result"]["branch"]
    _next_second()  # reflog times are whole seconds: B starts in a later one
    b = _batch(loopback_thread, tmp_path, repo, tmp_path / "b")
    b_branch = json.loads((b / "report.json").read_text())["runs"][0]["result"]["branch"]
    assert a_branch != b_branch

    forged = [tmp_path / "f1", tmp_path / "f2"]
    for f in forged:
        shutil.copytree(b, f)
    _edit(forged[0], lambda rep: rep.update(batch_id=a_rep["batch_id"], runs=[a_entry]))
    _edit(
        forged[1],
        lambda rep: rep.update(shards=[a_rep["batch_id"]], runs=[*rep["runs"], a_entry]),
    )
    b_id = json.loads((b / "report.json").read_text())["batch_id"]
    for f, pin in zip(forged, ([], ["--batch-id", b_id]), strict=True):
        # forged[1] holds two ids: the user names the batch they mean (B).
        res = cli("report", "branches", f, "--repo", repo, "--delete", *pin)
        assert res.returncode == 0, res.stderr
        line = next(x for x in res.stdout.splitlines() if x.startswith(a_branch + " "))
        assert " foreign (" in line and line.endswith(", kept"), line
        assert (
            git(repo, "rev-parse", f"refs/heads/{a_branch}").strip() == a_entry["result"]["commit"]
        )
        assert "runner: result" in git(repo, "reflog", "show", f"refs/heads/{a_branch}")
    # forged[1] also names B's own branch, which is B's: deleted.
    assert b_branch not in git(repo, "branch", "--format=%(refname:short)")
    # A's own report still deletes A's branch.
    own = cli("report", "branches", a, "--repo", repo, "--delete")
    assert own.returncode == 0 and own.stdout.rstrip().endswith(" deleted"), own.stdout
    assert a_branch not in git(repo, "branch", "--format=%(refname:short)")


def test_a_branch_the_user_made_on_a_runner_commit_is_not_the_batchs(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """`runner/<id>/a-2`, made with `git branch` at the run's commit, looks like a name
    the runner would pick when `runner/<id>/a` was taken, and the edited report claims
    it; its reflog says the user made it, so it is kept."""
    repo = make_git_repo(tmp_path / "repo")
    out = _batch(loopback_thread, tmp_path, repo, tmp_path / "out")
    rep = json.loads((out / "report.json").read_text())
    made = rep["runs"][0]["result"]["branch"]
    twin = f"{made}-2"
    git(repo, "branch", twin, made)
    _edit(out, lambda r: r["runs"][0]["result"].update(branch=twin))
    res = cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(twin + " ") and "foreign" in res.stdout, res.stdout
    assert twin in git(repo, "branch", "--format=%(refname:short)")


@pytest.mark.parametrize("trailer", ["Runner-Run: 0123456789ab", "Runner-Run-Not: x", ""])
def test_a_commit_without_the_runs_trailer_is_not_the_batchs(
    loopback_thread: ThreadFactory, tmp_path: Path, trailer: str
) -> None:
    """A commit made to look like the runner's (its identity, on the run's base) but
    whose message does not name the batch's run is not the batch's."""

    repo = make_git_repo(tmp_path / "repo")
    out = _batch(loopback_thread, tmp_path, repo, tmp_path / "out")
    rep = json.loads((out / "report.json").read_text())
    t = rep["runs"][0]
    made, base = t["result"]["branch"], t["workspace"]["base"]
    ident = {
        "GIT_AUTHOR_NAME": "runner",
        "GIT_AUTHOR_EMAIL": "runner@localhost",
        "GIT_COMMITTER_NAME": "runner",
        "GIT_COMMITTER_EMAIL": "runner@localhost",
    }
    tree = git(repo, "rev-parse", f"{made}^{{tree}}").strip()

    fake = subprocess.run(
        ["git", "commit-tree", "-p", base, "-m", f"runner: a with fake/m: completed\n\n{trailer}",
         tree],
        cwd=repo, env={**os.environ, **ident}, check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    git(repo, "update-ref", "-d", f"refs/heads/{made}")
    subprocess.run(
        ["git", "update-ref", "--create-reflog", "-m", "runner: result", f"refs/heads/{made}",
         fake],
        cwd=repo, env={**os.environ, **ident}, check=True,
    )  # fmt: skip
    # The branch was remade after the batch: the report's window is stretched to cover it.
    _edit(
        out,
        lambda r: (
            r["runs"][0]["result"].update(commit=fake),
            r.update(finished_at="2999-01-01T00:00:00+00:00"),
        ),
    )
    res = cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    assert "foreign" in res.stdout and res.stdout.rstrip().endswith(", kept"), res.stdout
    assert made in git(repo, "branch", "--format=%(refname:short)")


def test_a_report_naming_an_older_batch_as_a_shard_deletes_nothing_of_it(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """B's report gains A's run id in `shards`, A's entry and A's start: the report now
    speaks for two batches, so `--delete` needs each id named with `--batch-id`. Without
    it nothing is deleted; with B's id alone A's branch is kept, reflog and all."""
    repo = make_git_repo(tmp_path / "repo")
    a = _batch(loopback_thread, tmp_path, repo, tmp_path / "a")
    a_rep = json.loads((a / "report.json").read_text())
    a_entry = a_rep["runs"][0]
    a_branch, a_commit = a_entry["result"]["branch"], a_entry["result"]["commit"]
    _next_second()
    b = _batch(loopback_thread, tmp_path, repo, tmp_path / "b")
    b_rep = json.loads((b / "report.json").read_text())
    b_branch = b_rep["runs"][0]["result"]["branch"]
    _edit(
        b,
        lambda rep: rep.update(
            shards=[a_rep["batch_id"]],
            runs=[*rep["runs"], a_entry],
            started_at=a_rep["started_at"],
        ),
    )

    def branches() -> str:
        return git(repo, "branch", "--format=%(refname:short)")

    res = cli("report", "branches", b, "--repo", repo, "--delete")
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "--batch-id" in res.stderr and a_rep["batch_id"] in res.stderr, res.stderr
    assert a_branch in branches() and b_branch in branches()
    res = cli("report", "branches", b, "--repo", repo, "--delete", "--batch-id", b_rep["batch_id"])
    assert res.returncode == 0, res.stderr
    line = next(x for x in res.stdout.splitlines() if x.startswith(a_branch + " "))
    assert " foreign (" in line and "--batch-id" in line and line.endswith(", kept"), line
    assert git(repo, "rev-parse", f"refs/heads/{a_branch}").strip() == a_commit
    assert "runner: result" in git(repo, "reflog", "show", f"refs/heads/{a_branch}")
    assert b_branch not in branches()
    # An id the report does not hold is an input error, not a wider net.
    bad = cli("report", "branches", b, "--repo", repo, "--delete", "--batch-id", "0123456789ab")
    assert bad.returncode == 2 and "--batch-id" in bad.stderr, bad.stderr


def test_a_merged_report_of_two_shards_deletes_its_own_branches(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The legitimate multi-batch report: two shards merged, each shard's id named."""
    repo = make_git_repo(tmp_path / "repo")
    srv = loopback_thread(
        per_conversation(
            lambda req, i: sh("echo x > note.txt", f"c{i}") if i == 0 else reply_message("ok")
        )
    )
    tf = tasks(tmp_path, srv.base_url, repo, ["a", "b"])
    dirs = [tmp_path / "s1", tmp_path / "s2"]
    for k, d in enumerate(dirs, 1):
        res = cli("run", tf, "--out", d, "--shard", f"{k}/2")
        assert res.returncode == 0, res.stderr
    merged = tmp_path / "m"
    assert cli("report", "merge", *dirs, "--out", merged).returncode == 0
    rep = json.loads((merged / "report.json").read_text())
    assert len(rep["shards"]) == 2
    flags = [x for i in rep["shards"] for x in ("--batch-id", i)]
    res = cli("report", "branches", merged, "--repo", repo, "--delete", *flags)
    assert res.returncode == 0, res.stderr
    assert [x.split()[-1] for x in res.stdout.splitlines()] == ["deleted", "deleted"]
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


def test_a_resumed_batch_deletes_the_branches_of_both_sessions(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """Task a finishes in the first session, b in the resumed one (a later second): one
    batch id, so both branches are the report's own."""
    repo = make_git_repo(tmp_path / "repo")
    state = {"hang": True}

    def script(req: Any, i: int) -> Any:
        if last_user_text(req) == "b" and state["hang"]:
            return reply_message("late").but(delay_s=120)
        return sh("echo x > note.txt", f"c{i}") if i == 0 else reply_message("ok")

    srv = loopback_thread(per_conversation(script))
    tf = tasks(tmp_path, srv.base_url, repo, ["a", "b"])
    out = tmp_path / "o"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "run", str(tf), "--out", str(out)],
        env={**os.environ, "FAKE_API_KEY": KEY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while "runner/" not in git(repo, "branch", "--format=%(refname:short)") or not any(
        last_user_text(r) == "b" for r in srv.requests
    ):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    _next_second()
    state["hang"] = False
    res = cli("run", tf, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    res = cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    assert [x.split()[-1] for x in res.stdout.splitlines()] == ["deleted", "deleted"], res.stdout
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]


# 4. report.json and the folders merge copies are read as data too.


def _report_commands(shard: Path, good: Path, repo: Path, tmp: Path) -> list[tuple[Any, ...]]:
    return [
        ("report", "merge", shard, "--out", tmp / "merged"),
        ("report", "compare", good, shard),
        ("report", "branches", shard, "--repo", repo),
    ]


@pytest.mark.parametrize("kind", ["fifo", "zero", "host-json", "huge"])
def test_report_json_is_a_plain_bounded_file(
    loopback_thread: ThreadFactory, tmp_path: Path, kind: str
) -> None:
    """A FIFO, a link to /dev/zero or to a host JSON file, or a file over the cap, as
    `report.json`: each command ends at once with an input error naming the file."""
    repo = make_git_repo(tmp_path / "repo")
    good = _batch(loopback_thread, tmp_path, repo, tmp_path / "good")
    shard = tmp_path / "shard"
    shutil.copytree(good, shard)
    target = shard / "report.json"
    target.unlink()
    host = tmp_path / "host.json"
    host.write_text(json.dumps({"schema_version": SECRET}))
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "zero":
        target.symlink_to("/dev/zero")
    elif kind == "host-json":
        target.symlink_to(host)
    else:
        with target.open("wb") as f:
            f.truncate(1 << 30)
    for args in _report_commands(shard, good, repo, tmp_path):
        res = cli(*args, timeout=30)
        assert res.returncode == 2, (kind, args[1], res.stderr)
        assert f"{target}: " in res.stderr, (kind, args[1], res.stderr)
        assert "Traceback" not in res.stderr and "MemoryError" not in res.stderr
        assert SECRET not in res.stdout + res.stderr
        assert kind != "huge" or "is larger than 256.0 MiB" in res.stderr, res.stderr


def _rss_of(*args: str | Path) -> tuple[int, subprocess.CompletedProcess[str]]:
    """Run the CLI in a child and return its peak resident memory in KiB."""
    probe = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-m', 'runner', *sys.argv[1:]])\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        "sys.exit(r.returncode)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", probe, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "FAKE_API_KEY": KEY},
    )
    return int(res.stdout.split()[-1]), res


def test_merge_copies_a_large_patch_in_bounded_memory(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A 400 MB patch (the one the report names) is streamed into the merged directory,
    whole, without the merge holding it in memory."""
    repo = make_git_repo(tmp_path / "repo")
    shard = _batch(loopback_thread, tmp_path, repo, tmp_path / "shard")
    name = json.loads((shard / "report.json").read_text())["runs"][0]["result"]["patch"]
    size = 400 << 20
    with (shard / name).open("r+b") as f:
        f.truncate(size)
    rss, res = _rss_of("report", "merge", shard, "--out", tmp_path / "m")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "m" / name).stat().st_size == size
    assert rss < 250 * 1024, rss


def test_merge_refuses_special_files_in_the_folders_it_copies(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """A FIFO in threads/ is not skipped in silence: the merge names it, exit 2, and
    writes nothing."""
    repo = make_git_repo(tmp_path / "repo")
    shard = _batch(loopback_thread, tmp_path, repo, tmp_path / "shard")
    os.mkfifo(shard / "threads" / "extra.jsonl")
    res = cli("report", "merge", shard, "--out", tmp_path / "m", timeout=30)
    assert res.returncode == 2, res.stderr
    assert f"{shard}/threads/extra.jsonl: threads/extra.jsonl: " in res.stderr, res.stderr
    assert "FIFO" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "m").exists()


def test_a_linked_folder_in_a_report_is_explained_as_a_report_folder(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The message for a linked folder speaks of a report directory, not a workspace."""
    repo = make_git_repo(tmp_path / "repo")
    shard = _batch(loopback_thread, tmp_path, repo, tmp_path / "shard")
    (tmp_path / "elsewhere").mkdir()
    (shard / "threads" / "sub").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _edit(shard, lambda rep: rep["runs"][0].update(events_file="threads/sub/e.jsonl"))
    res = cli("report", "merge", shard, "--out", tmp_path / "m")
    assert res.returncode == 2, res.stderr
    assert "workspace" not in res.stderr, res.stderr
    assert "links in a report directory" in res.stderr, res.stderr
