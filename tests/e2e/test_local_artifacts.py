"""`artifacts:` on a host run (backend local): copied out of the workspace after the
check, as from a container, by the runner's own reads: a link out of the workspace and
`.git` are refused by name, a missing path is a note, nothing stops the run."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli, shell
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_message


def test_a_host_run_copies_its_artifacts_out_after_the_check(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "a\n"})
    (tmp_path / "secret.txt").write_text("host file outside the workspace\n")

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo made > made.txt; mkdir -p logs/deep; echo x > logs/deep/x.log", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults:\n"
        "  model: fake/m\n"
        "  environment: {artifacts: [made.txt, logs, report.xml, out.txt, .git/config, none]}\n"
        "tasks:\n"
        f"  - id: art\n    repo: '{repo}'\n    prompt: work\n"
        # The check makes one artifact (after the commit) and a link out of the workspace.
        f"    check: echo ok > report.xml && ln -s {tmp_path}/secret.txt out.txt\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    [run] = json.loads((out / "report.json").read_text())["runs"]
    assert run["status"] == "completed" and run["check"]["passed"] is True, run["error"]
    env = run["environment"]
    assert env["backend"] == "local" and env["artifacts"] == "artifacts/art"
    assert env["image"] is None and env["patch"] is None
    got = out / "artifacts" / "art"
    assert (got / "made.txt").read_text() == "made\n"
    assert (got / "logs" / "deep" / "x.log").read_text() == "x\n"
    assert (got / "report.xml").read_text() == "ok\n"  # made by the check
    assert not (got / "out.txt").exists() and not (got / ".git").exists()
    assert "host file" not in "".join(p.read_text() for p in got.rglob("*") if p.is_file())
    error = run["error"] or ""
    assert "artifact out.txt not copied" in error and "artifact .git/config not copied" in error
    assert "artifact none not copied: nothing is there" in error
    assert sorted(run["result"]["files"]) == ["logs/deep/x.log", "made.txt"]  # not the check's
    assert "Environment" not in (out / "summary.md").read_text()  # no container column
