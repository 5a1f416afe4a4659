"""SWE-bench graded as its harness grades a prediction: the run's recorded patch applied in
a fresh container of the instance image, then the test_patch and the eval script. What
the agent did outside the patch (a planted usercustomize.py, files outside the repo, a
file left out of the patch) cannot reach the grade, so report.json and predictions.jsonl
agree. Scripted models on the loopback server do the work, in podman."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from runner.sandbox.engine import RUN_LABEL, Engine
from tests.support import paths
from tests.support.cli import run_cli
from tests.support.environments import engine_answers
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import RecordedRequest, Reply, per_conversation, reply_function_call
from tests.support.loopback import reply_message as message

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(not engine_answers("podman"), reason="podman does not answer here"),
]

FIXTURE = paths.FIXTURES / "suites" / "swe-bench"
INSTANCE = "runner-fixtures__tinycalc-1"

FIXED_OPS = """\
cat > tinycalc/ops.py <<'EOF'
def add(a, b):
    return a + b


def sub(a, b):
    return a - b


def clamp(value, low, high):
    if low > high:
        raise ValueError("low is above high")
    if value < low:
        return low
    if value > high:
        return high
    return value
EOF
"""


def plant(body: str) -> str:
    """A usercustomize.py in the agent's container: every later python3 of that
    container runs it at start-up, tests included, yet it is outside the repository."""
    return (
        "d=$(python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p \"$d\"\n"
        "cat > \"$d/usercustomize.py\" <<'EOF'\n"
        "import sys\n"
        "sys.path.insert(0, '/testbed')\n"
        "import tinycalc, tinycalc.ops\n"
        f"{body}\n"
        "EOF\n"
        "echo planted > /root/outside-the-repo.txt\n"
    )


CHEAT = plant(
    "def clamp(value, low, high):\n"
    "    if low > high:\n"
    "        raise ValueError('low is above high')\n"
    "    return max(low, min(value, high))\n"
    "tinycalc.clamp = tinycalc.ops.clamp = clamp"
)
"""Fixes nothing in the repo: clamp is replaced at import, in this container only."""
SABOTAGE = FIXED_OPS + plant("tinycalc.add = tinycalc.ops.add = lambda a, b: 0")
"""The right fix, and a planted add that breaks a PASS_TO_PASS test in this container."""
BIG = FIXED_OPS + "python3 -c \"open('notes.txt', 'w').write('# filler\\n' * (2 << 20))\"\n"
"""The right fix, and an 18 MiB file: over the patch's per-file cap, so left out."""

SCRIPTS = {"fake/cheat": CHEAT, "fake/sabotage": SABOTAGE, "fake/big": BIG}


def by_model(req: RecordedRequest, i: int) -> Reply:
    model = str(req.json.get("model", ""))
    if i == 0:
        script = (
            SCRIPTS["fake/" + model] + "\ncd /testbed && python3 -B -m unittest discover -s tests"
        )
        return reply_function_call("shell", {"command": ["bash", "-c", script]}, call_id="c0")
    return message("done")


def report_of(out: Path) -> list[dict[str, Any]]:
    return list(json.loads((out / "report.json").read_text())["runs"])


def prediction(out: Path, model: str) -> dict[str, Any]:
    name = model.replace("/", "__")
    (line,) = (out / "predictions" / f"{name}.jsonl").read_text().splitlines()
    return dict(json.loads(line))


