"""runner/config/pins.py: what a pinned day (`current_date`, `--date`) and zone
(`timezone`, `--timezone`) may be: a real calendar day, and a zone of the IANA database."""

from __future__ import annotations

import datetime

import pytest
from pydantic import BaseModel, ValidationError

from runner.config.pins import IsoDate, TimeZone, iso_date, timezone_problem


class Pins(BaseModel):
    day: IsoDate | None = None
    zone: TimeZone | None = None


def test_a_day_yaml_read_as_a_date_becomes_its_iso_text() -> None:
    assert iso_date(datetime.date(2026, 1, 31)) == "2026-01-31"
    assert Pins(day="2024-02-29").day == "2024-02-29"
    assert Pins.model_validate({"day": datetime.date(2026, 3, 1)}).day == "2026-03-01"


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (
            datetime.datetime(2026, 1, 31, 8, 0, tzinfo=datetime.UTC),
            "must be a day, YYYY-MM-DD, without a time",
        ),
        ("2026-1-31", "must be a day written YYYY-MM-DD, e.g. 2026-01-31, got '2026-1-31'"),
        ("2026-01-31T00:00", "must be a day written YYYY-MM-DD"),
        ("2025-02-29", "'2025-02-29' is not a day of the calendar"),
        ("2026-13-01", "'2026-13-01' is not a day of the calendar"),
    ],
)
def test_a_day_that_is_not_one_is_refused_with_its_reason(value: object, words: str) -> None:
    with pytest.raises(ValueError) as caught:
        iso_date(value)
    assert words in str(caught.value)
    with pytest.raises(ValidationError):
        Pins.model_validate({"day": value})


@pytest.mark.parametrize("name", ["UTC", "Europe/Paris", "Etc/GMT+3", "America/Argentina/Salta"])
def test_iana_zones_pass(name: str) -> None:
    assert timezone_problem(name) is None
    assert Pins(zone=name).zone == name


def test_a_well_shaped_name_outside_the_database_is_refused() -> None:
    assert timezone_problem("Mars/Olympus_Mons") == (
        "'Mars/Olympus_Mons' is not a zone of the IANA database; use a name such as UTC or "
        "Europe/Paris"
    )


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("../../etc/passwd", "'../../etc/passwd'"),
        ("/etc/localtime", "'/etc/localtime'"),
        ("Europe/Paris\n", "'Europe/Paris\\\\n'"),
        ("A" * 65, "'" + "A" * 60 + "...'"),
        ("", "''"),
    ],
)
def test_a_name_not_shaped_like_a_zone_never_reaches_the_database(name: str, shown: str) -> None:
    """A path would make zoneinfo read a file of the machine; the regex stops it first."""
    assert timezone_problem(name) == (
        f"must be an IANA zone name such as UTC or Europe/Paris, got {shown}"
    )
