"""Local fingerprints computed in SQL equal the same numbers computed in Polars."""

from __future__ import annotations

import polars as pl

from centsync.warehouse import Warehouse, category_hash

from .builders import transactions

MONTHS = ["2023-11", "2023-12", "2024-01", "2024-02"]


def _expected(frame: pl.DataFrame, period: str) -> pl.DataFrame:
    key = (
        pl.col("booked_at").dt.strftime("%Y-%m").alias("month")
        if period == "month"
        else pl.col("booked_at").dt.year().cast(pl.Int32).alias("year")
    )
    return (
        frame.group_by(key)
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            *[
                pl.col("amount").filter(pl.col("type") == t).sum().cast(pl.Int64).alias(t)
                for t in ("income", "expense", "transfer")
            ],
            pl.col("amount").sum().cast(pl.Int64).alias("net"),
        )
        .sort(key.meta.output_name())
    )


def test_month_and_year_fingerprints_match_polars(wh: Warehouse) -> None:
    frame = transactions(2_000, months=MONTHS, seed=5)
    wh.replace_months(MONTHS, frame)
    assert wh.local_fingerprints("month").equals(_expected(frame, "month"))
    assert wh.local_fingerprints("year").equals(_expected(frame, "year"))


def test_category_spending_counts_only_expenses_refunds_included(wh: Warehouse) -> None:
    frame = transactions(1_000, months=MONTHS, seed=6)
    wh.replace_months(MONTHS, frame)
    expected = (
        frame.filter(pl.col("type") == "expense")
        .group_by(pl.col("booked_at").dt.strftime("%Y-%m").alias("month"), "category_id")
        .agg(pl.col("amount").sum().alias("amount"), pl.len().cast(pl.Int64).alias("count"))
        .sort("month", "category_id", nulls_last=False)
    )
    assert wh.local_category_spending("month").equals(expected)
    by_year = wh.local_category_spending("year")
    assert by_year.get_column("amount").sum() == expected.get_column("amount").sum()


def test_category_hashes_match_the_server_side_helper(wh: Warehouse) -> None:
    frame = transactions(300, months=["2024-01"], seed=8)
    wh.replace_months(["2024-01"], frame)
    server_rows = [
        (r["category_id"], r["amount"], r["count"])
        for r in frame.filter(pl.col("type") == "expense")
        .group_by("category_id")
        .agg(pl.col("amount").sum(), pl.len().alias("count"))
        .iter_rows(named=True)
    ]
    local = wh.local_category_hashes("month")
    assert local.row(0) == ("2024-01", category_hash(server_rows))


def test_category_hash_sees_a_recategorisation_that_keeps_totals() -> None:
    before = [("a", -100, 1), ("b", -50, 1)]
    after = [("a", -50, 1), ("b", -100, 1)]
    assert category_hash(before) != category_hash(after)
    assert category_hash(before) == category_hash(list(reversed(before)))


def test_empty_warehouse_has_no_fingerprints(wh: Warehouse) -> None:
    assert wh.local_fingerprints().height == 0
    assert wh.months_present() == []
    assert wh.last_timezone() is None
