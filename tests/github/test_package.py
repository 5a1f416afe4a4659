"""The GitHub Action, run locally step by step (the harness is tests/support/gha.py); the
example workflows end to end are in tests/e2e/test_workflows.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.github import (
    MARKER,
    main,
    readme_with_docs,
    trust_problems,
)
from runner.github.task_input import inline_tasks
from runner.reports.fmt import percent, tokens
from runner.reports.model import Report
from tests.support import golden_files
from tests.support.cli import run_cli
from tests.support.fixtures import ThreadFactory, make_git_repo
from tests.support.gha import (
    ACTION,
    ACTION_DIR,
    ACTION_REF,
    API_KEY,
    BIN,
    FORK_TOKEN,
    GITHUB_TOKEN,
    GOLDEN,
    PR_WORKFLOW,
    REPO,
    ROOT,
    FakeGitHub,
    github_remote,
    parse_output_file,
    run_action,
)
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    last_user_text,
    per_conversation,
    reply_custom_tool_call,
    reply_function_call,
    reply_message,
)
from tests.support.threads import PR_EVENT

# ------------------------------------------------------------------ the scripted model


def scripted_model() -> Callable[[RecordedRequest, int], Reply]:
    """review: looks at the environment (to prove secrets are gone), then answers with
    Markdown that tries links, images, mentions and a fence break; lint: fails its check;
    bump: adds a file (a branch)."""
    tasks: dict[Any, str] = {}

    def script(req: RecordedRequest, turn: int) -> Reply:
        if turn == 0:
            tasks[req.prompt_cache_key] = last_user_text(req).split()[0]
        task = tasks[req.prompt_cache_key]
        if task == "review" and turn == 0:
            return reply_function_call(
                "shell",
                {
                    "command": [
                        "bash",
                        "-c",
                        "echo key=$OPENAI_API_KEY token=$GITHUB_TOKEN; env | sort",
                    ]
                },
                call_id="env",
            )
        if task == "review":
            return reply_message(
                "Looks good overall.\n\n```\nclosed fence\n```\n"
                "![pixel](https://evil.test/x.png) ping @octocat <b>bold</b> | pipe"
            )
        if task == "bump" and turn == 0:
            return reply_custom_tool_call(
                "apply_patch",
                "*** Begin Patch\n*** Add File: bumped.txt\n+v2\n*** End Patch",
                call_id="p",
            )
        return reply_message(f"{task}: done")

    return script


def write_tasks(path: Path, base_url: str, repo: Path, tasks: str) -> Path:
    path.write_text(
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{base_url}', env_key: OPENAI_API_KEY}}\n"
        "defaults:\n  model: fake/m\n  apply_patch_tool: freeform\n"
        f"  sandbox: workspace-write\n"
        f"tasks:\n{tasks.replace('REPO', str(repo))}"
    )
    return path


def assert_no_canary(files: list[Path], *texts: str) -> None:
    for path in files:
        data = path.read_bytes()
        for canary in (API_KEY, GITHUB_TOKEN):
            assert canary.encode() not in data, f"{canary[:8]}... leaked into {path}"
    for text in texts:
        assert API_KEY not in text and GITHUB_TOKEN not in text


def normalise_comment(body: str, report: Report) -> str:
    """Token counts depend on the prompt (today's date, the temp path): replace them."""
    for t in report.runs:
        body = body.replace(
            f"| {tokens(t.usage.total_tokens)} | {percent(t.usage.cache_hit_ratio)} |",
            "| <tokens> | <cached> |",
        )
    body = re.sub(r"[\d,]+ tokens, [\d,]+ cached \([\d.]+%\)", "<tokens> tokens, <cached>", body)
    return body.replace(report.batch_id, "<run-id>")


# ------------------------------------------------------------------ tests


def test_pull_request_run_outputs_summary_comment_and_no_secrets(
    loopback_thread: ThreadFactory, github: FakeGitHub, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(scripted_model()))
    workspace = make_git_repo(tmp_path / "ws", {"README.md": "# widgets\n"})
    tasks = write_tasks(
        tmp_path / "pr.yaml",
        srv.base_url,
        workspace,
        "  - {id: review, prompt: review this change, repo: REPO}\n"
        "  - {id: lint, prompt: lint the code, repo: REPO, check: 'exit 3'}\n",
    )
    # Comments already on the PR: 120 others (ours must be found past the first page) and
    # one by a person that quotes our marker (must never be edited).
    for i in range(120):
        github.comments[i + 1] = {
            "id": i + 1,
            "issue": 7,
            "body": f"comment {i}",
            "user": {"login": "someone"},
        }
    github.comments[500] = {
        "id": 500,
        "issue": 7,
        "body": f"{MARKER} quoted",
        "user": {"login": "mallory"},
    }
    inputs = {"task-file": str(tasks), "api-key": API_KEY, "models": "fake/m"}
    job_env = {"GITHUB_TOKEN": GITHUB_TOKEN, "PUSH_TOKEN": GITHUB_TOKEN}

    first = run_action(
        tmp_path / "gha1",
        workspace,
        inputs,
        event_name="pull_request",
        event=PR_EVENT,
        api_url=github.url,
        job_env=job_env,
    )

    # The run itself: one task failed its check, so the action fails at its last step,
    # after the outputs, the comment and the upload have run.
    assert first.step_outputs["run"]["exit-code"] == "1", first.logs
    assert first.outcomes["finish"] == "failure(1)" and first.failed
    assert first.outcomes["report"] == first.outcomes["comment"] == "success", first.logs
    assert first.outcomes["pull-requests"] == "skipped"
    report = Report.model_validate_json((workspace / "runner-out/report.json").read_text())
    t = report.totals
    assert first.outputs["runs"] == "2" and first.outputs["passed"] == "1"
    assert first.outputs["failed"] == "1" and first.outputs["exit-code"] == "1"
    assert first.outputs["tokens"] == str(t.usage.total_tokens) and t.usage.total_tokens > 0
    assert first.outputs["cached-tokens"] == str(t.usage.cached_tokens)
    assert t.usage.cache_hit_ratio is not None
    assert first.outputs["cache-hit-ratio"] == f"{t.usage.cache_hit_ratio:.4f}"
    assert first.outputs["cost"] == ""  # no price for fake/m: unknown, not zero
    assert json.loads(first.outputs["branches"]) == {}
    assert first.outputs["report"] == "runner-out/report.json"
    assert first.outputs["conclusion"] == "failure" and first.outputs["notice"] == ""
    assert first.outputs["final-message"].startswith("## review\n\nLooks good overall.")
    assert "## lint\n\nlint: done" in first.outputs["final-message"]

    # The step summary is the runner's summary.md.
    summary = (tmp_path / "gha1" / "step-summary.md").read_text()
    assert (workspace / "runner-out/summary.md").read_text() in summary

    # The API key reached the model server (and only as the bearer key); a PR event made
    # every task read-only.
    assert srv.requests and all(
        r.headers["authorization"] == f"Bearer {API_KEY}" for r in srv.requests
    )
    assert all("`sandbox_mode` is `read-only`" in json.dumps(r.body) for r in srv.requests)

    # One comment, created once; rendered as the golden file shows.
    posts = github.calls("POST", r"/comments$")
    assert len(posts) == 1 and not github.calls("PATCH")
    ours = github.comments[max(github.comments)]
    assert ours["body"].startswith(MARKER)
    golden_files.check_golden(GOLDEN / "pr-comment.md", normalise_comment(ours["body"], report))
    # The model's Markdown is rendered, made inert: the outside image is its address in
    # code, the mention notifies nobody, the HTML is text (tests/test_safe_markdown.py).
    assert "[image: pixel] (<code>https://evil.test/x.png</code>)" in ours["body"]
    assert "@octocat" not in ours["body"] and "<b>" not in ours["body"]
    assert "<pre><code>closed fence" in ours["body"]

    # A second push to the PR: the same comment is edited, nothing new is posted.
    second = run_action(
        tmp_path / "gha2",
        workspace,
        inputs,
        event_name="pull_request",
        event=PR_EVENT,
        api_url=github.url,
        job_env=job_env,
    )
    assert second.outcomes["comment"] == "success", second.logs
    assert len(github.calls("POST", r"/comments$")) == 1
    patches = github.calls("PATCH", r"/issues/comments/")
    assert [p[1].rsplit("/", 1)[1] for p in patches] == [str(ours["id"])]
    assert github.comments[500]["body"] == f"{MARKER} quoted"

    # No secret in anything GitHub keeps: the artifact, outputs, summary, comment.
    assert_no_canary(first.files + second.files, *(c["body"] for c in github.comments.values()))
    assert any(p.name.endswith(".jsonl") for p in first.files)  # the thread logs were scanned
    # The model saw the environment but neither secret.
    sent = "".join(r.raw.decode(errors="replace") for r in srv.requests)
    assert (
        "key= token=" in sent
        and API_KEY not in sent.replace(f"Bearer {API_KEY}", "")
        and GITHUB_TOKEN not in sent
    )


def test_nightly_pushes_branch_and_keeps_one_pr_per_task(
    loopback_thread: ThreadFactory, github: FakeGitHub, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(scripted_model()))
    server_url, origin = github_remote(tmp_path)
    workspace = make_git_repo(tmp_path / "ws")
    subprocess.run(
        ["git", "-C", str(workspace), "remote", "add", "origin", str(origin)], check=True
    )
    tasks = write_tasks(
        tmp_path / "nightly.yaml",
        srv.base_url,
        workspace,
        "  - {id: bump, prompt: bump the version, repo: REPO}\n",
    )
    inputs = {"task-file": str(tasks), "api-key": API_KEY, "push": "true"}
    event = {"schedule": "0 3 * * *", "repository": {"full_name": REPO, "default_branch": "main"}}
    runs = []
    for night in (1, 2):
        run = run_action(
            tmp_path / f"night{night}",
            workspace,
            inputs,
            event_name="schedule",
            event=event,
            api_url=github.url,
            job_env={"GITHUB_SERVER_URL": server_url},
        )
        assert not run.failed, run.logs
        assert run.outcomes["comment"] == "success"  # auto: not a PR event, no comment
        runs.append(run)
        # The outputs name the branch and PR that outlive the job, not the local result
        # branch.
        assert json.loads(run.outputs["branches"]) == {"bump": "runner/nightly/bump"}
        assert run.outputs["branch"] == "runner/nightly/bump"
        report = json.loads((workspace / "runner-out/report.json").read_text())
        sha = report["runs"][0]["result"]["commit"]
        # The PR branch moved to it, and only it reached the remote.
        assert remote_branches(origin) == {"runner/nightly/bump": sha}
        assert json.loads(run.outputs["pull-requests"]) == {
            "bump": f"https://github.test/{REPO}/pull/1"
        }
        assert run.outputs["pr-url"] == f"https://github.test/{REPO}/pull/1"
        assert run.outputs["conclusion"] == "success"
        assert run.outputs["final-message"] == "bump: done"
    assert not github.calls("POST", "/comments")
    # Not read-only: a schedule is not a PR event, the task file's sandbox holds.
    assert all("`sandbox_mode` is `workspace-write`" in json.dumps(r.body) for r in srv.requests)
    assert len(github.calls("POST", r"/pulls$")) == 1 and len(github.pulls) == 1
    assert len(github.calls("PATCH", r"/pulls/1$")) == 1
    pr = github.pulls[0]
    assert pr["head"] == "runner/nightly/bump" and pr["base"] == "main"
    assert pr["body"].startswith("<!-- runner:task:bump -->") and "bump: done" in pr["body"]
    assert not github.calls("DELETE")
    assert_no_canary([f for r in runs for f in r.files], pr["body"])


def remote_branches(bare: Path) -> dict[str, str]:
    """Branch -> commit of a bare repository (the test's "GitHub" remote)."""
    out = subprocess.run(
        [
            "git",
            "-C",
            str(bare),
            "for-each-ref",
            "--format=%(refname:short) %(objectname)",
            "refs/heads/",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(line.split() for line in out.splitlines())


def test_bad_task_file_fails_the_action_without_a_report(
    github: FakeGitHub, tmp_path: Path
) -> None:
    workspace = make_git_repo(tmp_path / "ws")
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ntasks: []\n")
    run = run_action(
        tmp_path / "gha",
        workspace,
        {"task-file": str(bad)},
        event_name="pull_request",
        event=PR_EVENT,
        api_url=github.url,
    )
    assert run.step_outputs["run"]["exit-code"] == "2"
    assert run.outcomes["finish"] == "failure(2)"
    assert run.outcomes["report"] == run.outcomes["comment"] == "success"
    # Only the gate asked GitHub anything (whether alice may write).
    assert run.outputs["runs"] == "" and [c[1] for c in github.log] == [
        f"/repos/{REPO}/collaborators/alice/permission"
    ]
    assert "exited 2 before writing a report" in (tmp_path / "gha/step-summary.md").read_text()
    # The runner's error is an annotation, not a plain `error:` line.
    assert "::error title=runner::" in run.logs["run"] and "\nerror: " not in run.logs["run"]
    assert run.outputs["conclusion"] == "failure"


# ------------------------------------------------------------------ lint: action, workflows


def lint_project(tmp_path: Path) -> Path:
    """A copy of the action and every workflow where the examples use the action by its
    local path, so actionlint checks their `with:` against action.yml's inputs."""
    project = tmp_path / "project"
    (project / ".github/workflows").mkdir(parents=True)
    shutil.copytree(ACTION_DIR, project / "actions/run")
    workflows = sorted((ROOT / ".github/workflows").glob("*.yml"))
    workflows += sorted((ROOT / "examples/workflows").glob("*.yml"))
    for wf in workflows:
        text = wf.read_text().replace(ACTION_REF, "./actions/run")
        prefix = "examples-" if wf.parent.parent.name == "examples" else ""
        (project / ".github/workflows" / f"{prefix}{wf.name}").write_text(text)
    for n, block in enumerate(readme_workflows()):
        (project / ".github/workflows" / f"readme-{n}.yml").write_text(
            block.replace(ACTION_REF, "./actions/run")
        )
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    return project


def readme_workflows() -> list[str]:
    """The copy-paste workflows of the README's GitHub Actions section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## GitHub Actions\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)


def actionlint(project: Path, *files: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("actionlint", path=str(BIN))
    shellcheck = shutil.which("shellcheck", path=str(BIN))
    assert exe and shellcheck, "make setup installs actionlint and shellcheck (dev extra)"
    return subprocess.run(
        [exe, "-no-color", "-oneline", "-shellcheck", shellcheck, "-pyflakes", "", *files],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_actionlint_passes_on_every_workflow(tmp_path: Path) -> None:
    project = lint_project(tmp_path)
    names = sorted(p.name for p in (project / ".github/workflows").iterdir())
    assert {
        "ci.yml",
        "examples-pr.yml",
        "examples-pr-tasks.yml",
        "examples-benchmark-shards-cli.yml",
        "examples-nightly.yml",
        "examples-benchmark.yml",
        "readme-0.yml",
        "readme-1.yml",
        "readme-2.yml",
    } <= set(names)
    res = actionlint(project)
    assert res.returncode == 0, res.stdout + res.stderr


def test_actionlint_sees_a_wrong_input(tmp_path: Path) -> None:
    """The check above can fail: a misspelt input of our action is caught."""
    project = lint_project(tmp_path)
    wf = project / ".github/workflows/examples-nightly.yml"
    text = wf.read_text()
    assert "          tasks: |" in text
    wf.write_text(text.replace("          tasks: |", "          taks: |", 1))
    res = actionlint(project)
    assert res.returncode == 1 and "taks" in res.stdout


def action_as_workflow(action: dict[str, Any]) -> dict[str, Any]:
    """actionlint reads action.yml as a (broken) workflow, not as an action, so the
    composite steps are linted inside a reusable workflow with the same inputs: that
    checks their expressions, `uses:` inputs and, through shellcheck, every script."""
    inputs = {
        name: {"type": "string", "required": False, "default": ""} for name in action["inputs"]
    }
    return {
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": action["runs"]["steps"]}},
    }


def test_action_steps_pass_actionlint_and_shellcheck(tmp_path: Path) -> None:
    action = yaml.safe_load(ACTION.read_text())
    project = tmp_path / "p"
    (project / ".github/workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    wf = project / ".github/workflows/action.yml"
    wf.write_text(yaml.safe_dump(action_as_workflow(action), sort_keys=False))
    res = actionlint(project)
    assert res.returncode == 0, res.stdout + res.stderr
    # And it can fail: an unquoted variable in a script is a shellcheck finding.
    action["runs"]["steps"][0]["run"] = "echo $GITHUB_ACTION_PATH/x"
    wf.write_text(yaml.safe_dump(action_as_workflow(action), sort_keys=False))
    res = actionlint(project)
    assert res.returncode == 1 and "shellcheck" in res.stdout


def test_readme_documents_every_input_and_output() -> None:
    """README's input and output tables are action.yml's (`make action-docs`)."""
    action = yaml.safe_load(ACTION.read_text())
    readme = (ROOT / "README.md").read_text()
    assert readme_with_docs(readme, action) == readme, "README is stale: make action-docs"
    for name in [*action["inputs"], *action["outputs"]]:
        assert f"\n| `{name}` |" in readme, name
    # The check can fail: a new input, or an edited description, changes the tables.
    action["inputs"]["new-input"] = {"description": "x", "default": ""}
    assert readme_with_docs(readme, action) != readme
    action["outputs"]["cost"]["description"] += " More."
    assert "| `cost` | US dollars" in readme_with_docs(readme, action)


def test_action_structure() -> None:
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    ids: list[str] = []
    for step in steps:
        if "run" in step:
            assert step.get("shell") == "bash", step
            # Inputs reach scripts through env only: no expression inside a script.
            assert "${{" not in step["run"], step.get("id")
        else:
            assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
        text = json.dumps(step)
        for ref in re.findall(r"steps\.([\w-]+)\.", text):
            assert ref in ids, f"{step.get('id')} uses step {ref} before it runs"
        for ref in re.findall(r"inputs\.([\w-]+)", text):
            assert ref in action["inputs"], ref
        if "id" in step:
            ids.append(step["id"])
    for name, out in action["outputs"].items():
        sids = re.findall(r"steps\.([\w-]+)\.outputs\.", out["value"])
        assert sids and set(sids) <= set(ids), name
    # The install takes every file from the hash-pinned lock and nothing from an index.
    install = next(s for s in steps if s.get("id") == "install")["run"]
    assert "--require-hashes --only-binary=:all: -r" in install
    assert "--no-deps --no-build-isolation --no-index" in install
    assert install.count("pip install") == 2
    run_env = next(s for s in steps if s.get("id") == "run")["env"]
    # The run step never sees the GitHub token; only it gets the API key.
    assert "GITHUB_TOKEN" not in run_env and "github-token" not in json.dumps(run_env)
    assert [s.get("id") for s in steps if "inputs.api-key }}" in json.dumps(s)] == ["run"]


def test_benchmark_shards_then_merge(
    loopback_thread: ThreadFactory, github: FakeGitHub, tmp_path: Path
) -> None:
    """The benchmark workflow's path: two shard jobs, then a merge job with `merge:`."""
    srv = loopback_thread(per_conversation(scripted_model()))
    workspace = make_git_repo(tmp_path / "ws")
    tasks = write_tasks(
        tmp_path / "bench.yaml",
        srv.base_url,
        workspace,
        "".join(f"  - {{id: t{i}, prompt: t{i} go, repo: REPO}}\n" for i in range(4)),
    )
    runs = {}
    for k in (1, 2):
        run = run_action(
            tmp_path / f"shard{k}",
            workspace,
            {
                "task-file": str(tasks),
                "api-key": API_KEY,
                "shard": f"{k}/2",
                "out-dir": f"shards/s{k}",
                "comment": "false",
            },
            event_name="workflow_dispatch",
            event={},
            api_url=github.url,
        )
        assert not run.failed, run.logs
        runs[k] = int(run.outputs["runs"])
    assert runs[1] + runs[2] == 4 and runs[1] and runs[2]
    merged = run_action(
        tmp_path / "merge",
        workspace,
        {"merge": "shards/s*", "out-dir": "merged", "comment": "false"},
        event_name="workflow_dispatch",
        event={},
        api_url=github.url,
    )
    assert not merged.failed, merged.logs
    assert merged.outputs["runs"] == "4" and merged.outputs["passed"] == "4"
    report = json.loads((workspace / "merged/report.json").read_text())
    assert sorted(t["id"] for t in report["runs"]) == ["t0", "t1", "t2", "t3"]
    assert (workspace / "merged/junit.xml").read_text().count("<testcase ") == 4
    summary = (tmp_path / "merge/step-summary.md").read_text()
    assert (workspace / "merged/summary.md").read_text() in summary
    assert not github.log


def test_example_task_files_validate(tmp_path: Path) -> None:
    """The task files the example workflows point at, where the README says to put them,
    and the task files written inline (`tasks`), as the Action writes them out; the
    pull-request ones also pass the Action's trusted-config check."""
    repo = make_git_repo(tmp_path / "repo")
    (repo / ".github/runner").mkdir(parents=True)
    examples = sorted((ROOT / "examples/workflows/runner").glob("*.yaml"))
    assert {p.name for p in examples} == {"pr.yaml", "pr-fix.yaml", "benchmark.yaml"}
    examples_dir = ROOT / "examples/workflows"
    workflows = {p.name: yaml.safe_load(p.read_text()) for p in examples_dir.glob("*.yml")}
    uses = "".join(p.read_text() for p in examples_dir.glob("*.yml"))

    def validates(task_file: str) -> None:
        res = run_cli("validate", "--offline", task_file, cwd=repo)
        assert res.returncode == 0, res.stderr
        assert f"repo {repo.resolve()}" in res.stdout

    for path in examples:
        assert f".github/runner/{path.name}" in uses, f"no example uses {path.name}"
        shutil.copy(path, repo / ".github/runner" / path.name)
        validates(f".github/runner/{path.name}")
    inline = {
        name: step["with"]["tasks"]
        for name, wf in workflows.items()
        for job in wf["jobs"].values()
        for step in job["steps"]
        if "tasks" in (step.get("with") or {})
    }
    assert sorted(inline) == ["benchmark.yml", "nightly-full-access.yml", "nightly.yml"]
    env = {"GITHUB_WORKSPACE": str(repo), "RUNNER_TEMP": str(tmp_path)}
    for text in inline.values():
        validates(inline_tasks(text, env))
    # The command-line benchmark's task file and benchmark.yml's inline tasks are one set.
    file_tasks = yaml.safe_load((ROOT / "examples/workflows/runner/benchmark.yaml").read_text())
    for task in file_tasks["tasks"]:
        assert task.pop("repo") == "../.."
    assert yaml.safe_load(inline["benchmark.yml"]) == file_tasks
    trusted = repo / ".github/runner"
    for name in ("pr.yaml", "pr-fix.yaml"):
        assert trust_problems(trusted / name, trusted) == []
        assert "mcp_servers" not in (trusted / name).read_text().split("\nversion: 1", 1)[1]
    fix = yaml.safe_load((trusted / "pr-fix.yaml").read_text())
    assert fix["defaults"]["sandbox"] == "workspace-write"
    assert "push" not in fix["defaults"]["git"]
    pr_job = yaml.safe_load(PR_WORKFLOW.read_text())["jobs"]["runner"]
    fix_step = next(s for s in pr_job["steps"] if "pr-fix.yaml" in str(s.get("with")))
    assert fix_step["with"]["sandbox"] == "workspace-write"
    assert fix_step["with"]["push"] == "false" and fix_step["with"]["comment"] == "false"


# ------------------------------------------------------------------ pull requests: trust


def swap_step() -> dict[str, Any]:
    """The Action's step that puts the base branch's runner config in place."""
    steps = yaml.safe_load(ACTION.read_text())["runs"]["steps"]
    step: dict[str, Any] = next(s for s in steps if s.get("id") == "from-base")
    assert step["env"] == {
        "MODE": "${{ inputs.from-base }}",
        "CONFIG": "${{ inputs.trusted-config }}",
        "BASE_SHA": "${{ github.event.pull_request.base.sha }}",
        "HEAD_SHA": "${{ github.event.pull_request.head.sha }}",
    }
    return step


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo.parent), "GIT_CONFIG_NOSYSTEM": "1"},
    ).stdout.strip()


