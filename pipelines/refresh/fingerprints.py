"""A range's fingerprint, as the service gives it and as the warehouse computes it.

A fingerprint is what the refresh compares to decide whether to re-read a range of months
(docs/refresh.md, "What a refresh catches, and when"): the count and sums per type, spending
per category (catches re-categorised expenses) and spending per merchant (catches renamed
expenses and amounts swapped between merchants). Both sides follow the contract's spending
rules; the merchant key is `transform.spending.merchant_key`, the marts' own. The local side
is the warehouse's (warehouse/fingerprints.py), the one computation of it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import orjson
import polars as pl

from centsync.extract import ApiClient
from centsync.pipelines.refresh.plan import FINGERPRINT_REQUESTS
from centsync.transform.spending import merchant_key
from centsync.warehouse.fingerprints import (
    EPOCH,
    local_category_spending,
    local_expenses,
    local_totals,
)

# Count and sums per type; spending per category; spending per merchant: (key, cents, rows).
Fingerprint = tuple[tuple[int, ...], frozenset[tuple[Any, ...]], frozenset[tuple[Any, ...]]]


def _rows(spending: Any) -> frozenset[tuple[Any, ...]]:
    return frozenset(
        (r["key"], r["amount"], r["count"]) for r in spending.rows.iter_rows(named=True)
    )


def server(
    client: ApiClient, ranges: list[tuple[dt.date | None, dt.date]]
) -> list[tuple[Fingerprint, Any, list[dict[str, Any]]]]:
    """The service's fingerprint of each range (FINGERPRINT_REQUESTS a range, all made at once), with
    the summary and the spending responses it fetched (landed in `server.*` for reconciliation)."""
    calls: list[Any] = []
    for lo, hi in ranges:
        calls += [
            lambda c, lo=lo, hi=hi: c.transactions_summary(lo, hi),
            lambda c, lo=lo, hi=hi: c.spending(lo or EPOCH, hi, group_by="category"),
            lambda c, lo=lo, hi=hi: c.spending(lo or EPOCH, hi, group_by="merchant"),
        ]
    got = client.gather(*calls)
    out: list[tuple[Fingerprint, Any, list[dict[str, Any]]]] = []
    for i in range(0, len(got), FINGERPRINT_REQUESTS):
        summary, category, merchant = got[i : i + FINGERPRINT_REQUESTS]
        totals: tuple[int, ...] = (summary.count, summary.income, summary.expense, summary.transfer)
        raw: list[dict[str, Any]] = [orjson.loads(category.raw), orjson.loads(merchant.raw)]
        out.append(((totals, _rows(category), _rows(merchant)), summary, raw))
    return out


def local(con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date) -> Fingerprint:
    """The same fingerprint of the local rows (the warehouse's, with the contract's merchant key)."""
    categories = local_category_spending(con, lo, hi)
    merchants = (
        local_expenses(con, lo, hi)
        .group_by(key=merchant_key(pl.col("concept")))
        .agg(amount=pl.col("amount").sum(), count=pl.len().cast(pl.Int64))
    )
    return (
        local_totals(con, lo, hi),
        frozenset(categories.iter_rows()),
        frozenset(merchants.iter_rows()),
    )
