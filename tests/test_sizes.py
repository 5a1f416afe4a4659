"""Byte caps (runner/sizes.py): what each check refuses, at exactly which size, and the
message a run that stops on one ends with."""

from __future__ import annotations

import pytest

from runner.errors import SizeLimitReached
from runner.sizes import ENVELOPE_BYTES, ITEM_BYTES, MIB, SizeCaps, size


def test_size_reads_as_people_read_it() -> None:
    assert [size(n) for n in (0, 1023, 1024, 1536, MIB - 1, MIB, 12 * MIB + MIB // 2)] == [
        "0 bytes",
        "1023 bytes",
        "1.0 KiB",
        "1.5 KiB",
        "1024.0 KiB",
        "1.0 MiB",
        "12.5 MiB",
    ]


def test_each_check_allows_its_cap_and_refuses_one_byte_more() -> None:
    caps = SizeCaps(item_bytes=100, history_bytes=1000, request_bytes=500)
    caps.check_item(100)
    caps.check_output(400, 600)
    caps.check_request(500)
    with pytest.raises(SizeLimitReached, match=r"an item of 101 bytes, over max_item_bytes"):
        caps.check_item(101)
    with pytest.raises(SizeLimitReached, match=r"grow to 1001 bytes, over max_history_bytes"):
        caps.check_output(401, 600)
    with pytest.raises(SizeLimitReached, match=r"would be 501 bytes, over max_request_bytes"):
        caps.check_request(501)


def test_a_refusal_ends_the_run_as_size_limit_not_as_a_retry() -> None:
    with pytest.raises(SizeLimitReached) as info:
        SizeCaps().check_item(ITEM_BYTES + 1)
    assert info.value.code == "size_limit" and not info.value.retryable
    assert "(8.0 MiB)" in str(info.value)


def test_an_event_holds_one_item_and_parsing_is_bounded_by_two() -> None:
    caps = SizeCaps(item_bytes=10 * MIB)
    assert caps.event_bytes == 10 * MIB + ENVELOPE_BYTES
    assert caps.parse_bytes == 2 * caps.item_bytes + ENVELOPE_BYTES
    assert SizeCaps().event_bytes < SizeCaps().response_bytes