def pr_repos(
    tmp_path: Path, base_files: dict[str, str], head_files: dict[str, str | None]
) -> tuple[Path, str, str]:
    """A repository whose HEAD is a pull request's head commit on top of a base commit, as
    `actions/checkout` leaves it: (work tree, base sha, head sha). None deletes a file; a
    value starting with "->" makes a symlink."""
    repo = make_git_repo(tmp_path / "ws", base_files)
    base = git(repo, "rev-parse", "HEAD")
    for name, text in head_files.items():
        path = repo / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        if text is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if text.startswith("->"):
            path.symlink_to(text[2:])
        else:
            path.write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the pull request")
    return repo, base, git(repo, "rev-parse", "HEAD")


def run_swap(
    tmp_path: Path,
    repo: Path,
    base: str,
    head: str,
    *,
    mode: str = "auto",
    config: str = ".github/runner",
) -> subprocess.CompletedProcess[str]:
    """The Action's from-base step alone, as its `run:` script under bash."""
    script = tmp_path / "swap.sh"
    script.write_text(swap_step()["run"])
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "GIT_CONFIG_NOSYSTEM": "1",
            "MODE": mode,
            "CONFIG": config,
            "BASE_SHA": base,
            "HEAD_SHA": head,
        },
    )


def pr_event_for(base: str, head: str) -> dict[str, Any]:
    """PR_EVENT naming a base and a head commit: the Action's from-base step then runs."""
    return {
        **PR_EVENT,
        "pull_request": {
            **PR_EVENT["pull_request"],  # type: ignore[dict-item]
            "base": {"sha": base, "repo": {"full_name": REPO}},
            "head": {"sha": head, "repo": {"full_name": REPO}},
        },
    }


