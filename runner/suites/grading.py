"""What a suite's verifier left behind, read into a grade. Pure: the caller fetches the
reward files or the test log from the environment and hands their bytes here.

A verifier that leaves nothing to grade raises `VerifierFailed`: the run is an `error`,
since scoring it 0 would blame the agent for a broken test script."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from runner.errors import VerifierFailed
from runner.frozen import frozen
from runner.nesting import json_loads

MAIN_REWARD = "reward"
"""The name `reward.txt`'s one float takes, and the entry of `reward.json` read as the
run's reward when there are several."""


@frozen
class Reward:
    """Harbor's named rewards, in the order the verifier wrote them."""

    named: tuple[tuple[str, float], ...]

    @property
    def value(self) -> float | None:
        """The run's reward: the one named `reward`, or the only one; None when the
        verifier wrote several and none of them is `reward` (the report shows them all)."""
        values = dict(self.named)
        if MAIN_REWARD in values:
            return values[MAIN_REWARD]
        return self.named[0][1] if len(self.named) == 1 else None


def reward_from_files(reward_json: bytes | None, reward_txt: bytes | None) -> Reward:
    """Harbor's grading: `reward.json` (an object of named numbers) when the verifier
    wrote one, else `reward.txt` (one number); the test script's exit code plays no part.
    As Harbor reads them: fields of reward.json that are not numbers (a detailed report
    beside the scores) are left out, and when it names no `reward`, reward.txt gives it."""
    if reward_json is not None:
        named = _from_json(reward_json)
        if MAIN_REWARD not in dict(named.named) and reward_txt is not None:
            named = Reward((*named.named, *_from_txt(reward_txt).named))
        if not named.named:
            raise VerifierFailed("reward.json names no numeric reward")
        return named
    if reward_txt is not None:
        return _from_txt(reward_txt)
    raise VerifierFailed(
        "the verifier wrote neither /logs/verifier/reward.json nor /logs/verifier/reward.txt"
    )


def _from_json(raw: bytes) -> Reward:
    try:
        data = json_loads(raw.decode("utf-8"), parse_constant=_no_constant, object_pairs_hook=_once)
    except (UnicodeDecodeError, ValueError) as exc:
        raise VerifierFailed(f"reward.json is not JSON: {_short(str(exc))}") from None
    if not isinstance(data, dict):
        raise VerifierFailed(
            f"reward.json must be an object of named numbers, not {type(data).__name__}"
        )
    named: list[tuple[str, float]] = []
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        number = float(value)
        if not math.isfinite(number):
            raise VerifierFailed(f"reward.json: {_short(key)!r} is not a finite number")
        named.append((key, number))
    return Reward(tuple(named))


def _once(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """An object whose keys are each written once: `{"reward": 0, "reward": 1}` is 1 to
    one JSON reader and 0 to another, so it is no grade at all."""
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise VerifierFailed(
                f"reward.json writes the key {_short(key)!r} twice; which one counts is "
                "not for runner to guess"
            )
        out[key] = value
    return out


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _from_txt(raw: bytes) -> Reward:
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise VerifierFailed("reward.txt is not UTF-8 text") from None
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", text):
        shown = _short(text) if text else "empty"
        raise VerifierFailed(f"reward.txt must hold one number, not {shown!r}")
    number = float(text)
    if not math.isfinite(number):
        raise VerifierFailed(f"reward.txt: {_short(text)!r} is not a finite number")
    return Reward(((MAIN_REWARD, number),))


def _short(text: str, limit: int = 80) -> str:
    text = text if text.isprintable() else repr(text)[1:-1]
    return text if len(text) <= limit else text[:limit] + "..."


# -- Terminal-Bench: pytest's short summary ------------------------------------------------


class PytestSummary(NamedTuple):
    passed: int
    failed: int
    resolved: bool
    """Every test the summary names passed, and the final counts line (if any) reports
    no failure or error."""


_SUMMARY_HEADER = re.compile(r"=+\s*short test summary info\s*=+", re.IGNORECASE)
_PASSING = {"PASSED", "XFAIL", "SKIPPED"}
_FAILING = {"FAILED", "XPASS", "ERROR"}
"""Terminal-Bench's statuses: an expected failure or a skip counts as passed, an
unexpected pass as failed."""
_COUNTS_LINE = re.compile(
    r"^=*\s*((?:\d+ [a-z]+(?:, )?)+)(?: in [\d.]+s(?: \([^)]*\))?)?\s*=*$", re.MULTILINE
)
_COUNT = re.compile(r"(\d+) ([a-z]+)")


def pytest_summary(log: str) -> PytestSummary:
    """Grade a Terminal-Bench test log as its harness does: the lines after pytest's
    "short test summary info" (run with `-rA`, so passes are listed too), one status per
    test, the last line for a test winning. A log without that section is a verifier
    failure, never a score of 0: the tests did not say how they went."""
    parts = _SUMMARY_HEADER.split(log, maxsplit=1)
    if len(parts) < 2:
        raise VerifierFailed(
            'the test log has no pytest "short test summary info" section '
            "(did the tests run, with -rA?)"
        )
    results: dict[str, bool] = {}
    for line in parts[1].splitlines():
        test, ok = _result_line(line)
        if test is not None:
            results[test] = ok
    if not results:
        raise VerifierFailed("pytest's short test summary names no test")
    passed = sum(results.values())
    failed = len(results) - passed
    counted_failures = _counted_failures(parts[1])
    resolved = failed == 0 and counted_failures == 0
    return PytestSummary(passed, max(failed, counted_failures), resolved)


def _result_line(line: str) -> tuple[str | None, bool]:
    words = line.strip().split(maxsplit=1)
    if len(words) < 2 or words[0] not in _PASSING | _FAILING:
        return None, False
    status, rest = words
    rest = rest.split(" - ", 1)[0]  # "FAILED path::test - message"
    test = rest.strip().split("::", 1)[-1]  # Terminal-Bench keys results by the test's name
    return (test or None), status in _PASSING


def _counted_failures(text: str) -> int:
    """Failures and errors in pytest's last counts line (`2 failed, 1 passed in 0.1s`):
    a collection error or a crash the summary lines do not spell out still counts."""
    matches = [m for m in _COUNTS_LINE.finditer(text) if _is_counts(m.group(1))]
    if not matches:
        return 0
    counts = {word: int(n) for n, word in _COUNT.findall(matches[-1].group(1))}
    return sum(counts.get(word, 0) for word in ("failed", "error", "errors", "xpassed"))


def _is_counts(text: str) -> bool:
    words = {word for _, word in _COUNT.findall(text)}
    known = {"passed", "failed", "error", "errors", "skipped", "xfailed", "xpassed"}
    return bool(words) and words <= known | {"warning", "warnings", "deselected", "rerun"}
