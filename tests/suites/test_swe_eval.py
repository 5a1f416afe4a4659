"""The script a SWE-bench instance's tests run by, run for real with bash in a git repo."""

from __future__ import annotations

import subprocess
from pathlib import Path

from runner.suites.swe_eval import (
    APPLY_PATCH_FAIL,
    END_TEST_OUTPUT,
    START_TEST_OUTPUT,
    TEST_EXIT_CODE,
    WORKDIR,
    eval_script,
)
from tests.support.fixtures import make_git_repo

TEST_PATCH = """diff --git a/test_a.py b/test_a.py
--- a/test_a.py
+++ b/test_a.py
@@ -1 +1 @@
-old
+new
diff --git a/test_new.py b/test_new.py
new file mode 100644
--- /dev/null
+++ b/test_new.py
@@ -0,0 +1 @@
+EOF
diff --git a/it's.py b/it's.py
--- a/it's.py
+++ b/it's.py
@@ -1 +1 @@
-x
+y
"""
"""Touches two files of the repo (one with a quote in its name) and creates one; a line of
it is a heredoc's usual end word."""


def run(script: str, repo: Path) -> subprocess.CompletedProcess[str]:
    """The script as the harness runs it, with its `cd /testbed` pointed at `repo`."""
    here = script.replace(f"cd {WORKDIR}\n", f"cd '{repo}'\n", 1)
    assert here != script
    return subprocess.run(["bash", "-c", here], capture_output=True, text=True, timeout=30)


def instance(repo: Path, **text: str) -> dict[str, str]:
    base = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()
    return {"base_commit": base, "test_patch": TEST_PATCH, **text}


def test_a_written_script_applies_runs_between_the_markers_and_resets(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r", {"test_a.py": "old\n", "it's.py": "x\n"})
    (repo / "test_a.py").write_text("changed by the agent\n")
    cmd = "cat test_a.py test_new.py it\\'s.py; (exit 3)"
    done = run(eval_script(instance(repo, test_cmd=cmd)), repo)
    lines = done.stdout.splitlines()
    start, end = lines.index(START_TEST_OUTPUT), lines.index(END_TEST_OUTPUT)
    assert lines[start + 1 : end] == ["new", "EOF", "y"], done.stdout + done.stderr
    assert lines[end + 1] == f"{TEST_EXIT_CODE}: 3"
    assert (repo / "test_a.py").read_text() == "old\n" and not (repo / "test_new.py").exists()
    assert (repo / "it's.py").read_text() == "x\n"


def test_a_test_patch_that_does_not_apply_says_so_and_runs_no_test(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "r", {"test_a.py": "something else\n"})
    done = run(eval_script(instance(repo, test_cmd="echo ran-the-tests")), repo)
    assert done.returncode == 1 and APPLY_PATCH_FAIL in done.stdout
    assert START_TEST_OUTPUT not in done.stdout and "ran-the-tests" not in done.stdout


def test_an_instance_s_own_script_gets_the_exit_code_recorded_after_its_tests() -> None:
    own = f"cd {WORKDIR}\necho {START_TEST_OUTPUT!r}\npytest -x\necho {END_TEST_OUTPUT!r}\ntail"
    script = eval_script({"eval_script": own, "test_cmd": "ignored"})
    assert script.split("\n") == [
        f"cd {WORKDIR}",
        f"echo {START_TEST_OUTPUT!r}",
        "pytest -x",
        "SWEBENCH_TEST_EXIT_CODE=$?",
        f"echo {END_TEST_OUTPUT!r}",
        f'echo "{TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"',
        "tail",
    ]
    assert eval_script({"eval_script": "pytest\n"}) == "pytest\n"  # no marker: as given


def test_the_heredoc_end_word_is_never_a_line_of_the_patch() -> None:
    first = eval_script({"base_commit": "abc1234", "test_patch": TEST_PATCH, "test_cmd": "t"})
    word = first.split("<<'", 1)[1].split("'", 1)[0]
    hostile = TEST_PATCH + word + "\n"
    second = eval_script({"base_commit": "abc1234", "test_patch": hostile, "test_cmd": "t"})
    other = second.split("<<'", 1)[1].split("'", 1)[0]
    assert other != word and other.startswith("EOF_")
    assert word in hostile.splitlines() and other not in hostile.splitlines()
    assert second.split("\n").count(other) == 1 and f"<<'{other}'" in second