def tree_files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def test_pr_runs_read_only_the_base_branchs_runner_config(
    loopback_thread: ThreadFactory, github: FakeGitHub, tmp_path: Path
) -> None:
    """The PR edits the instructions file, the task file (adding an MCP server), AGENTS.md,
    and adds an MCP script and a `runner` package that would shadow ours: the Action's
    from-base step swaps them for the base's, and its run reads and starts only those."""
    srv = loopback_thread(per_conversation(lambda req, turn: reply_message("reviewed")))
    pwned = tmp_path / "pwned"
    base_task = (
        "version: 1\n"
        f"providers:\n  fake: {{base_url: '{srv.base_url}', env_key: OPENAI_API_KEY}}\n"
        "defaults:\n  model: fake/m\n  instructions_file: instr.md\n"
        "  tools: [shell, update_plan]\n"
        "tasks:\n  - {id: review, prompt: review the diff in .runner/pr.diff, repo: ../..}\n"
    )
    evil_task = base_task.replace(
        "tasks:", "  mcp_servers:\n    evil: {command: [python3, evil_mcp.py], cwd: .}\ntasks:"
    )
    evil = f"open({str(pwned)!r}, 'w').write('ran')\n"
    repo, base, head = pr_repos(
        tmp_path,
        {
            "README.md": "# widgets\n",
            "src/app.py": "x = 1\n",
            "AGENTS.md": "BASE-AGENTS-CANARY\n",
            "docs/AGENTS.md": "BASE-DOCS-AGENTS\n",
            ".github/runner/pr.yaml": base_task,
            ".github/runner/instr.md": "BASE-INSTRUCTIONS-CANARY\n",
        },
        {
            "src/app.py": "x = 2  # HEAD-CODE-CHANGE\n",
            "AGENTS.md": "HEAD-AGENTS-CANARY\n",
            "sub/AGENTS.md": "HEAD-SUB-AGENTS\n",
            "docs": f"->{tmp_path / 'outside'}",
            ".github/runner/pr.yaml": evil_task,
            ".github/runner/instr.md": "HEAD-INSTRUCTIONS-CANARY\n",
            ".github/runner/evil_mcp.py": evil,
            "evil_mcp.py": evil,
            "runner/__init__.py": evil,
            "runner/github.py": evil,
            "runner/github/__init__.py": evil,
            "runner/github/__main__.py": evil,
        },
    )
    (tmp_path / "outside").mkdir()

    run = run_action(
        tmp_path / "gha",
        repo,
        {
            "task-file": ".github/runner/pr.yaml",
            "trusted-config": ".github/runner",
            "api-key": API_KEY,
        },
        event_name="pull_request",
        event=pr_event_for(base, head),
        api_url=github.url,
    )
    assert run.outcomes["from-base"] == "success", run.logs
    assert run.step_outputs["run"]["exit-code"] == "0", run.logs
    assert not run.failed, run.logs

    # The runner config directory is the base's, in the commit and in the work tree.
    assert git(repo, "rev-parse", "HEAD:.github/runner") == git(
        repo, "rev-parse", f"{base}:.github/runner"
    )
    assert tree_files(repo / ".github/runner") == {
        "pr.yaml": base_task,
        "instr.md": "BASE-INSTRUCTIONS-CANARY\n",
    }
    # AGENTS.md files too: the PR's are gone, the base's back (through no symlink).
    assert (repo / "AGENTS.md").read_text() == "BASE-AGENTS-CANARY\n"
    assert not (repo / "sub/AGENTS.md").exists()
    assert not (repo / "docs").is_symlink() and not list((tmp_path / "outside").iterdir())
    assert git(repo, "show", "HEAD:docs/AGENTS.md") == "BASE-DOCS-AGENTS"
    # The PR's code and its diff are what the agent gets to see.
    assert "HEAD-CODE-CHANGE" in (repo / "src/app.py").read_text()
    assert "HEAD-CODE-CHANGE" in git(repo, "show", "HEAD:.runner/pr.diff")
    assert git(repo, "status", "--porcelain") == "?? runner-out/"  # the reports only
    sent = "".join(r.raw.decode(errors="replace") for r in srv.requests)
    assert "BASE-INSTRUCTIONS-CANARY" in sent and "BASE-AGENTS-CANARY" in sent
    assert "HEAD-INSTRUCTIONS-CANARY" not in sent and "HEAD-AGENTS-CANARY" not in sent
    assert "HEAD-SUB-AGENTS" not in sent and "evil" not in sent
    # Neither the PR's MCP script nor its `runner` package ran (python -I).
    assert not pwned.exists()


