"""The likely-duplicate check of bank statements (pure): the same account, the exact amount and
a day within DUPLICATE_WINDOW_DAYS either side; each candidate claimed once, the nearest first."""

from __future__ import annotations

import datetime as dt

from centsync.transform.duplicates import DUPLICATE_WINDOW_DAYS, Candidate, LikelyDuplicates

DAY = dt.date(2026, 11, 24)


def feed(
    id_: str, days: int, amount: int = -1250, account: str = "a", kind: str = "bank feed"
) -> Candidate:
    return Candidate(kind, id_, account, DAY + dt.timedelta(days=days), amount, f"PAYEE {id_}")


def test_the_window_is_three_days_either_side_on_the_exact_amount_and_account() -> None:
    assert DUPLICATE_WINDOW_DAYS == 3
    dups = LikelyDuplicates(
        [feed("late", 4), feed("early", -4), feed("cent", 1, -1251), feed("other", 1, account="b")]
    )
    assert dups.claim("a", DAY, -1250, ["bank feed"]) is None
    dups = LikelyDuplicates([feed("edge", 3), feed("edge-before", -3)])
    assert dups.claim("a", DAY, -1250, ["bank feed"]).id == "edge-before"  # a tie: the earlier
    assert dups.claim("a", DAY, -1250, ["bank feed"]).id == "edge"
    assert dups.claim("a", DAY, -1250, ["bank feed"]) is None  # each claimed once


def test_the_nearest_day_is_claimed_first_and_kinds_are_kept_apart() -> None:
    dups = LikelyDuplicates([feed("far", 2), feed("next-day", 1), feed("p", 0, kind="pending")])
    assert dups.claim("a", DAY, -1250, ["bank feed"]).id == "next-day"
    assert dups.claim("a", DAY, -1250, ["statement"]) is None
    assert dups.claim("a", DAY, -1250, ["pending"]).id == "p"
    assert dups.claim("a", DAY, None, ["bank feed"]) is None  # no amount: nothing matches
    assert dups.claim("a", DAY, -1250, ["bank feed", "statement"]).id == "far"
