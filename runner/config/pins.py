"""The day and zone `<environment_context>` tells the model, as a task file or the command
line pins them (`current_date`, `timezone`, `--date`, `--timezone`): what a valid one is."""

from __future__ import annotations

import datetime
import re
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from runner.config.text import esc, short


def iso_date(v: object) -> object:
    """YAML reads an unquoted 2026-01-31 as a date: the prompt wants its ISO text. A
    timestamp, a number or text that is not a real calendar day is refused."""
    if isinstance(v, datetime.datetime):
        raise ValueError("must be a day, YYYY-MM-DD, without a time")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, str):
        if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            raise ValueError(f"must be a day written YYYY-MM-DD, e.g. 2026-01-31, got {v!r}")
        try:
            datetime.date.fromisoformat(v)
        except ValueError:
            raise ValueError(f"{v!r} is not a day of the calendar") from None
    return v


TIMEZONE_RE = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+){0,3}$"
"""The shape of an IANA name (Europe/Paris, UTC, Etc/GMT+3)."""


def timezone_problem(name: str) -> str | None:
    """Why `name` is not an IANA zone, or None. Checked against the `tzdata` package's
    database as well as the system's, so a file valid on one machine is valid on all."""
    if len(name) > 64 or not re.fullmatch(TIMEZONE_RE, name):
        return f"must be an IANA zone name such as UTC or Europe/Paris, got {esc(short(name))!r}"
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return (
            f"{name!r} is not a zone of the IANA database; use a name such as UTC or Europe/Paris"
        )
    return None


def _timezone(v: str) -> str:
    wrong = timezone_problem(v)
    if wrong is not None:
        raise ValueError(wrong)
    return v


IsoDate = Annotated[str, BeforeValidator(iso_date)]
TimeZone = Annotated[str, AfterValidator(_timezone)]