@pytest.mark.parametrize(
    ("mode", "config", "base", "message"),
    [
        ("yes", "", "BASE", "from-base must be auto, true or false; got 'yes'"),
        ("true", "", "", "from-base is true, but the event names no base commit"),
        ("auto", "../elsewhere", "BASE", "trusted-config must be a directory inside"),
        ("auto", "/etc", "BASE", "trusted-config must be a directory inside"),
        ("auto", ".github/./runner", "BASE", "trusted-config must be a directory inside"),
        ("auto", "", "0" * 40, "is not in the checkout: check out with fetch-depth: 0"),
    ],
)
def test_from_base_refuses_bad_input(
    tmp_path: Path, mode: str, config: str, base: str, message: str
) -> None:
    repo, real_base, head = pr_repos(tmp_path, {"a.txt": "1\n"}, {"a.txt": "2\n"})
    swap = run_swap(
        tmp_path, repo, real_base if base == "BASE" else base, head, mode=mode, config=config
    )
    assert swap.returncode == 2, swap.stdout + swap.stderr
    assert swap.stdout.startswith("::error title=runner::") and message in swap.stdout
    assert "Traceback" not in swap.stderr and git(repo, "rev-parse", "HEAD") == head


def test_from_base_does_nothing_off_pull_requests(tmp_path: Path) -> None:
    """auto without a base commit (a schedule, a push) and false leave HEAD alone; a
    prompt-only PR run (no trusted-config) still gets the base's AGENTS.md and the diff."""
    repo, base, head = pr_repos(
        tmp_path, {"AGENTS.md": "BASE\n", "a.txt": "1\n"}, {"AGENTS.md": "PR\n"}
    )
    for mode, sha in (("auto", ""), ("false", base)):
        swap = run_swap(tmp_path, repo, sha, head, mode=mode, config="")
        assert swap.returncode == 0 and git(repo, "rev-parse", "HEAD") == head
    swap = run_swap(tmp_path, repo, base, head, mode="true", config="")
    assert swap.returncode == 0, swap.stdout + swap.stderr
    assert (repo / "AGENTS.md").read_text() == "BASE\n"
    assert "+PR" in (repo / ".runner/pr.diff").read_text()
    assert git(repo, "rev-parse", "HEAD^") == head


