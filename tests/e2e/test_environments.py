"""Runs in a podman container, end to end: the agent loop and the model client on the host
(a scripted loopback model), every tool call and the check in the container; the patch,
the branch, builds, a container killed mid-run, SIGTERM and the cap on live containers."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.sandbox.engine import RUN_LABEL, Engine
from runner.vocabulary import EXIT_INTERRUPTED
from tests.support import tiny_image
from tests.support.cli import KEY, run_cli
from tests.support.cli import shell as any_shell
from tests.support.environments import engine_answers
from tests.support.fixtures import ThreadFactory, git, make_git_repo
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    per_conversation,
    reply_custom_tool_call,
    reply_function_call,
    reply_message,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]

ENGINE = Engine("podman")


def podman(*args: str) -> str:
    done = subprocess.run(
        ENGINE.argv(list(args)), env=ENGINE.env(), capture_output=True, text=True, timeout=60
    )
    return done.stdout


def containers_of(run: str) -> list[str]:
    """Every container, running or not, labelled as this run's."""
    return podman("ps", "-a", "-q", "--filter", f"label={RUN_LABEL}={run}").split()


shell = functools.partial(any_shell, login=True)


PATCH = "*** Begin Patch\n*** Add File: new.txt\n+patched in the container\n*** End Patch"


def work_script(req: RecordedRequest, i: int) -> Reply:
    """A shell command, then an apply_patch, then done."""
    if i == 0:
        return shell("echo made > made.txt; cat /etc/debian_version; pwd", "c0")
    if i == 1:
        return reply_custom_tool_call("apply_patch", PATCH, call_id="c1")
    return reply_message("done")


def task_file(tmp: Path, base_url: str, tasks: str, env: str, top: str = "") -> Path:
    path = tmp / "tasks.yaml"
    path.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{base_url}', env_key: FAKE_API_KEY}}}}\n"
        f"{top}"
        "defaults:\n"
        "  model: fake/m\n"
        "  apply_patch_tool: freeform\n"
        f"  environment: {env}\n"
        f"tasks:\n{tasks}"
    )
    return path


def report_of(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "report.json").read_text()))


def _completed(tasks: Path, out: Path) -> dict[str, Any]:
    """`runner run TASKS --out OUT` in-process: exit 0 and its one run completed."""
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    run: dict[str, Any] = report_of(out)["runs"][0]
    assert run["status"] == "completed", run["error"]
    return run


def test_a_run_without_a_repo_works_in_the_image_and_leaves_a_patch(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    name = f"img-{uuid.uuid4().hex[:8]}"
    srv = loopback_thread(per_conversation(work_script))
    env = f"{{backend: podman, image: '{image}', workdir: /work, artifacts: [made.txt]}}"
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', check: 'test -f made.txt && test -f new.txt'}}\n",
        env,
    )
    out = tmp_path / "out"
    run = _completed(tasks, out)
    assert run["check"]["passed"] is True  # ran in the container: no host cwd has made.txt
    assert run["workspace"] is None and run["result"] is None  # no repo: no branch
    e = run["environment"]
    assert e["backend"] == "podman" and e["image"] == image and e["workdir"] == "/work"
    assert e["image_id"] and e["start_s"] > 0 and e["build_s"] is None
    patch = (out / e["patch"]).read_text()
    assert "+made\n" in patch and "+patched in the container\n" in patch
    assert "b/made.txt" in patch and "b/new.txt" in patch
    assert (out / e["artifacts"] / "made.txt").read_text() == "made\n"
    # The commands ran in the image (Debian), at its workdir.
    outputs = [i for r in srv.requests for i in r.input if i.get("type") == "function_call_output"]
    assert "/work" in json.dumps(outputs) and KEY not in json.dumps(outputs)
    assert containers_of(name) == []
    assert "podman" in (out / "summary.md").read_text()


