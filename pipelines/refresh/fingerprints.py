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
# The same with the components not asked for left None (bisection asks only for what differs).
Partial = tuple[
    tuple[int, ...] | None, frozenset[tuple[Any, ...]] | None, frozenset[tuple[Any, ...]] | None
]


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
        lo, hi = ranges[i // FINGERPRINT_REQUESTS]
        raw = [landed(category, "category", lo, hi), landed(merchant, "merchant", lo, hi)]
        out.append(((totals, _rows(category), _rows(merchant)), summary, raw))
    return out


def landed(spending: Any, group_by: str, lo: dt.date | None, hi: dt.date) -> dict[str, Any]:
    """A spending answer as server.spending lands it (the contract's shape, whatever the
    service's: read through the learned contract)."""
    return {
        "group_by": group_by,
        "from": (lo or EPOCH).isoformat(),
        "to": hi.isoformat(),
        "currency": spending.currency or None,
        "total": spending.total,
        "data": spending.rows.to_dicts(),
    }


def local_merchants(
    con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date
) -> pl.DataFrame:
    """The local expenses of a range per merchant (the contract's key of each concept): key,
    amount (cents), count."""
    return (
        local_expenses(con, lo, hi)
        .group_by(key=merchant_key(pl.col("concept")))
        .agg(pl.col("amount").sum(), pl.col("count").sum())
    )


def local(con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date) -> Fingerprint:
    """The same fingerprint of the local rows (the warehouse's, with the contract's merchant key)."""
    categories = local_category_spending(con, lo, hi)
    merchants = local_merchants(con, lo, hi)
    return (
        local_totals(con, lo, hi),
        frozenset(categories.iter_rows()),
        frozenset(merchants.iter_rows()),
    )


def server_spending_by_month(
    client: ApiClient, lo: dt.date | None, hi: dt.date
) -> dict[str, tuple[int, int]]:
    """Spending per month ('YYYY-MM': (cents, rows)) of a range: one request, the fastest way
    to place a changed expense in its month."""
    got = client.spending(lo or EPOCH, hi, group_by="month")
    return {str(r["key"]): (r["amount"], r["count"]) for r in got.rows.iter_rows(named=True)}


def _cells(rows: frozenset[tuple[Any, ...]]) -> dict[Any, tuple[int, int]]:
    return {key: (amount, count) for key, amount, count in rows}


def _minus(whole: frozenset[tuple[Any, ...]], part: frozenset[tuple[Any, ...]]) -> frozenset[Any]:
    left, right = _cells(whole), _cells(part)
    rest = set()
    for key in left.keys() | right.keys():
        amount = left.get(key, (0, 0))[0] - right.get(key, (0, 0))[0]
        count = left.get(key, (0, 0))[1] - right.get(key, (0, 0))[1]
        if count or amount:
            rest.add((key, amount, count))
    return frozenset(rest)


def subtract(whole: Partial, part: Partial) -> Partial:
    """The fingerprint of the rest of a range, from the whole range's and one part's (each
    component None where unknown): counts and sums add up over ranges, so the other half of a
    bisection costs no request."""
    t, c, m = whole
    pt, pc, pm = part
    totals = None if t is None or pt is None else tuple(a - b for a, b in zip(t, pt, strict=True))
    return (
        totals,
        None if c is None or pc is None else _minus(c, pc),
        None if m is None or pm is None else _minus(m, pm),
    )


def differing(server: Partial, local: Fingerprint) -> tuple[int, ...]:
    """The components (0 totals, 1 category, 2 merchant) known on the service's side that differ."""
    return tuple(i for i in range(3) if server[i] is not None and server[i] != local[i])


def server_parts(
    client: ApiClient, lo: dt.date | None, hi: dt.date, parts: tuple[int, ...]
) -> Partial:
    """Only the components `parts` of a range's fingerprint (one request each, made at once):
    bisection asks for what still differs, nothing else."""
    calls = {
        0: lambda c: c.transactions_summary(lo, hi),
        1: lambda c: c.spending(lo or EPOCH, hi, group_by="category"),
        2: lambda c: c.spending(lo or EPOCH, hi, group_by="merchant"),
    }
    got = dict(zip(parts, client.gather(*(calls[i] for i in parts)), strict=True))
    summary = got.get(0)
    return (
        None
        if summary is None
        else (summary.count, summary.income, summary.expense, summary.transfer),
        _rows(got[1]) if 1 in got else None,
        _rows(got[2]) if 2 in got else None,
    )


def span(client: ApiClient) -> tuple[dt.date, dt.date, int] | None:
    """Oldest and newest booked_at and the row count: two one-row pages of the list (its
    documented `total`; either sort direction, the list's default one being undocumented)."""
    newest, envelope = client.transactions_page(1, limit=1, raw=False)
    total = int(envelope.get("total") or 0)
    if total == 0 or newest.height == 0:
        return None
    oldest, _ = client.transactions_page(total, limit=1, raw=False)
    last = oldest.get_column("booked_at")[0] if oldest.height else newest.get_column("booked_at")[0]
    first = newest.get_column("booked_at")[0]
    return min(last, first), max(last, first), total
