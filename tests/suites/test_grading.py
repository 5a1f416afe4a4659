"""The pure graders: Harbor's reward files and Terminal-Bench's pytest summary, over
the shapes verifiers write, broken ones included."""

from __future__ import annotations

import pytest

from runner.errors import VerifierFailed
from runner.suites.grading import PytestSummary, Reward, pytest_summary, reward_from_files

REWARDS: list[tuple[bytes | None, bytes | None, tuple[tuple[str, float], ...], float | None]] = [
    (None, b"1", (("reward", 1.0),), 1.0),
    (None, b"0\n", (("reward", 0.0),), 0.0),
    (None, b"  0.25  \n", (("reward", 0.25),), 0.25),
    (None, b"-1.5e-1", (("reward", -0.15),), -0.15),
    (None, b".5", (("reward", 0.5),), 0.5),
    (b'{"reward": 1}', None, (("reward", 1.0),), 1.0),
    (b'{"accuracy": 0.75}', None, (("accuracy", 0.75),), 0.75),
    (b'{"a": 1, "reward": 0.5, "b": 0}', None, (("a", 1.0), ("reward", 0.5), ("b", 0.0)), 0.5),
    (b'{"a": 1, "b": 0}', None, (("a", 1.0), ("b", 0.0)), None),
    (b'{"reward": 0}', b"1", (("reward", 0.0),), 0.0),  # the JSON file wins
]


@pytest.mark.parametrize(("json_", "txt", "named", "value"), REWARDS)
def test_rewards_read(
    json_: bytes | None,
    txt: bytes | None,
    named: tuple[tuple[str, float], ...],
    value: float | None,
) -> None:
    reward = reward_from_files(json_, txt)
    assert reward == Reward(named)
    assert reward.value == value


