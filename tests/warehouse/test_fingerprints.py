"""A range's local fingerprint computed in SQL equals the same numbers computed in Polars."""

from __future__ import annotations

import datetime as dt

import polars as pl

from centsync.warehouse import Warehouse
from centsync.warehouse.fingerprints import (
    local_category_spending,
    local_expenses,
    local_totals,
)

from .builders import transactions

MONTHS = ["2023-11", "2023-12", "2024-01", "2024-02"]
TYPES_IN_ORDER = ("income", "expense", "transfer")  # the server summary's order


def _booked(frame: pl.DataFrame, lo: dt.date | None, hi: dt.date) -> pl.DataFrame:
    return frame.filter(pl.col("booked_at").is_between(lo or dt.date(1900, 1, 1), hi))


def _totals(frame: pl.DataFrame) -> tuple[int, int, int, int]:
    sums = [int(frame.filter(pl.col("type") == t)["amount"].sum()) for t in TYPES_IN_ORDER]
    return frame.height, sums[0], sums[1], sums[2]


def test_totals_of_a_range_match_polars(wh: Warehouse) -> None:
    frame = transactions(2_000, months=MONTHS, seed=5)
    wh.replace_months(MONTHS, frame)
    for lo, hi in [
        (None, dt.date(2023, 12, 31)),  # open below: the ledger's first year
        (dt.date(2024, 1, 1), dt.date(2024, 1, 31)),  # one month
        (dt.date(2023, 12, 15), dt.date(2024, 2, 10)),  # not month-aligned
        (dt.date(2030, 1, 1), dt.date(2030, 12, 31)),  # nothing booked
    ]:
        got = local_totals(wh.con, lo, hi)
        assert got == _totals(_booked(frame, lo, hi))
        assert all(isinstance(v, int) for v in got)
    everything = local_totals(wh.con, None, dt.date(2999, 12, 31))
    assert everything[0] == 2_000
    # every row is income, expense or transfer: the three sums are the net
    assert sum(everything[1:]) == int(frame["amount"].sum())


def test_category_spending_counts_only_expenses_refunds_included(wh: Warehouse) -> None:
    frame = transactions(1_000, months=MONTHS, seed=6)
    wh.replace_months(MONTHS, frame)
    lo, hi = dt.date(2023, 12, 1), dt.date(2024, 1, 31)
    expected = (
        _booked(frame, lo, hi)
        .filter(pl.col("type") == "expense")
        .group_by(pl.col("category_id").alias("key"))
        .agg(pl.col("amount").sum().alias("amount"), pl.len().cast(pl.Int64).alias("count"))
    )
    got = local_category_spending(wh.con, lo, hi)
    assert got.columns == ["key", "amount", "count"]
    assert set(got.iter_rows()) == set(expected.iter_rows())


def test_expenses_are_the_merchant_fingerprints_input(wh: Warehouse) -> None:
    frame = transactions(500, months=MONTHS, seed=7)
    wh.replace_months(MONTHS, frame)
    got = local_expenses(wh.con, None, dt.date(2023, 12, 31))
    expected = (
        _booked(frame, None, dt.date(2023, 12, 31))
        .filter(pl.col("type") == "expense")
        .group_by("concept")
        .agg(pl.col("amount").sum(), count=pl.len().cast(pl.Int64))
    )
    assert got.columns == ["concept", "amount", "count"]
    assert expected.height > 1 and expected["count"].max() > 1  # summed, not row by row
    assert sorted(got.iter_rows()) == sorted(expected.iter_rows())


def test_empty_warehouse_has_empty_fingerprints(wh: Warehouse) -> None:
    assert local_totals(wh.con, None, dt.date(2999, 12, 31)) == (0, 0, 0, 0)
    assert local_category_spending(wh.con, None, dt.date(2999, 12, 31)).height == 0
    assert wh.months_present() == []
    assert wh.get_meta("timezone") is None


def test_month_state_has_no_server_columns(wh: Warehouse) -> None:
    """The server's per-month figures were never filled (migration 006 dropped them): the
    service's fingerprints a refresh compares are in server.transactions_summary."""
    wh.replace_months(["2024-01"], transactions(10, months=["2024-01"], seed=9))
    state = wh.month_state()
    assert state.height == 1
    assert not [c for c in state.columns if c.startswith("server_") or c.startswith("checked_")]
    assert state.item(0, "read_rows") == 10
