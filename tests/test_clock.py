"""The zone `<environment_context>` names is the zone its day was read in, whatever `$TZ`
holds: an IANA name as is, anything else (POSIX rules, a path, empty) as the offset it put
in effect. Real `$TZ` and `time.tzset()`, restored after each case."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import zoneinfo
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runner import clock
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import per_conversation, reply_message


@pytest.fixture
def set_tz() -> Iterator[Callable[[str], None]]:
    saved = os.environ.get("TZ")

    def set_(value: str) -> None:
        os.environ["TZ"] = value
        time.tzset()

    yield set_
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


def _zone(named: str) -> dt.tzinfo:
    """The zone a name the runner told stands for (`UTC+05:30`: a fixed offset)."""
    if named.startswith("UTC") and len(named) > 3:
        h, m = map(int, named[4:].split(":"))
        offset = dt.timedelta(hours=h, minutes=m)
        return dt.timezone(offset if named[3] == "+" else -offset)
    return zoneinfo.ZoneInfo(named)


def _days_around(zone: dt.tzinfo) -> set[str]:
    """That zone's day now and a few seconds on (a test may straddle midnight)."""
    now = dt.datetime.now(dt.UTC)
    return {(now + dt.timedelta(seconds=s)).astimezone(zone).date().isoformat() for s in (0, 5)}


@pytest.mark.parametrize(
    ("tz", "named"),
    [
        ("UTC+12", "Etc/GMT+12"),  # POSIX: 12 hours behind UTC
        ("XYZ-3", "Etc/GMT-3"),
        ("IST-5:30", "UTC+05:30"),  # no whole-hour zone exists
        ("NST+3:30", "UTC-03:30"),
        ("Asia/Tokyo", "Asia/Tokyo"),
        (":Europe/Paris", "Europe/Paris"),
        ("/usr/share/zoneinfo/America/New_York", "America/New_York"),
        ("", "UTC"),
    ],
)
def test_the_zone_named_is_the_zone_in_use(
    set_tz: Callable[[str], None], tz: str, named: str
) -> None:
    set_tz(tz)
    assert clock.local_timezone() == named
    assert clock.today() in _days_around(_zone(named))


def test_a_run_under_posix_tz_tells_its_day_and_zone_alike(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: hi, repo: .}\n")
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out, env={"TZ": "UTC+12"})
    assert res.returncode == 0, res.stderr
    (run,) = json.loads((out / "report.json").read_text())["runs"]
    assert run["timezone"] == "Etc/GMT+12"
    zone = zoneinfo.ZoneInfo("Etc/GMT+12")
    now = dt.datetime.now(dt.UTC)
    assert run["current_date"] in {
        (now - dt.timedelta(seconds=s)).astimezone(zone).date().isoformat() for s in (0, 60)
    }
    assert "<timezone>Etc/GMT+12</timezone>" in json.dumps(srv.requests[0].input)