def test_only_the_recorded_patch_is_graded(
    loopback_thread: ThreadFactory, tmp_path: Path, image: str
) -> None:
    srv = loopback_thread(per_conversation(by_model))
    shutil.copytree(FIXTURE, tmp_path / "swe")
    entries = "".join(
        f"  - {{format: swe-bench, path: swe/instances.jsonl, model: {m}, "
        f"id_prefix: {m.split('/')[1]}-, environment: {{build: swe}}}}\n"
        for m in SCRIPTS
    )
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\n"
        f"providers: {{fake: {{base_url: '{srv.base_url}', env_key: FAKE_API_KEY}}}}\n"
        f"suites:\n{entries}"
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 1, res.stdout + res.stderr  # cheat and big are not resolved
    runs = {r["model"]: r for r in report_of(out)}
    assert set(runs) == set(SCRIPTS)
    for model, run in runs.items():
        v = run["verifier"]
        assert v["fresh_environment"] is True, model
        assert v["start_s"] is not None and 0 < v["start_s"] <= v["duration_s"]
        # The report graded exactly what the harness will read.
        patch = prediction(out, model)["model_patch"]
        recorded = run["environment"]["patch"]
        assert patch == ((out / recorded).read_text() if recorded else "")
        assert "usercustomize" not in patch and "outside-the-repo" not in patch

    cheat = runs["fake/cheat"]
    assert prediction(out, "fake/cheat")["model_patch"] == ""
    assert cheat["status"] == "check_failed" and cheat["resolution"] == "not", cheat["error"]
    assert cheat["rewards"]["fail_to_pass"] == 0.0
    assert cheat["verifier"]["patch_applied"] is None  # an empty patch: nothing to apply

    sabotage = runs["fake/sabotage"]
    assert sabotage["status"] == "completed", sabotage["error"]
    assert (sabotage["reward"], sabotage["resolution"]) == (1.0, "resolved")
    assert sabotage["verifier"]["patch_applied"] is True
    assert "return high" in prediction(out, "fake/sabotage")["model_patch"]

    big = runs["fake/big"]
    assert big["status"] == "check_failed" and big["resolution"] == "not"
    assert big["reward"] == 0.0
    assert "notes.txt: over 16.0 MiB" in big["error"] and "cannot be resolved" in big["error"]
    assert big["verifier"]["note"] is not None and "notes.txt" in big["verifier"]["note"]
    assert big["environment"]["left_out"] == ["notes.txt: over 16.0 MiB, left out of the patch"]
    kept = prediction(out, "fake/big")["model_patch"]
    assert "return high" in kept and "notes.txt" not in kept
    incomplete = json.loads((out / "predictions" / "fake__big.incomplete.json").read_text())
    assert incomplete == {INSTANCE: big["environment"]["left_out"]}
    assert sorted(p.name for p in (out / "predictions").glob("*.incomplete.json")) == [
        "fake__big.incomplete.json"
    ]


def broken_copy(tmp_path: Path, name: str, field: str, old: str, new: str) -> str:
    """The fixture instance under a new id, one of its patches made not to apply."""
    raw = json.loads((FIXTURE / "instances.jsonl").read_text())
    assert old in raw[field]
    raw[field] = raw[field].replace(old, new)
    raw["instance_id"] = f"{INSTANCE}-{name}"
    (tmp_path / f"{name}.jsonl").write_text(json.dumps(raw) + "\n")
    return (
        f"  - {{format: swe-bench, path: {name}.jsonl, agent: oracle, "
        "environment: {build: swe}}\n"
    )


def test_a_test_patch_that_does_not_apply_is_an_error_and_a_gold_patch_is_not_resolved(
    tmp_path: Path, image: str
) -> None:
    shutil.copytree(FIXTURE, tmp_path / "swe")
    entries = broken_copy(
        tmp_path,
        "badtest",
        "test_patch",
        "     def test_clamp_below(self):",
        "     def gone(self):",
    ) + broken_copy(tmp_path, "badgold", "patch", "     if value < low:", "     if value <= low:")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(f"version: 1\nsuites:\n{entries}")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 3, res.stdout + res.stderr  # the verifier's error
    runs = {r["id"]: r for r in report_of(out)}

    bad_test = runs[f"{INSTANCE}-badtest"]
    assert bad_test["status"] == "error" and bad_test["reward"] is None
    assert bad_test["rewards"] is None or bad_test["rewards"] == {}
    assert f"{INSTANCE}-badtest: the instance's test_patch does not apply" in bad_test["error"]
    assert "tests/test_ops.py" in bad_test["error"]  # git's own words name the file

    bad_gold = runs[f"{INSTANCE}-badgold"]
    assert bad_gold["status"] == "check_failed" and bad_gold["resolution"] == "not"
    assert bad_gold["rewards"] == {"reward": 0.0}  # no test ran: no share to give
    assert "the gold patch did not apply" in bad_gold["error"]
    # What was tried, and what the image lacks (the base image has git, not `patch`).
    assert (
        "tried git apply, git apply --3way, git apply --reject, patch --fuzz=5"
        in (bad_gold["error"])
    )
    assert "no `patch` program, so patch --fuzz=5 could not run" in bad_gold["error"]
    assert bad_gold["verifier"]["note"] in bad_gold["error"]
    assert bad_gold["verifier"]["patch_applied"] is False
    assert "Patch Apply Failed" in bad_gold["verifier"]["output_tail"]


def copies(tmp_path: Path, name: str, ids: list[str], **fields: str) -> None:
    """The fixture instance under each of `ids`, with `fields` over its own, in one file."""
    raw = json.loads((FIXTURE / "instances.jsonl").read_text())
    lines = [json.dumps({**raw, **fields, "instance_id": i}) + "\n" for i in ids]
    (tmp_path / name).write_text("".join(lines))


