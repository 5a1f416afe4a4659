"""Tests for runner.reports.fmt: the formatting kit every human-facing report shares
(escaping run-derived text for tables and lines, cutting errors, durations, money)."""

from __future__ import annotations

from runner.reports.fmt import cell, duration, inline, money, percent, tokens, truncate


def test_cell_escapes_pipes_newlines_and_markup() -> None:
    assert cell("a | b") == "a \\| b"
    assert cell("one\ntwo\r\nthree") == "one<br>two<br>three"
    assert cell("<script>") == "\\<script\\>"
    assert cell("`x` *y* _z_ [l](u) ~s~ &amp; \\") == (
        "\\`x\\` \\*y\\* \\_z\\_ \\[l\\](u) \\~s\\~ \\&amp; \\\\"
    )
    assert cell("") == " "
    assert inline("a\n|b") == "a \\|b"
    assert inline("\x00\x1b[0m\ud800") == "\\\\x00\\\\x1b\\[0m\\\\ud800"


def test_truncate() -> None:
    assert truncate("short") == "short"
    assert truncate("a\n\n b") == "a b"
    cut = truncate("word " * 100)
    assert len(cut) <= 200 and cut.endswith("\u2026")


def test_duration() -> None:
    assert duration(0) == "0.0s"
    assert duration(59.94) == "59.9s"
    assert duration(61) == "1m 01s"
    assert duration(3599.6) == "1h 00m"
    assert duration(3725) == "1h 02m"
    assert duration(float("nan")) == "-" and duration(float("inf")) == "-"


def test_money() -> None:
    assert money(None) == "n/a"
    assert money(0.0) == "$0.0000"
    assert money(0.01234) == "$0.0123"
    assert money(1234.5) == "$1,234.50"
    assert money(float("nan")) == "n/a"


def test_tokens_and_percent() -> None:
    assert tokens(0) == "0" and tokens(1234567) == "1,234,567"
    assert percent(None) == "-" and percent(0.1234) == "12.3%"