def test_swap_refuses_a_symlinked_runner_dir(tmp_path: Path) -> None:
    """A PR that turns .github into a symlink could point the runner config anywhere."""
    (tmp_path / "elsewhere").mkdir()
    repo, base, head = pr_repos(
        tmp_path,
        {".github/runner/pr.yaml": "version: 1\n"},
        {".github": f"->{tmp_path / 'elsewhere'}"},
    )
    swap = run_swap(tmp_path, repo, base, head)
    assert swap.returncode == 1
    assert "::error title=runner::.github is not a directory" in swap.stdout
    assert git(repo, "rev-parse", "HEAD") == head


# ------------------------------------------------------------------ the write-access gate


def gate(
    github: FakeGitHub,
    tmp_path: Path,
    event: dict[str, Any],
    *,
    token: str = GITHUB_TOKEN,
    event_name: str = "pull_request",
    mode: str = "auto",
) -> str:
    event_file = tmp_path / "event.json"
    event_file.write_text(json.dumps(event))
    out = tmp_path / "gate-output"
    out.write_text("")
    env = {
        "GITHUB_EVENT_PATH": str(event_file),
        "GITHUB_EVENT_NAME": event_name,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": token,
        "GITHUB_OUTPUT": str(out),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
    }
    assert main(["can-write", "--mode", mode], env=env) == 0
    return parse_output_file(out.read_text())["allowed"]


