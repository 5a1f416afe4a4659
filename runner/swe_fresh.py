"""The steps of grading a SWE-bench run as the official harness grades a prediction
(issue 27): in an environment of its own, started from the instance image, the test_patch
checked, then the run's patch applied exactly as recorded (the text predictions.jsonl
carries as `model_patch`), then the instance's eval script (runner/verify.py runs it).

Nothing else the agent did in its own container (files outside the repository, a planted
`usercustomize.py`, a process left running, a file left out of the patch) can reach the
grade, so the report and predictions.jsonl cannot disagree.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from runner.config import Run
from runner.record import RunRecord
from runner.sandbox.environment import Environment
from runner.suites.model import SuiteTask

PATCH_AT = "/tmp/patch.diff"
"""Where the harness puts the prediction (`CONTAINER_PATCH_FILE`): outside the work."""
TEST_PATCH_AT = "/tmp/runner-test-patch.diff"
APPLY_TIMEOUT_S = 600.0
OUTPUT_CAP = 1 << 20

APPLIED = ">>>>> Applied Patch"
APPLY_FAILED = ">>>>> Patch Apply Failed"
"""The harness's markers (swebench.harness.constants)."""

MISSING = ">>>>> runner: not in the image:"
"""Said, with the program's name, for a try the image cannot make."""
TRIES = ("git apply", "git apply --3way", "git apply --reject", "patch --fuzz=5")
"""The tries of `_APPLY`, as a note names them."""

_APPLY = f"""
tried=
for cmd in "git apply --verbose" "git apply --verbose --3way" \\
    "git apply --verbose --reject" "patch --batch --forward --fuzz=5 -p1 -i"; do
  prog=${{cmd%% *}}
  if ! command -v "$prog" >/dev/null 2>&1; then echo "{MISSING} $prog"; continue; fi
  if [ -n "$tried" ]; then git checkout -- . ; git clean -fd; fi
  tried=1
  if $cmd {PATCH_AT}; then echo '{APPLIED}'; exit 0; fi
done
if git apply --check --reverse {PATCH_AT}; then echo '{APPLIED}: already applied'; exit 0; fi
echo '{APPLY_FAILED}'
exit 1
"""
"""The harness's tries, in its order (swebench.harness.run_evaluation, GIT_APPLY_CMDS):
each from a pristine tree, then whether the patch is already there. Its module imports
docker, so the sequence is restated here rather than called."""

_CHECK_TEST_PATCH = f"""
git apply --check {TEST_PATCH_AT}
code=$?
rm -f {TEST_PATCH_AT}
exit $code
"""


def gold_patch(run: Run) -> bytes | None:
    """The gold patch an `agent: oracle` SWE-bench run is graded on, as the harness
    evaluates the gold prediction; None for any other run (graded on its recorded patch).
    Such a run's own diff is not its grade's, so what that diff left out is no note."""
    task = run.suite
    if run.agent != "oracle" or task is None or task.verifier.grading != "swe-bench":
        return None
    if task.solution is None or not task.solution.patch:
        return None
    return task.solution.patch.encode("utf-8", "surrogateescape")


async def recorded_patch(rec: RunRecord, out_dir: Path) -> tuple[bytes, tuple[str, ...]]:
    """The run's patch as the out dir holds it (what predictions.jsonl is written from),
    empty when it changed nothing, and what the patch left out."""
    env = rec.environment
    rel = env.patch if env is not None else None
    path = out_dir / rel if rel is not None else None
    if path is None and rec.result is not None:
        path = rec.result.patch_path
    left = env.left_out if env is not None else ()
    if path is None:
        return b"", left
    return await anyio.to_thread.run_sync(path.read_bytes), left


async def test_patch_problem(env: Environment, task: SuiteTask) -> str | None:
    """Why the instance's test_patch does not apply to the fresh tree at base_commit, or
    None. Checked before the run's patch goes in: the eval script resets the files the
    test_patch touches to base_commit before applying it, so this is the tree it meets."""
    patch = (task.verifier.test_patch or "").encode("utf-8", "surrogateescape")
    ok, said, code = await _with_file(env, TEST_PATCH_AT, patch, _CHECK_TEST_PATCH)
    if ok:
        return None
    return said.strip()[-600:] or f"git apply --check exited {code}"


async def apply_patch(env: Environment, patch: bytes) -> tuple[bool, str]:
    """The run's patch applied as the harness applies a prediction; (applied, output)."""
    ok, said, _ = await _with_file(env, PATCH_AT, patch, _APPLY)
    return ok, said


def not_applied(whose: str, said: str) -> str:
    """Why no test ran: what was tried, and which tries the image could not make (the
    official images have `patch`; one built without it cannot run the fuzzy fallback)."""
    missing = sorted(
        {
            line.removeprefix(MISSING).strip()
            for line in said.splitlines()
            if line.startswith(MISSING)
        }
    )
    lacking = ""
    if missing:
        could_not = [t for t in TRIES if t.split()[0] in missing]
        lacking = (
            f"; the image has no {', no '.join(f'`{m}`' for m in missing)} program, so "
            f"{', '.join(could_not)} could not run"
        )
    return (
        f"the {whose} patch did not apply to the instance at its base_commit (tried "
        f"{', '.join(TRIES)}{lacking}), so no test ran"
    )


async def _with_file(
    env: Environment, path: str, data: bytes, script: str
) -> tuple[bool, str, int]:
    """`data` written to `path`, then `script` run on it in the workdir: (it succeeded in
    time, its output, its exit code)."""
    await env.write_file(path, data)
    done = await env.exec(
        ["bash", "-c", script],
        cwd=env.workdir,
        env={},
        timeout_s=APPLY_TIMEOUT_S,
        output_cap=OUTPUT_CAP,
    )
    ok = done.exit_code == 0 and not done.timed_out
    return ok, done.output.decode("utf-8", "replace"), done.exit_code
