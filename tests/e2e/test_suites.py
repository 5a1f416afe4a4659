"""A benchmark suite end to end in podman: a scripted model on the loopback server solves
a task of each format (Harbor, Terminal-Bench, SWE-bench), graded by the task's own
verifier after the agent's phase; `runner suite check` runs oracle and nop over the
fixture suite of each format."""

from __future__ import annotations

import functools
import json
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.cli import shell as any_shell
from tests.support.environments import engine_answers
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import (
    RecordedRequest,
    Reply,
    per_conversation,
    reply_custom_tool_call,
    reply_message,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]

FIXTURES = Path(__file__).parent.parent / "fixtures" / "suites"


shell = functools.partial(any_shell, login=True)


def solver(req: RecordedRequest, i: int) -> Reply:
    """Looks for the tests (they are not there yet), then writes the answer."""
    if i == 0:
        return shell("ls /tests /logs/verifier /solution 2>&1; pwd", "c0")
    if i == 1:
        return shell("echo 'Hello, world!' > hello.txt", "c1")
    return reply_message("done")


def report_of(out: Path) -> dict[str, Any]:
    return dict(json.loads((out / "report.json").read_text()))


def test_a_scripted_model_solves_a_harbor_task(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    srv = loopback_thread(per_conversation(solver))
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "matrix: {repeat: 2}\n"
        "suites:\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}, model: fake/m}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    runs = report_of(out)["runs"]
    assert [r["run"] for r in runs] == ["hello.r1", "hello.r2"]
    for run in runs:
        assert run["status"] == "completed", run["error"]
        assert run["suite"] == "harbor:hello" and run["agent"] == "model"
        # Graded twice, the same work gets the same grade.
        assert (run["reward"], run["rewards"]) == (1.0, {"reward": 1.0, "file_exists": 1.0})
        assert run["verifier"]["exit_code"] == 0 and run["usage"]["total_tokens"] > 0
        patch = (out / run["environment"]["patch"]).read_text()
        assert "b/hello.txt" in patch and "test.sh" not in patch  # the tests are not the work
    outputs = [i for r in srv.requests for i in r.input if i.get("type") == "function_call_output"]
    seen = json.dumps(outputs)
    assert "/tests" in seen and "No such file or directory" in seen  # hidden during the work
    trial = out / "harbor" / "hello" / "hello.r1"
    assert json.loads((trial / "verifier" / "reward.json").read_text())["reward"] == 1.0
    assert "exact=1" in (trial / "verifier" / "test-stdout.txt").read_text()
    assert json.loads((trial / "result.json").read_text())["status"] == "completed"
    summary = (out / "summary.md").read_text()
    assert "Mean reward (95% CI)" in summary and "1.00 (" in summary


def test_a_scripted_model_solves_a_terminal_bench_task(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    def write(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("ls /tests 2>&1; pwd", "c0")
        if i == 1:
            return shell("printf 'Hello, world!\\n' > /app/hello.txt", "c1")
        return reply_message("done")

    srv = loopback_thread(per_conversation(write))
    shutil.copytree(FIXTURES / "terminal-bench", tmp_path / "tb")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "suites:\n"
        "  - {format: terminal-bench, path: tb, select: {ids: [hello]}, model: fake/m}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    (run,) = report_of(out)["runs"]
    assert run["status"] == "completed", run["error"]
    assert run["suite"] == "terminal-bench:hello" and run["agent"] == "model"
    assert (run["reward"], run["resolution"]) == (1.0, "resolved")
    assert run["verifier"]["exit_code"] == 0 and run["usage"]["total_tokens"] > 0
    patch = (out / run["environment"]["patch"]).read_text()
    assert "b/hello.txt" in patch and "test_outputs" not in patch
    outputs = [i for r in srv.requests for i in r.input if i.get("type") == "function_call_output"]
    assert "No such file or directory" in json.dumps(outputs)  # the tests came after
    trial = out / "harbor" / "hello" / run["run"]
    stdout = (trial / "verifier" / "test-stdout.txt").read_text()
    assert "PASSED" in stdout and "test_file_content" in stdout


FIX = """\
*** Begin Patch
*** Update File: tinycalc/ops.py
@@ def clamp(value, low, high):
+    if low > high:
+        raise ValueError("low is above high")
     if value < low:
         return low
*** End Patch"""


def fix(req: RecordedRequest, i: int) -> Reply:
    """Half the fix through the shell, the other half through apply_patch."""
    if i == 0:
        cmd = (
            "python3 - <<'EOF'\n"
            "from pathlib import Path\n"
            "p = Path('tinycalc/ops.py')\n"
            "s = p.read_text()\n"
            "s = s.replace('        return low\\n', "
            "'        return low\\n    if value > high:\\n        return high\\n')\n"
            "p.write_text(s)\n"
            "EOF\n"
            "pwd; git status --short"
        )
        return shell(cmd, "c0")
    if i == 1:
        return reply_custom_tool_call("apply_patch", FIX, call_id="c1")
    if i == 2:
        return shell("python3 -m unittest discover -s tests -t . 2>&1 | tail -1", "c2")
    return reply_message("done")


def test_a_scripted_model_resolves_a_swe_bench_instance(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """Half the fix through the shell, the other half through apply_patch, in /testbed;
    graded by the official grading and written to predictions.jsonl as the harness reads
    it."""
    srv = loopback_thread(per_conversation(fix))
    shutil.copytree(FIXTURES / "swe-bench", tmp_path / "swe")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "suites:\n"
        "  - format: swe-bench\n"
        "    path: swe/instances.jsonl\n"
        "    model: fake/m\n"
        "    apply_patch_tool: freeform\n"
        "    environment: {build: swe}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    (run,) = report_of(out)["runs"]
    instance = "runner-fixtures__tinycalc-1"
    assert run["status"] == "completed", run["error"]
    assert run["suite"] == f"swe-bench:{instance}" and run["agent"] == "model"
    assert (run["reward"], run["resolution"]) == (1.0, "resolved")
    assert run["rewards"] == {"reward": 1.0, "fail_to_pass": 1.0, "pass_to_pass": 1.0}
    # Graded as the harness grades the prediction: its patch alone, in a fresh container.
    assert run["verifier"]["fresh_environment"] and run["verifier"]["patch_applied"]
    outputs = [i for r in srv.requests for i in r.input if "output" in i]
    seen = json.dumps(outputs)
    assert "/testbed" in seen and "M tinycalc/ops.py" in seen
    patch = (out / run["environment"]["patch"]).read_text()
    assert "raise ValueError" in patch and "return high" in patch
    assert "test_bounds" not in patch  # the test patch is the verifier's, not the work
    lines = (out / "predictions" / "fake__m.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [
        {"instance_id": instance, "model_name_or_path": "fake/m", "model_patch": patch}
    ]


SWE_HEAD = (
    "version: 1\n"
    "providers: {{fake: {{base_url: '{url}', env_key: FAKE_API_KEY}}}}\n"
    "models: {{fake/m: {{price: {{input: 2.0, cached_input: 0.5, output: 8.0}}}}}}\n"
)
SWE_ENTRY = (
    "  - format: swe-bench\n"
    "    path: swe/instances.jsonl\n"
    "    apply_patch_tool: freeform\n"
    "    environment: {build: swe}\n"
)


def test_oracle_and_nop_beside_a_model_are_their_own_rows(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """One suite three times (the model; oracle and nop under an id prefix): three models
    in every report, each its own mean reward and cost; predictions for the model only."""
    srv = loopback_thread(per_conversation(fix))
    shutil.copytree(FIXTURES / "swe-bench", tmp_path / "swe")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        SWE_HEAD.format(url=srv.base_url)
        + "defaults: {model: fake/m}\n"
        + "suites:\n"
        + SWE_ENTRY
        + SWE_ENTRY
        + "    agent: oracle\n    id_prefix: oracle-\n"
        + SWE_ENTRY
        + "    agent: nop\n    id_prefix: nop-\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 1, res.stdout + res.stderr  # nop's run fails, as it should
    report = report_of(out)
    instance = "runner-fixtures__tinycalc-1"
    got = [(r["run"], r["model"], r["agent"], r["reward"]) for r in report["runs"]]
    assert got == [
        (instance, "fake/m", "model", 1.0),
        (f"oracle-{instance}", "agent/oracle", "oracle", 1.0),
        (f"nop-{instance}", "agent/nop", "nop", 0.0),
    ]
    model, oracle, nop = report["runs"]
    assert model["cost_usd"] > 0 and model["api_model"] == "m"
    for sanity in (oracle, nop):
        assert sanity["cost_usd"] == 0.0 and sanity["api_model"] is None
        assert sanity["usage"]["total_tokens"] == 0 and sanity["requests"] == []
    assert report["totals"]["cost_usd"] == model["cost_usd"]
    by_model = report["totals"]["reward_by_model"]
    assert {k: (v["rewarded"], v["mean"]) for k, v in by_model.items()} == {
        "fake/m": (1, 1.0),
        "agent/oracle": (1, 1.0),
        "agent/nop": (1, 0.0),
    }
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["fake__m.jsonl"]
    (line,) = (out / "predictions" / "fake__m.jsonl").read_text().splitlines()
    assert json.loads(line)["model_name_or_path"] == "fake/m"
    summary = (out / "summary.md").read_text()
    by_model_table = summary.split("## By model")[1].split("##")[0]
    rows = [ln.split("|")[1].strip() for ln in by_model_table.splitlines() if ln.startswith("| ")]
    assert rows[1:] == ["fake/m", "agent/oracle", "agent/nop"]  # after the header
    assert "| 1/1 100%" in by_model_table and "| 0/1 0%" in by_model_table
    junit = (out / "junit.xml").read_text()
    for label in ("fake/m", "agent/oracle", "agent/nop"):
        assert junit.count(f'<testsuite name="{label}') == 1, label
    assert "agent/oracle" in (out / "report.html").read_text()


def test_agent_flag_runs_are_not_the_file_s_model(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """`--agent oracle` on a file whose defaults name a model: the model is never called
    nor named; no predictions file."""
    srv = loopback_thread(per_conversation(fix))
    shutil.copytree(FIXTURES / "swe-bench", tmp_path / "swe")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        SWE_HEAD.format(url=srv.base_url) + "defaults: {model: fake/m}\nsuites:\n" + SWE_ENTRY
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out, "--agent", "oracle")
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = report_of(out)["runs"]
    assert (run["model"], run["agent"], run["reward"]) == ("agent/oracle", "oracle", 1.0)
    assert srv.requests == []
    assert not (out / "predictions").exists()
    assert "fake/m" not in (out / "summary.md").read_text()
    assert "fake/m" not in (out / "junit.xml").read_text()
    assert list(report_of(out)["totals"]["reward_by_model"]) == ["agent/oracle"]


def test_a_model_that_does_nothing_fails_and_a_planted_reward_does_not_count(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    def cheat(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt", "c0")
        return reply_message("done")

    srv = loopback_thread(per_conversation(cheat))
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "suites:\n"
        "  - {format: harbor, path: harbor, model: fake/m}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 3, res.stderr  # broken-verifier errored
    runs = {r["id"]: r for r in report_of(out)["runs"]}
    assert runs["hello"]["status"] == "check_failed" and runs["hello"]["reward"] == 0.0
    broken = runs["broken-verifier"]
    assert broken["status"] == "error" and broken["reward"] is None
    assert "neither /logs/verifier/reward.json nor" in broken["error"]


@pytest.mark.parametrize(
    ("suite", "flags", "code", "broken"),
    [
        ("harbor", (), 1, ["broken-verifier: oracle", "broken-verifier: nop"]),
        ("terminal-bench", (), 1, ["broken-verifier: oracle", "broken-verifier: nop"]),
        ("swe-bench/instances.jsonl", ("--build", "swe-bench"), 0, []),
    ],
)
def test_suite_check_on_the_fixtures(
    tmp_path: Path, image: str, suite: str, flags: tuple[str, ...], code: int, broken: list[str]
) -> None:
    args = [a if a != "swe-bench" else str(FIXTURES / a) for a in flags]
    res = run_cli("suite", "check", FIXTURES / suite, "--out", tmp_path / "out", *args)
    assert res.returncode == code, res.stdout + res.stderr
    listed = [ln.strip() for ln in res.stdout.splitlines() if ln.startswith("  ")]
    assert [ln.split(" got")[0] for ln in listed] == broken
    runs = report_of(tmp_path / "out")["runs"]
    assert {r["usage"]["total_tokens"] for r in runs} == {0}  # no model was called
    assert {r["reward"] for r in runs if "hello" in r["id"] or "tinycalc" in r["id"]} == {0.0, 1.0}
    assert {(r["agent"], r["model"]) for r in runs} == {
        ("oracle", "agent/oracle"),
        ("nop", "agent/nop"),
    }
    if suite.startswith("swe-bench"):
        assert not (tmp_path / "out" / "predictions").exists()  # no model's work
        (oracle,) = [r for r in runs if r["agent"] == "oracle"]
        patch = (tmp_path / "out" / oracle["environment"]["patch"]).read_text()
        assert "raise ValueError" in patch  # the gold patch, as the diff saw it


def test_the_verifier_runs_as_the_task_s_verifier_user(tmp_path: Path, image: str) -> None:
    """Harbor's `[verifier].user`: the tests run as that user, the work stays the agent's;
    a user the image does not know is the verifier's error, not a score."""
    for name, user in (("as-nobody", "nobody"), ("as-ghost", "no-such-user")):
        task = tmp_path / "harbor" / name
        shutil.copytree(FIXTURES / "harbor" / "hello", task)
        toml = task / "task.toml"
        toml.write_text(toml.read_text().replace("[verifier]\n", f"[verifier]\nuser = '{user}'\n"))
        (task / "tests" / "test.sh").write_text(
            "#!/bin/bash\n"
            'echo "{\\"reward\\": 1, \\"uid\\": $(id -u)}" > /logs/verifier/reward.json\n'
            'echo "work=$(stat -c %U /app/hello.txt) tests=$(stat -c %U /tests/test.sh)"\n'
        )
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("version: 1\nsuites:\n  - {format: harbor, path: harbor, agent: oracle}\n")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 3, res.stdout + res.stderr  # the ghost's run errored
    runs = {r["id"]: r for r in report_of(out)["runs"]}
    nobody = runs["as-nobody"]
    assert nobody["status"] == "completed", nobody["error"]
    assert nobody["rewards"] == {"reward": 1.0, "uid": 65534.0}
    said = out / "harbor" / "as-nobody" / "as-nobody" / "verifier" / "test-stdout.txt"
    assert said.read_text().split() == ["work=root", "tests=nobody"]
    ghost = runs["as-ghost"]
    assert ghost["status"] == "error" and ghost["reward"] is None
    assert "to user 'no-such-user'" in ghost["error"]


@pytest.mark.parametrize("given_out", [False, True])
def test_suite_check_s_hint_names_files_that_are_there_and_works(
    tmp_path: Path, image: str, given_out: bool
) -> None:
    """A check with an errored run is kept: the retry line `runner run` printed names a
    task file and out dir that exist after the check, and works as printed."""
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    out = ("--out", tmp_path / "out") if given_out else ()
    temp = tmp_path / "temp"
    temp.mkdir()
    res = run_cli("suite", "check", tmp_path / "harbor", *out, env={"TMPDIR": str(temp)})
    assert res.returncode == 1, res.stdout + res.stderr  # broken-verifier is listed
    (hint,) = [ln for ln in res.stderr.splitlines() if "run them again with: " in ln]
    words = shlex.split(hint.split("run them again with: ", 1)[1].split(" (", 1)[0])
    assert words[:2] == ["runner", "run"] and words[-2:] == ["--resume", "--retry-errored"]
    task_file, out_dir = Path(words[2]), Path(words[words.index("--out") + 1])
    assert task_file.is_file() and (out_dir / "report.json").is_file()
    assert task_file.parent.parent == temp and f"kept in {task_file.parent}" in res.stdout
    again = run_cli(*words[1:])
    assert again.returncode == 3, again.stdout + again.stderr  # the verifier still breaks
    runs = report_of(out_dir)["runs"]
    assert len(runs) == 4 and sorted(r["id"] for r in runs if r["status"] == "error") == [
        "nop.broken-verifier",
        "oracle.broken-verifier",
    ]


def test_a_sound_check_leaves_no_temp_dir(tmp_path: Path, image: str) -> None:
    shutil.copytree(FIXTURES / "harbor" / "hello", tmp_path / "harbor" / "hello")
    temp = tmp_path / "temp"
    temp.mkdir()
    res = run_cli("suite", "check", tmp_path / "harbor", env={"TMPDIR": str(temp)})
    assert res.returncode == 0, res.stdout + res.stderr
    assert [p.name for p in temp.iterdir() if p.name.startswith("runner-suite-check-")] == []


def test_suite_check_lists_a_task_it_cannot_read_and_checks_the_rest(
    tmp_path: Path, image: str
) -> None:
    """The review's suite: one task runner reads, one with a multi-step task.toml, one
    whose solution runner cannot run (nop still runs on it). Exit 1, not 2, and no temp
    dir kept for a batch whose runs all scored as they should."""
    suite = tmp_path / "harbor"
    shutil.copytree(FIXTURES / "harbor" / "hello", suite / "hello")
    shutil.copytree(FIXTURES / "harbor" / "hello", suite / "steps")
    with (suite / "steps" / "task.toml").open("a") as f:
        f.write("\n[[steps]]\nname = 'two'\n")
    shutil.copytree(FIXTURES / "harbor" / "hello", suite / "no-solution")
    (suite / "no-solution" / "solution" / "solve.sh").unlink()
    (suite / "no-solution" / "solution" / "solve.sh").symlink_to("/bin/true")
    temp = tmp_path / "temp"
    temp.mkdir()
    res = run_cli("suite", "check", suite, "--out", tmp_path / "out", env={"TMPDIR": str(temp)})
    assert res.returncode == 1, res.stdout + res.stderr
    listed = [ln.strip() for ln in res.stdout.splitlines() if ln.startswith("  ")]
    assert [ln.split(": ")[0:2] for ln in listed] == [
        ["no-solution", "oracle cannot run"],
        ["steps", "cannot be read"],
    ]
    assert "solution/solve.sh: (file): a symbolic link" in listed[0]
    runs = report_of(tmp_path / "out")["runs"]
    assert sorted((r["id"], r["reward"]) for r in runs) == [
        ("nop.hello", 0.0),
        ("nop.no-solution", 0.0),
        ("oracle.hello", 1.0),
    ]
    assert [p.name for p in temp.iterdir() if p.name.startswith("runner-suite-check-")] == []


def test_a_reward_file_over_the_cap_is_an_error_naming_it_once(tmp_path: Path, image: str) -> None:
    task = tmp_path / "harbor" / "big-reward"
    shutil.copytree(FIXTURES / "harbor" / "hello", task)
    (task / "tests" / "test.sh").write_text(
        "#!/bin/bash\nhead -c 70000 /dev/zero | tr '\\0' 1 > /logs/verifier/reward.txt\n"
    )
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("version: 1\nsuites:\n  - {format: harbor, path: harbor, agent: nop}\n")
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 3, res.stdout + res.stderr
    (run,) = report_of(tmp_path / "out")["runs"]
    assert run["status"] == "error" and run["reward"] is None
    assert run["error"].count("/logs/verifier/reward.txt") == 1, run["error"]
    assert "over 65536 bytes" in run["error"]


def test_a_resolved_run_a_limit_stopped_passes_and_says_the_limit(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    """Review 27b #3: the agent writes the answer, then keeps calling tools until
    `max_requests` stops it. The verifier grades what it left, as Harbor does: passed,
    with the limit beside it, and the pass rate agrees with the mean reward."""

    def busy(req: RecordedRequest, i: int) -> Reply:
        if i == 0:
            return shell("echo 'Hello, world!' > hello.txt", "c0")
        return shell("ls", f"c{i}")

    srv = loopback_thread(per_conversation(busy))
    shutil.copytree(FIXTURES / "harbor", tmp_path / "harbor")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        "defaults: {limits: {max_requests: 2}}\n"
        "suites:\n"
        "  - {format: harbor, path: harbor, select: {ids: [hello]}, model: fake/m}\n"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    report = report_of(out)
    (run,) = report["runs"]
    assert (run["status"], run["stopped_by"], run["reward"]) == ("completed", "max_requests", 1.0)
    assert report["totals"]["pass_rate"] == report["totals"]["reward_by_model"]["fake/m"]["mean"]
    summary = (out / "summary.md").read_text()
    assert "PASS (agent stopped: requests)" in summary and "FAIL" not in summary


def test_a_verifier_timeout_records_the_time_it_took(tmp_path: Path, image: str) -> None:
    task = tmp_path / "harbor" / "slow"
    shutil.copytree(FIXTURES / "harbor" / "hello", task)
    toml = (task / "task.toml").read_text().replace("timeout_sec = 60.0", "timeout_sec = 2.0")
    (task / "task.toml").write_text(toml)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\nsleep 60\n")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("version: 1\nsuites:\n  - {format: harbor, path: harbor, agent: nop}\n")
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 3, res.stdout + res.stderr
    (run,) = report_of(tmp_path / "out")["runs"]
    assert run["status"] == "error" and "timed out after 2 s" in run["error"]
    v = run["verifier"]
    assert 2.0 <= v["duration_s"] < 30, v
    assert v["fresh_environment"] is False and v["start_s"] is None  # the agent's container
