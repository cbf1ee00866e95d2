"""Every query the use cases and outputs run against a warehouse, behind named functions.

`pipelines/` holds no SQL (the demo's printed example queries aside): what it needs to know of a
warehouse it asks here, by name, the way sqlite-utils keeps every statement behind its library.
Each function takes an open connection (read only or the refresh's own) and returns plain
Python values or Polars frames. Sections by the room that asks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import duckdb

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


# --- outputs: status, report (pipelines/outputs/) --------------------------------------------


# --- the CLI (pipelines/cli/) ----------------------------------------------------------------