def live_of(prefix: str) -> int:
    """How many containers, running or not, carry a run label starting with `prefix`."""
    engine = Engine("podman")
    done = subprocess.run(
        engine.argv(["ps", "-a", "--format", "{{.Labels}}"]),
        env=engine.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return sum(f"{RUN_LABEL}:{prefix}" in line for line in done.stdout.splitlines())


def test_max_environments_counts_the_grading_container(tmp_path: Path, image: str) -> None:
    """The agent's container is removed before its grading container starts, in its slot:
    with max_environments 1, never two of the batch's containers at once."""
    shutil.copytree(FIXTURE, tmp_path / "swe")
    prefix = f"cap{uuid.uuid4().hex[:8]}-"
    raw = json.loads((FIXTURE / "instances.jsonl").read_text())
    slow = "sleep 1; " + raw["test_cmd"]  # each grading lasts long enough to be seen
    copies(tmp_path, "three.jsonl", [f"{INSTANCE}-{n}" for n in "abc"], test_cmd=slow)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nmax_environments: 1\nsuites:\n"
        f"  - {{format: swe-bench, path: three.jsonl, agent: oracle, id_prefix: {prefix}, "
        "environment: {build: swe}}\n"
    )
    seen: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append(live_of(prefix))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        res = run_cli("run", tasks, "--out", tmp_path / "out", "--concurrency", "3")
    finally:
        done.set()
        watcher.join()
    assert res.returncode == 0, res.stdout + res.stderr
    runs = report_of(tmp_path / "out")
    assert [r["resolution"] for r in runs] == ["resolved"] * 3
    assert all(r["verifier"]["fresh_environment"] for r in runs)
    assert len(seen) > 10 and max(seen) == 1, seen  # seen alive, never two at once


def test_the_grading_timeout_is_the_user_s_and_a_timeout_is_recorded_as_it_went(
    tmp_path: Path, image: str
) -> None:
    shutil.copytree(FIXTURE, tmp_path / "swe")
    copies(tmp_path, "slow.jsonl", [f"{INSTANCE}-slow"], test_cmd="sleep 60")
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nsuites:\n  - {format: swe-bench, path: slow.jsonl, agent: oracle, "
        "verifier_timeout_s: 3, environment: {build: swe}}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 3, res.stdout + res.stderr  # the verifier's error, not a score
    (run,) = report_of(tmp_path / "out")
    assert run["status"] == "error" and run["reward"] is None
    assert "timed out after 3 s" in run["error"], run["error"]
    v = run["verifier"]
    assert v["fresh_environment"] is True
    assert v["start_s"] is not None and 0 < v["start_s"] < v["duration_s"]
    assert 3.0 <= v["duration_s"] < 40, v


def test_an_oracle_graded_on_a_huge_gold_patch_says_nothing_of_its_own_diff(
    tmp_path: Path, image: str
) -> None:
    """The gold patch adds a file over the patch's per-file cap: the oracle's own diff
    leaves it out, but the oracle is graded on the gold patch itself, so that diff's
    gap is no note on a run that passed."""
    shutil.copytree(FIXTURE, tmp_path / "swe")
    raw = json.loads((FIXTURE / "instances.jsonl").read_text())
    lines = (17 << 20) // len("# pad\n")
    huge = (
        "diff --git a/huge.py b/huge.py\nnew file mode 100644\n--- /dev/null\n+++ b/huge.py\n"
        f"@@ -0,0 +1,{lines} @@\n" + "+# pad\n" * lines
    )
    copies(tmp_path, "huge.jsonl", [f"{INSTANCE}-huge"], patch=raw["patch"] + huge)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "version: 1\nsuites:\n  - {format: swe-bench, path: huge.jsonl, agent: oracle, "
        "environment: {build: swe}}\n"
    )
    res = run_cli("run", tasks, "--out", tmp_path / "out")
    assert res.returncode == 0, res.stdout + res.stderr
    (run,) = report_of(tmp_path / "out")
    assert (run["status"], run["resolution"]) == ("completed", "resolved")
    assert run["error"] is None, run["error"]  # nothing about huge.py on a passing run
    assert run["verifier"]["patch_applied"] is True and run["verifier"]["note"] is None
    # The container's diff is still recorded as it is: huge.py is not in patches/.
    assert run["environment"]["left_out"] == ["huge.py: over 16.0 MiB, left out of the patch"]
