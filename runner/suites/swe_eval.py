"""The script a SWE-bench instance's tests run by: the instance's own `eval_script` with
the test command's exit status recorded, or, for a local instance that gives a
`test_cmd`, one written here the way the 5.x harness writes them (reset the files the
test_patch touches, apply it, run the tests between the log markers, reset again)."""

from __future__ import annotations

import hashlib
import re

START_TEST_OUTPUT = ">>>>> Start Test Output"
END_TEST_OUTPUT = ">>>>> End Test Output"
TEST_EXIT_CODE = ">>>>> Test Exit Code"
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
"""The harness's log markers (swebench.harness.constants), which its grading looks for."""

WORKDIR = "/testbed"
DIFF_HEADER = re.compile(r"^diff --git a/(\S+) b/(\S+)$", re.M)


def eval_script(text: dict[str, str]) -> str:
    if "eval_script" in text:
        return _record_exit_code(text["eval_script"])
    test_patch = text["test_patch"]
    files = sorted({m[1] for m in DIFF_HEADER.finditer(test_patch)})
    created = {
        m[1] for m in re.finditer(r"^diff --git a/(\S+) b/\S+\nnew file mode", test_patch, re.M)
    }
    kept = [f for f in files if f not in created]
    base = text["base_commit"]
    eof = _delimiter(test_patch)
    reset = [f"git checkout {base} -- {_q(kept)}"] if kept else []
    drop = [f"rm -f -- {_q(sorted(created))}"] if created else []
    return "\n".join(
        [
            "#!/bin/bash",
            "set -uo pipefail",
            f"cd {WORKDIR}",
            *reset,
            *drop,
            f"if ! git apply --verbose - <<'{eof}'",
            test_patch.rstrip("\n"),
            eof,
            f"then echo {_q([APPLY_PATCH_FAIL])}; exit 1; fi",
            f"echo {_q([START_TEST_OUTPUT])}",
            text["test_cmd"],
            "SWEBENCH_TEST_EXIT_CODE=$?",
            f"echo {_q([END_TEST_OUTPUT])}",
            f'echo "{TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"',
            *reset,
            *drop,
            "",
        ]
    )


def _record_exit_code(script: str) -> str:
    """The 5.x harness records the test command's exit status after the end marker, which
    its grading cross-checks with the log; its helper lives in a module that needs
    `datasets`, so the same insertion is made here."""
    lines = script.split("\n")
    for i, line in enumerate(lines):
        if END_TEST_OUTPUT in line:
            return "\n".join(
                [
                    *lines[:i],
                    "SWEBENCH_TEST_EXIT_CODE=$?",
                    line,
                    f'echo "{TEST_EXIT_CODE}: $SWEBENCH_TEST_EXIT_CODE"',
                    *lines[i + 1 :],
                ]
            )
    return script


def _delimiter(body: str) -> str:
    """A heredoc end word that no line of `body` is."""
    lines = set(body.splitlines())
    n = 0
    while True:
        word = "EOF_" + hashlib.sha256(f"{n}:{body}".encode()).hexdigest()[:12]
        if word not in lines:
            return word
        n += 1


def _q(words: list[str]) -> str:
    return " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