def test_a_run_with_a_host_repo_works_on_a_copy_and_makes_a_branch(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    name = f"repo-{uuid.uuid4().hex[:8]}"
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "from the host\n", "sub/b.txt": "b\n"})

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("cat a.txt sub/b.txt > both.txt; test ! -e .git && echo no-git", "c0")
        if i == 1:
            edit = "*** Begin Patch\n*** Update File: a.txt\n@@\n-from the host\n+edited\n"
            return reply_custom_tool_call("apply_patch", edit + "*** End Patch", call_id="c1")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', repo: '{repo}'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /src}}",
    )
    out = tmp_path / "out"
    run = _completed(tasks, out)
    branch = run["result"]["branch"]
    assert branch and sorted(run["result"]["files"]) == ["a.txt", "both.txt"]
    assert git(repo, "show", f"{branch}:both.txt") == "from the host\nb\n"
    assert git(repo, "show", f"{branch}:a.txt") == "edited\n"
    assert (repo / "a.txt").read_text() == "from the host\n"  # the user's tree untouched
    assert "+edited" in (out / run["result"]["patch"]).read_text()
    assert "no-git" in json.dumps(srv.requests[1].input[-1])
    assert containers_of(name) == []


def test_a_large_host_repo_keeps_the_small_change_and_names_the_big_file(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """The checkout is copied in without `.git` and is over the tar snapshot's 32 MiB: the
    start state is a private git tree in the container, so the one-line change still
    makes the patch and the branch, and a 40 MB file the model writes is named."""
    name = f"big-{uuid.uuid4().hex[:8]}"
    repo = make_git_repo(tmp_path / "repo", {"a.txt": "one\n"})
    (repo / "data.bin").write_bytes(os.urandom(40 << 20))
    git(repo, "add", "data.bin")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data")

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo two > a.txt; head -c 41943040 /dev/zero > written.bin", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', repo: '{repo}'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /src}}",
    )
    out = tmp_path / "out"
    run = _completed(tasks, out)
    assert run["result"]["files"] == ["a.txt"]
    assert git(repo, "show", f"{run['result']['branch']}:a.txt") == "two\n"
    e = run["environment"]
    assert e["patch"] == run["result"]["patch"] and "+two" in (out / e["patch"]).read_text()
    assert e["left_out"] == ["written.bin: over 16.0 MiB, left out of the patch"]
    assert containers_of(name) == []


