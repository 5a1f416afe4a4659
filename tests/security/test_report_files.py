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
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ThreadFactory, make_git_repo
from tests.loopback import per_conversation, reply_message
from tests.security.helpers import cli, sh, tasks
from tests.test_results import git

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
            t = rep["tasks"][0]
            if kind == "patch":
                t["result"]["patch"] = value
            else:
                t["events_file"] = value

        _edit(shard, change)
        where = f"{shard}/report.json: tasks[0].{field}: "
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
    assert "+x" in page and "echo x &gt; note.txt" in page


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
    t = rep["tasks"][0]
    for name in (t["result"]["patch"], t["events_file"]):
        (shard / name).unlink()
        (os.symlink if link == "symbolic" else os.link)(tmp_path / "secret.txt", shard / name)
    res = cli("report", "merge", shard, "--out", tmp_path / "m")
    assert res.returncode == 2, res.stderr
    assert f"{shard}/report.json: tasks[0].result.patch: " in res.stderr, res.stderr
    assert f"{shard}/report.json: tasks[0].events_file: " in res.stderr, res.stderr
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
        t = rep["tasks"][0]
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
    a_entry = a_rep["tasks"][0]
    a_branch = a_entry["result"]["branch"]
    time.sleep(1.1)  # reflog times are whole seconds: B starts in a later one
    b = _batch(loopback_thread, tmp_path, repo, tmp_path / "b")
    b_branch = json.loads((b / "report.json").read_text())["tasks"][0]["result"]["branch"]
    assert a_branch != b_branch

    forged = [tmp_path / "f1", tmp_path / "f2"]
    for f in forged:
        shutil.copytree(b, f)
    _edit(forged[0], lambda rep: rep.update(run_id=a_rep["run_id"], tasks=[a_entry]))
    _edit(
        forged[1],
        lambda rep: rep.update(shards=[a_rep["run_id"]], tasks=[*rep["tasks"], a_entry]),
    )
    for f in forged:
        res = cli("report", "branches", f, "--repo", repo, "--delete")
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
    made = rep["tasks"][0]["result"]["branch"]
    twin = f"{made}-2"
    git(repo, "branch", twin, made)
    _edit(out, lambda r: r["tasks"][0]["result"].update(branch=twin))
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
    t = rep["tasks"][0]
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
            r["tasks"][0]["result"].update(commit=fake),
            r.update(finished_at="2999-01-01T00:00:00+00:00"),
        ),
    )
    res = cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    assert "foreign" in res.stdout and res.stdout.rstrip().endswith(", kept"), res.stdout
    assert made in git(repo, "branch", "--format=%(refname:short)")