def fork_event(author: str, sender: str, association: str = "MEMBER") -> dict[str, Any]:
    return {
        **PR_EVENT,
        "sender": {"login": sender},
        "pull_request": {
            "number": 7,
            "user": {"login": author},
            "author_association": association,
            "head": {
                "sha": "abc",
                "repo": {"full_name": f"{author}/widgets", "owner": {"login": author}},
            },
        },
    }


def test_write_access_gate(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.permissions = {
        "alice": "write",
        "carol": "admin",
        "dave": "maintain",
        "bob": "read",
        "erin": "none",
    }
    # A branch of this repository: its author is asked about too (every event is gated).
    assert gate(github, tmp_path, PR_EVENT) == "true"
    assert [c[1] for c in github.log] == [f"/repos/{REPO}/collaborators/alice/permission"]
    github.log.clear()
    # Events only a writer can cause, in mode auto: no gate.
    for name in ("schedule", "workflow_dispatch", "push"):
        assert gate(github, tmp_path, {}, event_name=name) == "true" and not github.log
    # From a fork: the author and the sender are asked about, by name.
    assert gate(github, tmp_path, fork_event("alice", "carol")) == "true"
    assert sorted(c[1] for c in github.calls("GET", "/permission$")) == [
        f"/repos/{REPO}/collaborators/{u}/permission" for u in ("alice", "carol")
    ]
    assert gate(github, tmp_path, fork_event("dave", "dave")) == "true"
    # MEMBER or COLLABORATOR by association, but only read (or none): refused.
    assert gate(github, tmp_path, fork_event("bob", "bob", "COLLABORATOR")) == "false"
    assert gate(github, tmp_path, fork_event("erin", "erin", "MEMBER")) == "false"
    # A writer's label on a reader's PR is not enough, nor the other way round.
    assert gate(github, tmp_path, fork_event("bob", "alice")) == "false"
    assert gate(github, tmp_path, fork_event("alice", "bob")) == "false"
    # Not a collaborator at all (404), and a token the API refuses: no.
    assert gate(github, tmp_path, fork_event("zed", "zed")) == "false"
    assert gate(github, tmp_path, fork_event("alice", "alice"), token="ghs_bad") == "false"
    out = capsys.readouterr().out
    assert "::warning title=runner can-write::" in out and "HTTP 401" in out
    assert "::notice title=runner::not run: bob has no write access" in out
    assert "did not run" in (tmp_path / "summary.md").read_text()
    # mode true checks the sender even outside pull requests; false never checks.
    github.log.clear()
    assert (
        gate(
            github,
            tmp_path,
            {"sender": {"login": "bob"}},
            event_name="workflow_dispatch",
            mode="true",
        )
        == "false"
    )
    assert len(github.log) == 1


def test_action_does_nothing_for_a_reader_from_a_fork(github: FakeGitHub, tmp_path: Path) -> None:
    github.permissions = {"bob": "read"}
    workspace = make_git_repo(tmp_path / "ws")
    tasks = write_tasks(
        tmp_path / "pr.yaml",
        "http://127.0.0.1:9/v1",
        workspace,
        "  - {id: review, prompt: review, repo: REPO}\n",
    )
    run = run_action(
        tmp_path / "gha",
        workspace,
        {"task-file": str(tasks), "api-key": API_KEY, "github-token": FORK_TOKEN},
        event_name="pull_request",
        event=fork_event("bob", "bob"),
        api_url=github.url,
    )
    assert not run.failed, run.logs
    assert run.outputs["allowed"] == "false" and run.outputs["runs"] == ""
    assert run.outputs["conclusion"] == "skipped"
    assert run.outputs["notice"] == (f"bob has no write access to {REPO} and is not in allow-users")
    assert run.outcomes["run"] == "skipped" and run.outcomes["finish"] == "success"
    assert not (workspace / "runner-out").exists()
    # A refusal is never written into the pull request: the log and `notice` have it.
    assert not github.calls("POST") and not github.calls("PATCH")
    assert "::notice title=runner::not run: bob has no write access" in run.logs["gate"]


def test_pull_requests_never_pushed_on_a_pr_event(github: FakeGitHub, tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(PR_EVENT))
    env = {
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_API_URL": github.url,
        "GITHUB_TOKEN": GITHUB_TOKEN,
    }
    assert main(["pull-requests", "--report", str(tmp_path / "report.json")], env=env) == 2
    assert not github.log


# ------------------------------------------------------------------ the comment's author


def test_actions_pin_third_party_actions_by_commit() -> None:
    """Tags can be moved by whoever owns the action; a full commit cannot. Our own action
    in the examples is the exception: users pin their copy (README)."""
    texts = {
        p.name: p.read_text()
        for p in [
            ACTION,
            *sorted((ROOT / ".github/workflows").glob("*.yml")),
            *sorted((ROOT / "examples/workflows").glob("*.yml")),
        ]
    }
    texts["README"] = "".join(readme_workflows())
    seen = 0
    for name, text in texts.items():
        for ref in re.findall(r"uses:\s*(\S+.*)", text):
            if "your-org/" in ref:  # the placeholder: a commit no repository has
                assert ref == f"{ACTION_REF}  # the full commit you reviewed", (name, ref)
                continue
            seen += 1
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+", ref), (
                name,
                ref,
            )
    assert seen >= 10