def test_a_build_folder_is_built_once_for_two_runs(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    names = [f"build-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    folder = tmp_path / "env"
    folder.mkdir()
    marker = uuid.uuid4().hex  # new content: a new image, built here
    (folder / "Dockerfile").write_text(f"FROM {image}\nRUN echo {marker} > /marker\nWORKDIR /app\n")

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("cp /marker here.txt; pwd >> here.txt", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        "".join(f"  - {{id: {n}, prompt: 'work {n}'}}\n" for n in names),
        "{backend: podman, build: env}",
    )
    out = tmp_path / "out"
    try:
        res = run_cli("run", tasks, "--out", out, "--concurrency", "2")
        assert res.returncode == 0, res.stderr
        runs = report_of(out)["runs"]
        assert [r["status"] for r in runs] == ["completed", "completed"], runs[0]["error"]
        envs = [r["environment"] for r in runs]
        assert len({e["image"] for e in envs}) == 1
        assert envs[0]["image"].startswith("localhost/runner-build:")
        assert sorted(e["built"] for e in envs) == [False, True]  # one build, one reuse
        assert all(e["build_s"] is not None for e in envs)
        for e in envs:
            assert e["workdir"] == "/app"  # the image's WORKDIR
            assert f"+{marker}\n+/app\n" in (out / e["patch"]).read_text()
    finally:
        podman(
            "rmi",
            "-f",
            json.loads((out / "report.json").read_text())["runs"][0]["environment"]["image"],
        ) if (out / "report.json").exists() else None
    assert all(containers_of(n) == [] for n in names)


def test_a_container_killed_mid_run_makes_the_run_an_error(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    name = f"kill-{uuid.uuid4().hex[:8]}"

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo before > a.txt", "c0")
        if i == 1:
            podman("rm", "-f", "-t", "0", *containers_of(name))  # from outside, mid-run
            return shell("echo after > b.txt", "c1")
        return reply_message("all good")  # never believed: the environment is gone

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', check: 'true'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /work}}",
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 3, res.stderr  # a run that could not work
    run = report_of(out)["runs"][0]
    assert run["status"] == "error"
    assert run["error"].startswith("podman environment lost: the container")
    assert run["check"] is None and run["environment"]["patch"] is None
    assert len(srv.requests) == 2  # the thread ended at the lost call
    assert containers_of(name) == []


def test_sigterm_mid_run_leaves_no_container_and_resume_starts_a_fresh_one(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    name = f"term-{uuid.uuid4().hex[:8]}"
    resumed: list[bool] = []

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo again > r.txt" if resumed else "sleep 120", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /work}}",
    )
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runner", "run", str(tasks), "--out", str(out)],
        env={**os.environ, "FAKE_API_KEY": KEY},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not (srv.requests and containers_of(name)) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)  # the sleep is running in the container
        assert containers_of(name), "the run's container never started"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert containers_of(name) == []
    run = report_of(out)["runs"][0]
    assert run["status"] == "interrupted"
    assert run["environment"]["backend"] == "podman"
    resumed.append(True)
    res = run_cli("run", tasks, "--out", out, "--resume")
    assert res.returncode == 0, res.stderr
    run = report_of(out)["runs"][0]
    assert run["status"] == "completed" and run["redone"] is not None
    assert "+again" in (out / run["environment"]["patch"]).read_text()
    assert containers_of(name) == []


def test_max_environments_caps_live_containers_below_concurrency(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    names = [f"cap-{uuid.uuid4().hex[:8]}" for _ in range(2)]

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("sleep 1", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        "".join(f"  - {{id: {n}, prompt: 'work {n}'}}\n" for n in names),
        f"{{backend: podman, image: '{image}', workdir: /work}}",
        top="max_environments: 1\n",
    )
    seen: list[set[str]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            live = podman("ps", "-a", "--format", "{{.Labels}}")
            seen.append({n for n in names if f"{RUN_LABEL}:{n}" in live})

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        res = run_cli("run", tasks, "--out", tmp_path / "out", "--concurrency", "2")
    finally:
        done.set()
        watcher.join()
    assert res.returncode == 0, res.stderr
    assert set().union(*seen) == set(names)  # both ran, each in a container
    assert max(len(s) for s in seen) == 1  # never two at once
    assert len(srv.requests) == 4


def test_skills_are_copied_into_the_container_where_the_prompt_says(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    name = f"skills-{uuid.uuid4().hex[:8]}"
    folder = tmp_path / "skills" / "greeter"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: greeter\ndescription: Greets in style.\n---\n\nRun greet.sh.\n"
    )
    (folder / "greet.sh").write_text("#!/bin/sh\necho greeted-from-the-skill\n")
    (folder / "greet.sh").chmod(0o755)
    at = "/tmp/.runner/skills/0"

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell(f"cat {at}/SKILL.md; {at}/greet.sh > greeted.txt", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', skills: [skills], check: 'test -s greeted.txt'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /work}}",
    )
    out = tmp_path / "out"
    run = _completed(tasks, out)
    assert run["check"]["passed"] is True
    first = json.dumps(srv.requests[0].input)
    assert f"{at}/SKILL.md" in first and "Greets in style." in first
    assert str(tmp_path) not in first  # the host's path of the skill is not the model's
    said = json.dumps(srv.requests[1].input[-1])
    assert "Run greet.sh." in said
    patch = (out / run["environment"]["patch"]).read_text()
    assert "+greeted-from-the-skill" in patch and "SKILL.md" not in patch
    assert containers_of(name) == []


def test_the_check_runs_under_sh_in_an_image_without_bash(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    name = f"nobash-{uuid.uuid4().hex[:8]}"
    image = tiny_image.ensure(without=("bash",))
    probe = podman("run", "--rm", "--runtime", "runc", image, "sh", "-c", "command -v bash || :")
    assert probe.strip() == ""  # sh only

    def script(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            argv = ["sh", "-c", "echo made > made.txt"]
            return reply_function_call("shell", {"command": argv}, call_id="c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(script))
    check = 'test "$(cat made.txt)" = made && [ -n "${0##*bash*}" ]'  # not bash running it
    tasks = task_file(
        tmp_path,
        srv.base_url,
        f"  - {{id: {name}, prompt: 'work', check: '{check}'}}\n",
        f"{{backend: podman, image: '{image}', workdir: /work}}",
    )
    out = tmp_path / "out"
    run = _completed(tasks, out)
    assert run["check"]["passed"] is True, run["check"]
    assert containers_of(name) == []
