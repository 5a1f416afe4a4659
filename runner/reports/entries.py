"""A report lists each run once. An edited report (a CI artifact, a copy-paste) that lists
one twice would count it twice: a comparison's n, a merge's totals, all of it doubled
without a sign. So a second entry of one run is refused where reports are read
(`merge.load_shard`), naming both places."""

from __future__ import annotations

from runner.errors import Problem
from runner.reports.model import Report


def repeated_runs(report: Report, file: str) -> list[Problem]:
    """A problem for every entry that repeats an earlier one: the same fingerprint, or
    (in reports without fingerprints) the same run name."""
    seen: dict[str, int] = {}
    problems = []
    for i, run in enumerate(report.runs):
        key = f"fingerprint {run.fingerprint}" if run.fingerprint else run.run
        if not key:
            continue  # reports before /2 name neither; nothing to tell runs apart by
        first = seen.setdefault(key, i)
        if first != i:
            problems.append(
                Problem(
                    file,
                    None,
                    f"runs[{i}]",
                    f"is run {run.run or run.id!r} again (first at runs[{first}], same "
                    f"{'fingerprint' if run.fingerprint else 'run name'}); a report lists "
                    "each run once, so it would be counted twice: remove one",
                )
            )
    return problems