# ------------------------------------------------------------------ inline prompt, inputs


def test_inline_prompt_runs_one_task_with_the_given_model_options(
    loopback_thread: ThreadFactory, github: FakeGitHub, tmp_path: Path
) -> None:
    srv = loopback_thread(
        per_conversation(
            lambda req, turn: reply_message("**Done.** Thanks @octocat, see https://evil.test")
        )
    )
    workspace = make_git_repo(tmp_path / "ws")
    inputs = {
        "prompt": "Review this change, say: done",
        "model": "fake/m",
        "base-url": srv.base_url,
        "reasoning-effort": "low",
        "extra-args": "--only pr-7",
        "api-key": API_KEY,
    }
    run = run_action(
        tmp_path / "gha",
        workspace,
        inputs,
        event_name="pull_request",
        event=PR_EVENT,
        api_url=github.url,
    )
    assert not run.failed, run.logs
    out = run.outputs
    assert out["conclusion"] == "success" and out["runs"] == "1" and out["exit-code"] == "0"
    assert out["final-message"] == "**Done.** Thanks @octocat, see https://evil.test"
    assert (
        "runner run " in run.logs["run"] and "--reasoning-effort low --only pr-7" in run.logs["run"]
    )
    # One task, in the checked-out repository, on the given endpoint and effort; read-only
    # because this is a pull-request event, as it would be for a task file.
    assert srv.requests and all(r.body["reasoning"] == {"effort": "low"} for r in srv.requests)
    assert "Review this change, say: done" in last_user_text(srv.requests[0])
    assert all("`sandbox_mode` is `read-only`" in json.dumps(r.body) for r in srv.requests)
    report = Report.model_validate_json((workspace / "runner-out/report.json").read_text())
    assert [t.id for t in report.runs] == ["pr-7"]  # one task per PR or issue
    # The one-task file lives outside the workspace; the workspace only got the reports.
    status = subprocess.run(
        ["git", "status", "--porcelain"], cwd=workspace, check=True, capture_output=True, text=True
    ).stdout
    assert status.split() == ["??", "runner-out/"]
    # The review is rendered, inert.
    (comment,) = github.comments.values()
    assert "<strong>Done.</strong> Thanks @\u2060octocat" in comment["body"]
    assert "<code>https://evil.test</code>" in comment["body"]

    # A wrong flag in extra-args is bad input: red, exit 2, the runner's own message.
    bad = run_action(
        tmp_path / "gha2",
        workspace,
        {**inputs, "extra-args": "--bogus"},
        event_name="pull_request",
        event=PR_EVENT,
        api_url=github.url,
    )
    assert bad.failed and bad.outcomes["finish"] == "failure(2)", bad.logs
    assert bad.outputs["conclusion"] == "failure" and "--bogus" in bad.logs["run"]


