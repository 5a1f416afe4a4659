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
    """The zone `today()` is read in, by a name the prompt can state: `$TZ` if it names
    an IANA zone; else, when `$TZ` is set to anything else (POSIX rules such as
    `UTC+12`, a file path, empty), the offset in effect now, as `Etc/GMT+12` (IANA's
    signs are POSIX's: 12 hours behind UTC) or `UTC+05:30` when no whole-hour zone
    exists; else the zone /etc/localtime links to, else UTC. The raw `$TZ` never reaches
    the prompt or the report."""
    tz = os.environ.get("TZ")
    if tz is None:
        try:
            link = os.readlink("/etc/localtime")
        except OSError:
            link = ""
        name = link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else ""
        return name if name and timezone_problem(name) is None else "UTC"
    name = tz.lstrip(":")
    name = name.split("zoneinfo/", 1)[1] if "zoneinfo/" in name else name
    if name and timezone_problem(name) is None:
        return name
    return offset_zone(dt.datetime.now().astimezone().utcoffset() or dt.timedelta())


def offset_zone(offset: dt.timedelta) -> str:
    """A fixed UTC offset by its IANA name when there is one (`Etc/GMT-14` to `Etc/GMT+12`,
    signs inverted), else as `UTC+05:30`."""
    minutes = round(offset.total_seconds() / 60)
    if minutes == 0:
        return "UTC"
    hours, rest = divmod(abs(minutes), 60)
    if not rest and -12 * 60 <= minutes <= 14 * 60:
        return f"Etc/GMT{'-' if minutes > 0 else '+'}{hours}"
    return f"UTC{'+' if minutes > 0 else '-'}{hours:02d}:{rest:02d}"
