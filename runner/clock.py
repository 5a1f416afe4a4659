"""The day and time zone `<environment_context>` states when the task file pins neither:
read from this machine once per batch, so every run of the batch sees the same ones."""

from __future__ import annotations

import datetime as dt
import os

from runner.config import timezone_problem


def today() -> str:
    """The machine's local date, YYYY-MM-DD."""
    return dt.datetime.now().astimezone().date().isoformat()


def local_timezone() -> str:
    """This machine's IANA zone: `$TZ` if it names one, else the zone /etc/localtime links
    to, else UTC. Anything else in `$TZ` (a path, POSIX rules, junk) never reaches the
    prompt or the report."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        link = os.readlink("/etc/localtime")
        candidates.append(link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else "")
    except OSError:
        pass
    for name in candidates:
        if name and timezone_problem(name) is None:
            return name
    return "UTC"