def test_run_inputs_that_cannot_go_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "output"
    env = {
        "GITHUB_OUTPUT": str(out),
        "GITHUB_EVENT_NAME": "workflow_dispatch",
        "RUNNER_TEMP": str(tmp_path),
        "PATH": "/usr/bin:/bin",
    }
    base = ["run", "--out", str(tmp_path / "o")]
    empty = tmp_path / "empty.md"
    empty.write_text("\n")
    cases = [
        (
            ["--task-file", "t.yaml", "--prompt", "p"],
            "give one of task-file, tasks, prompt and prompt-file; got task-file and prompt",
        ),
        ([], "one of task-file, tasks, prompt or prompt-file is required"),
        (["--prompt", "p", "--reasoning-effort", "huge"], "reasoning-effort must be one of"),
        (["--prompt", "  "], "one of task-file, tasks, prompt or prompt-file is required"),
        (["--prompt-file", str(empty)], "prompt is empty (or prompt-file names an empty"),
        (["--prompt-file", str(tmp_path / "none.md")], "prompt-file"),
        (["--prompt", "p", "--base-url", "ftp://x"], "base-url must be an http(s) URL"),
        (["--prompt", "p", "--extra-args", "'unclosed"], "extra-args: No closing quotation"),
    ]
    for args, message in cases:
        assert main([*base, *args], env=env) == 2, args
        printed = capsys.readouterr().out
        assert "::error title=runner::" in printed and message in printed, (args, printed)
    assert not out.exists() and not (tmp_path / "o").exists()
    # allow-bots: '*' is refused, names are taken with or without [bot].
    env["GITHUB_OUTPUT"] = str(out)
    assert main(["can-write", "--allow-bots", "*"], env=env) == 2
    assert "allow-bots takes bot names" in capsys.readouterr().out


def test_allow_users_and_bots(github: FakeGitHub, tmp_path: Path) -> None:
    github.permissions = {"bob": "read"}
    bot = {"login": "renovate[bot]", "type": "Bot"}
    bot_pr = {**PR_EVENT, "sender": bot, "pull_request": {**PR_EVENT["pull_request"], "user": bot}}  # type: ignore[dict-item]

    def allowed(event: dict[str, Any], users: str = "", bots: str = "", ack: str = "") -> str:
        env = {
            "GITHUB_EVENT_PATH": str(tmp_path / "e.json"),
            "GITHUB_OUTPUT": str(out),
            "GITHUB_EVENT_NAME": "pull_request",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": github.url,
            "GITHUB_TOKEN": GITHUB_TOKEN,
        }
        (tmp_path / "e.json").write_text(json.dumps(event))
        out.write_text("")
        argv = ["can-write", "--allow-users", users, "--allow-bots", bots]
        assert main([*argv, "--allow-any-user", ack], env=env) == 0
        return parse_output_file(out.read_text())["allowed"]

    out = tmp_path / "out"
    # A bot is refused even on a branch of this repository, unless named.
    assert allowed(bot_pr) == "false"
    assert allowed(bot_pr, bots="dependabot") == "false"
    assert allowed(bot_pr, bots="renovate") == "true" == allowed(bot_pr, bots="Renovate[bot]")
    # allow-users lets a reader's fork PR run, without asking the API; `*` lets anyone.
    github.log.clear()
    assert allowed(fork_event("bob", "bob")) == "false" and github.log
    github.log.clear()
    assert allowed(fork_event("bob", "bob"), users="alice, BOB") == "true" and not github.log
    assert allowed(fork_event("zed", "zed"), users="*", ack="i-understand") == "true"
    # Both must be allowed: a listed sender does not carry an unlisted author.
    assert allowed(fork_event("zed", "bob"), users="bob") == "false"


def test_a_task_file_typo_on_a_pr_is_red_but_a_new_one_is_skipped(
    github: FakeGitHub, tmp_path: Path
) -> None:
    """Green "this PR adds it" only when it does: the base has a config directory, so a
    task file in neither the base nor the PR is a mistake in the workflow (exit 2)."""
    config = "version: 1\ntasks:\n  - {id: review, prompt: hi, repo: ../..}\n"
    repo, base, head = pr_repos(
        tmp_path,
        {"README.md": "# w\n", ".github/runner/pr.yaml": config},
        {".github/runner/new.yaml": config},
    )
    event = pr_event_for(base, head)

    def run(task_file: str, name: str) -> Any:
        return run_action(
            tmp_path / name,
            repo,
            {"task-file": task_file, "trusted-config": ".github/runner", "api-key": API_KEY},
            event_name="pull_request",
            event=event,
            api_url=github.url,
        )

    typo = run(".github/runner/pr.yml", "typo")
    assert typo.outcomes["run"] == "failure(2)" and typo.failed, typo.logs
    assert typo.outputs["conclusion"] == "failure" and typo.outputs["notice"] == ""
    assert typo.logs["run"] == (
        "::error title=runner::.github/runner/pr.yml: no such file, in the base branch or in "
        "this pull request; .github/runner has pr.yaml: check the task-file / prompt-file "
        "input\n"
    )
    added = run(".github/runner/new.yaml", "added")
    assert not added.failed, added.logs
    assert added.outputs["conclusion"] == "skipped"
    assert added.outputs["notice"].startswith("the base branch has no .github/runner/new.yaml;")


@pytest.mark.parametrize("statuses", ["complete", "completed,passed", ""])
def test_pull_requests_refuses_a_status_outside_the_vocabulary(
    statuses: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["pull-requests", "--report", str(tmp_path / "report.json"), "--statuses", statuses]
    if not statuses:  # nothing selected is allowed: no run gets a PR
        from runner.github.commands import build_parser

        assert build_parser().parse_args(argv).statuses == frozenset()
        return
    with pytest.raises(SystemExit) as exc:
        main(argv, env={})
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--statuses" in err and "must be one of" in err and "check_failed" in err
