"""Every query the use cases and outputs run against a warehouse, behind named functions.

`pipelines/` holds no SQL (the demo's printed example queries aside): what it needs to know of a
warehouse it asks here, by name, the way sqlite-utils keeps every statement behind its library.
Each function takes an open connection (read only or the refresh's own) and returns plain
Python values or Polars frames. Sections by the room that asks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

# --- refresh and reconciliation (pipelines/refresh/, pipelines/reconcile.py) -----------------


def booked_range(con: duckdb.DuckDBPyConnection) -> tuple[dt.date | None, dt.date | None]:
    """The first and last booked_at of the local transactions (None, None when there are none)."""
    first, last = con.execute(
        "SELECT min(booked_at), max(booked_at) FROM core.transactions"
    ).fetchall()[0]
    return first, last


def transaction_count(con: duckdb.DuckDBPyConnection) -> int:
    """How many transactions the warehouse holds."""
    return int(con.execute("SELECT count(*) FROM core.transactions").fetchall()[0][0])


def settings_timezone(con: duckdb.DuckDBPyConnection) -> str | None:
    """The settings timezone of the last settings snapshot (None before any)."""
    (timezone,) = con.execute("SELECT any_value(timezone) FROM core.settings").fetchall()[0]
    return str(timezone) if timezone else None


def meta_values(con: duckdb.DuckDBPyConnection, keys: Sequence[str]) -> dict[str, str]:
    """These ops.meta keys and their values (a file with no ops schema yet has none)."""
    try:
        rows = con.execute(
            f"SELECT key, value FROM ops.meta WHERE key IN ({', '.join('?' * len(keys))})",
            list(keys),
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    return {str(key): str(value) for key, value in rows if value is not None}


# --- write-back (pipelines/writeback/) ---------------------------------------------------------


@dataclass(frozen=True)
class WritebackReference:
    """What the write-back checks requests against: the warehouse's accounts, categories,
    the Expenses seen in the ledger, the named transactions' types and the settings' currency."""

    accounts: pl.DataFrame  # id, name, currency
    categories: pl.DataFrame  # id, name
    expense_goal_ids: list[str]
    transactions: pl.DataFrame  # id, type: only the ids asked for
    currency: str | None


def _writeback_frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> pl.DataFrame:
    """A query's result as a Polars frame."""
    frame = pl.from_arrow(con.sql(sql, params=params).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


def writeback_reference(
    con: duckdb.DuckDBPyConnection, transaction_ids: Sequence[str]
) -> WritebackReference:
    """The reference data of a write-back, with the types of `transaction_ids` only."""
    accounts = _writeback_frame(con, "SELECT id::VARCHAR AS id, name, currency FROM core.accounts")
    categories = _writeback_frame(con, "SELECT id::VARCHAR AS id, name FROM core.categories")
    goals = [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT expense_goal_id FROM core.transactions "
            "WHERE expense_goal_id IS NOT NULL"
        ).fetchall()
    ]
    transactions = _writeback_frame(
        con,
        "SELECT id::VARCHAR AS id, type FROM core.transactions "
        "WHERE id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
        [list(transaction_ids)],
    )
    currency = con.execute("SELECT any_value(currency) FROM core.settings").fetchall()[0][0]
    return WritebackReference(accounts, categories, goals, transactions, currency)


def months_of_transactions(
    con: duckdb.DuckDBPyConnection, transaction_ids: Sequence[str]
) -> list[dt.date]:
    """The months (first days) that hold these transactions, in the warehouse."""
    return [
        m
        for (m,) in con.execute(
            "SELECT DISTINCT month FROM core.transactions "
            "WHERE id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
            [list(transaction_ids)],
        ).fetchall()
    ]


def transactions_as_sent(
    con: duckdb.DuckDBPyConnection, transaction_ids: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """These transactions by id, with the fields a write-back sends, written as it sends them
    (ids as text, the date as YYYY-MM-DD): to compare a sent body with what a refresh read."""
    cur = con.execute(
        "SELECT id::VARCHAR AS id, concept, category_id::VARCHAR AS category_id, amount, "
        "strftime(booked_at, '%Y-%m-%d') AS booked_at, type, "
        "expense_goal_id::VARCHAR AS expense_goal_id FROM core.transactions "
        "WHERE id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
        [list(transaction_ids)],
    )
    names = [d[0] for d in cur.description]
    return {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}


# --- outputs: status, report (pipelines/outputs/) --------------------------------------------


# --- the CLI (pipelines/cli/) ----------------------------------------------------------------
