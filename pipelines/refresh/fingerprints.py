"""A range's fingerprint, as the service gives it and as the warehouse computes it.

A fingerprint is what the refresh compares to decide whether to re-read a range of months
(docs/refresh.md, "What a refresh catches, and when"): the count and sums per type, spending
per category (catches re-categorised expenses) and spending per merchant (catches renamed
expenses and amounts swapped between merchants). Both sides follow the contract's spending
rules; the merchant key is `transform.spending.merchant_key`, the marts' own.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import polars as pl

from centsync.extract import ApiClient
from centsync.transform.spending import merchant_key
from centsync.warehouse import Warehouse

EPOCH = dt.date(1900, 1, 1)  # the lower bound of a range open below
# Requests per fingerprint: the summary, spending by category, spending by merchant.
REQUESTS = 3
# Count and sums per type; spending per category; spending per merchant: (key, cents, rows).
Fingerprint = tuple[tuple[int, ...], frozenset[tuple[Any, ...]], frozenset[tuple[Any, ...]]]


def _rows(spending: Any) -> frozenset[tuple[Any, ...]]:
    return frozenset(
        (r["key"], r["amount"], r["count"]) for r in spending.rows.iter_rows(named=True)
    )


def server(
    client: ApiClient, ranges: list[tuple[dt.date | None, dt.date]]
) -> list[tuple[Fingerprint, Any, list[dict[str, Any]]]]:
    """The service's fingerprint of each range (three requests a range, all made at once), with
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
    for i in range(0, len(got), REQUESTS):
        summary, category, merchant = got[i : i + REQUESTS]
        totals: tuple[int, ...] = (summary.count, summary.income, summary.expense, summary.transfer)
        raw: list[dict[str, Any]] = [orjson.loads(category.raw), orjson.loads(merchant.raw)]
        out.append(((totals, _rows(category), _rows(merchant)), summary, raw))
    return out


def local_totals(wh: Warehouse, lo: dt.date | None, hi: dt.date) -> tuple[int, ...]:
    """Count and sums per type of the local rows booked in ``lo``..``hi``."""
    row = wh.query(
        """
        SELECT count(*)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'income'), 0)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'expense'), 0)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'transfer'), 0)::BIGINT
        FROM core.transactions WHERE booked_at BETWEEN ? AND ?
        """,
        [lo or EPOCH, hi],
    ).row(0)
    return tuple(int(v) for v in row)


def local(wh: Warehouse, lo: dt.date | None, hi: dt.date) -> Fingerprint:
    """The same fingerprint computed from `core.transactions`."""
    cats = wh.query(
        """
        SELECT category_id::VARCHAR AS key, sum(amount)::BIGINT AS amount, count(*)::BIGINT AS count
        FROM core.transactions WHERE type = 'expense' AND booked_at BETWEEN ? AND ? GROUP BY 1
        """,
        [lo or EPOCH, hi],
    )
    merchants = (
        wh.local_merchant_spending(lo or EPOCH, hi)
        .group_by(key=merchant_key(pl.col("concept")))
        .agg(amount=pl.col("amount").sum(), count=pl.len().cast(pl.Int64))
    )
    return local_totals(wh, lo, hi), frozenset(cats.iter_rows()), frozenset(merchants.iter_rows())