BROKEN_REWARDS: list[tuple[bytes | None, bytes | None, str]] = [
    (None, None, "neither"),
    (b'{"reward": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, "nested too deeply"),
    (None, b"", "one number, not 'empty'"),
    (None, b"  \n", "one number"),
    (None, b"pass", "one number, not 'pass'"),
    (None, b"1 0", "one number"),
    (None, b"nan", "one number"),
    (None, b"inf", "one number"),
    (None, b"1e999", "not a finite number"),
    (None, b"\xff", "not UTF-8"),
    (b"", None, "not JSON"),
    (b"{", None, "not JSON"),
    (b"[1]", None, "object of named numbers, not list"),
    (b"1", None, "object of named numbers, not int"),
    (b"{}", None, "names no numeric reward"),
    (b'{"reward": "1"}', None, "names no numeric reward"),
    (b'{"reward": true}', None, "names no numeric reward"),
    (b'{"reward": null}', None, "names no numeric reward"),
    (b'{"reward": NaN}', None, "not JSON"),
    (b'{"reward": Infinity}', None, "not JSON"),
    (b'{"reward": 1e999}', None, "not a finite number"),
    (b'{"reward": {"x": 1}}', None, "names no numeric reward"),
    (b"\xff\xfe", b"1", "not JSON"),  # a broken JSON file is not passed over for the text
    (b'{"reward": 0, "reward": 1}', None, "writes the key 'reward' twice"),
    (b'{"a": 1, "detail": {"x": 1, "x": 2}}', b"1", "writes the key 'x' twice"),
]


def test_reward_json_as_harbor_reads_it() -> None:
    """Harbor leaves out reward.json's fields that are not numbers (a report beside the
    scores), and takes `reward` from reward.txt when the JSON names none."""
    got = reward_from_files(b'{"tests": 3, "detail": "ok", "flag": true}', b"0.5")
    assert got.named == (("tests", 3.0), ("reward", 0.5))
    assert got.value == 0.5
    only = reward_from_files(b'{"reward": 1, "detail": [1]}', b"0")
    assert only.named == (("reward", 1.0),)


@pytest.mark.parametrize(("json_", "txt", "says"), BROKEN_REWARDS)
def test_broken_rewards_are_verifier_failures(
    json_: bytes | None, txt: bytes | None, says: str
) -> None:
    with pytest.raises(VerifierFailed) as caught:
        reward_from_files(json_, txt)
    assert says in str(caught.value)


HEADER = "=" * 27 + " short test summary info " + "=" * 27

LOGS: list[tuple[str, str, PytestSummary]] = [
    (
        "all passed, -rA",
        f"""============================= test session starts ==============================
collected 2 items

../tests/test_outputs.py ..                                              [100%]

==================================== PASSES ====================================
{HEADER}
PASSED ../tests/test_outputs.py::test_file_exists
PASSED ../tests/test_outputs.py::test_file_content
============================== 2 passed in 0.01s ===============================
""",
        PytestSummary(2, 0, True),
    ),
    (
        "one failed with a message",
        f"""{HEADER}
PASSED tests/test_outputs.py::test_a
FAILED tests/test_outputs.py::test_b - AssertionError: assert 'x' == 'y'
========================= 1 failed, 1 passed in 0.12s ==========================
""",
        PytestSummary(1, 1, False),
    ),
    (
        "no counts line (the log cut short)",
        f"{HEADER}\nPASSED t.py::test_a\nPASSED t.py::test_b\n",
        PytestSummary(2, 0, True),
    ),
    (
        "skips and expected failures count as passed",
        f"""{HEADER}
PASSED t.py::test_a
SKIPPED t.py::test_b
XFAIL t.py::test_c - known bug
============= 1 passed, 1 skipped, 1 xfailed in 0.05s =============
""",
        PytestSummary(3, 0, True),
    ),
    (
        "an unexpected pass fails",
        f"{HEADER}\nPASSED t.py::test_a\nXPASS t.py::test_b\n=== 1 passed, 1 xpassed in 0.1s ===\n",
        PytestSummary(1, 1, False),
    ),
    (
        "a collection error",
        f"""==================================== ERRORS ====================================
_________________ ERROR collecting tests/test_outputs.py _________________
E   ModuleNotFoundError: No module named 'numpy'
{HEADER}
ERROR tests/test_outputs.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.19s ===============================
""",
        PytestSummary(0, 1, False),
    ),
    (
        "the counts line reports a failure the lines do not name",
        f"{HEADER}\nPASSED t.py::test_a\n===== 2 failed, 1 passed in 0.30s =====\n",
        PytestSummary(1, 2, False),
    ),
    (
        "parametrized ids and a message with ' - ' inside",
        f"""{HEADER}
PASSED t.py::test_n[1-2]
FAILED t.py::test_n[3 - 4] - ValueError: a - b
=== 1 failed, 1 passed, 2 warnings in 1.00s (0:00:01) ===
""",
        PytestSummary(1, 1, False),
    ),
    (
        "the same test named twice: the last line wins, as in Terminal-Bench",
        f"{HEADER}\nFAILED t.py::test_a - flaky\nPASSED t.py::test_a\n=== 1 passed in 0.1s ===\n",
        PytestSummary(1, 0, True),
    ),
    (
        "same name in two files: one result, as Terminal-Bench keys by name",
        f"{HEADER}\nPASSED a.py::test_x\nPASSED b.py::test_x\n",
        PytestSummary(1, 0, True),
    ),
    (
        "header case and width, noise lines around",
        "build output\n== Short Test Summary Info ==\nnot a result line\n"
        "PASSED t.py::test_a\n\nbye\n",
        PytestSummary(1, 0, True),
    ),
    (
        "leading whitespace and CRLF",
        f"{HEADER}\r\n  PASSED t.py::test_a\r\n  FAILED t.py::test_b\r\n",
        PytestSummary(1, 1, False),
    ),
]


@pytest.mark.parametrize(("log", "summary"), [(log, s) for _, log, s in LOGS],
                         ids=[name for name, _, _ in LOGS])  # fmt: skip
def test_pytest_logs_graded(log: str, summary: PytestSummary) -> None:
    assert pytest_summary(log) == summary


BROKEN_LOGS: list[tuple[str, str]] = [
    ("", "no pytest"),
    ("bash: pytest: command not found\n", "no pytest"),
    ("============ 3 passed in 0.01s ============\n", "no pytest"),  # no summary: not graded
    ("PASSED t.py::test_a\n", "no pytest"),
    (f"{HEADER}\n", "names no test"),
    (f"{HEADER}\nsomething else\n=== no tests ran in 0.01s ===\n", "names no test"),
]


@pytest.mark.parametrize(("log", "says"), BROKEN_LOGS)
def test_a_log_without_a_summary_is_a_verifier_failure(log: str, says: str) -> None:
    with pytest.raises(VerifierFailed, match=says):
        pytest_summary(log)
