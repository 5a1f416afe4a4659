"""`runner report branches --delete` removes only what the batch made, whatever the
report directory claims."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli, shell, write_tasks
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import per_conversation, reply_message


def test_delete_spares_worktrees_forged_entries_and_foreign_commits(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo x > note.txt", f"c{i}") if i == 0 else reply_message("ok")
        )
    )
    repo = make_git_repo(tmp_path)
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "".join(f"  - {{id: {n}, prompt: go, repo: .}}\n" for n in ("a", "b", "c")),
    )
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    path = out / "report.json"
    rep = json.loads(path.read_text())
    made = {t["id"]: t["result"]["branch"] for t in rep["runs"]}
    # b is checked out in a linked worktree: deleting it would orphan that worktree.
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), made["b"])
    # c's entry is edited to name the user's `main` (and its commit), as a forged
    # artifact would; a second forged entry names a branch inside the batch's namespace
    # that the user made, and a third claims a run id of its own.
    main = git(repo, "rev-parse", "main").strip()
    mine = made["a"].rsplit("/", 1)[0] + "/mine"
    git(repo, "branch", mine, "main")
    rep["runs"][2]["result"].update(branch="main", commit=main)
    forged = json.loads(json.dumps(rep["runs"][0]))
    forged["result"].update(branch=mine, commit=main)
    forged["workspace"]["base"] = git(repo, "rev-parse", "main~0").strip()
    # Entries of their own: a report lists each run once (a copy is refused as such).
    forged.update(run="forged", fingerprint="f" * 16)
    rep["runs"].append(forged)
    other = json.loads(json.dumps(rep["runs"][0]))
    other["result"]["branch"] = "release"
    other.update(run="other", fingerprint="e" * 16)
    rep["runs"].append(other)
    rep["shards"] = ["release"]
    git(repo, "branch", "release", rep["runs"][0]["result"]["commit"])
    path.write_text(json.dumps(rep))

    res = run_cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(made["a"] + " ") and lines[0].endswith(" deleted")
    assert lines[1].startswith(made["b"] + " ")
    assert lines[1].endswith(" checked-out (in a worktree), kept")
    assert lines[2].startswith("main ") and lines[2].endswith(", kept") and "foreign" in lines[2]
    assert lines[3].startswith(mine + " ") and "not a commit the runner made" in lines[3]
    assert lines[4].startswith("release ") and "foreign" in lines[4]
    assert "1 deleted" in res.stderr and "4 foreign" not in res.stderr
    left = set(git(repo, "branch", "--format=%(refname:short)").split())
    assert left == {"main", made["b"], made["c"], mine, "release"}
    assert git(repo, "rev-parse", "main").strip() == main
    # c's real branch was never named by the edited report: untouched, listed nowhere.
    assert made["c"] not in res.stdout


def test_a_users_branch_on_a_runner_commit_is_not_the_batchs(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The user points `keep/<run id>` at a run's commit and an edited report names it
    instead of the run's branch: same commit, the batch's id in the name, the runner's
    identity on the commit, yet not a name the batch made (it does not name the run)."""
    srv = loopback_thread(
        per_conversation(
            lambda req, i: shell("echo x > note.txt", f"c{i}") if i == 0 else reply_message("ok")
        )
    )
    repo = make_git_repo(tmp_path)
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: go, repo: .}\n")
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    path = out / "report.json"
    rep = json.loads(path.read_text())
    made = rep["runs"][0]["result"]["branch"]
    keep = f"keep/{rep['batch_id']}"
    git(repo, "branch", keep, made)
    rep["runs"][0]["result"]["branch"] = keep
    path.write_text(json.dumps(rep))
    res = run_cli("report", "branches", out, "--repo", repo, "--delete")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(keep + " ") and "does not name this run" in res.stdout
    left = set(git(repo, "branch", "--format=%(refname:short)").split())
    assert {keep, made} <= left
