"""`centsync status`: what a warehouse holds, read from the file alone (no request)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb

from centsync.warehouse import connect_readonly
from centsync.warehouse.errors import NoWarehouseError
from centsync.warehouse.outbox import Outbox, outbox_path

# the tables an analyst asks about, in the order `status` lists them
TABLES = (
    "core.transactions",
    "core.accounts",
    "core.connections",
    "core.categories",
    "raw.rejected_rows",
    "marts.spending_by_month_category",
    "marts.balance_daily",
    "marts.net_worth_daily",
    "recon.results",
)
KEY_WARNING_DAYS = 30


def _rows(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> list[dict[str, Any]]:
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _exists(con: duckdb.DuckDBPyConnection, qualified: str) -> bool:
    schema, table = qualified.split(".")
    (n,) = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
        [schema, table],
    ).fetchall()[0]
    return bool(n)


def read_status(path: Path) -> dict[str, Any]:
    """The documented `centsync status --json` object."""
    if not path.exists():
        raise NoWarehouseError(f"no warehouse at {path}: run `centsync refresh` first")
    con = connect_readonly(path)
    try:
        meta = dict(con.execute("SELECT key, value FROM ops.meta").fetchall())
        last = _rows(
            con,
            """
            SELECT refresh_id, status, mode, started_at, finished_at,
                   round(epoch(finished_at) - epoch(started_at), 2) AS seconds,
                   requests_total, rows_changed, rows_rejected, months_checked, error
            FROM ops.refreshes ORDER BY started_at DESC LIMIT 1
            """,
        )
        succeeded = _rows(
            con,
            "SELECT refresh_id, finished_at FROM ops.refreshes WHERE status = 'succeeded' "
            "ORDER BY started_at DESC LIMIT 1",
        )
        span = _rows(
            con,
            """
            SELECT count(*) AS transactions, min(booked_at) AS first, max(booked_at) AS last,
                   count(DISTINCT month) AS months FROM core.transactions
            """,
        )[0]
        verification = _verification(con)
        tables = {
            t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
            for t in TABLES
            if _exists(con, t)
        }
        recon = (
            _rows(
                con,
                "SELECT recon_id, refresh_id, ran_at, source, verdict, checked, explained, differ "
                "FROM recon.runs ORDER BY ran_at DESC LIMIT 1",
            )
            if _exists(con, "recon.runs")
            else []
        )
    finally:
        con.close()
    warnings = []
    expires = meta.get("key.expires_at")
    if expires:
        left = dt.datetime.fromisoformat(expires) - dt.datetime.now(dt.UTC)
        if left < dt.timedelta(days=KEY_WARNING_DAYS):
            warnings.append(
                f"the API key expires in {max(0, left.days)} days ({expires[:10]}): create a new one"
            )
    if last and last[0]["status"] not in ("succeeded", "running"):
        warnings.append(f"the last refresh {last[0]['status']}: run `centsync refresh`")
    return {
        "warehouse": str(path),
        "size_mb": round(path.stat().st_size / 2**20, 1),
        "source": {
            "base_url": meta.get("source.base_url"),
            "account_id": meta.get("source.account_id"),
            "currency": meta.get("source.currency"),
            "timezone": meta.get("source.timezone"),
            "bound_at": meta.get("source.bound_at"),
        }
        if meta.get("source.base_url")
        else None,
        "last_refresh": last[0] if last else None,
        "last_success": succeeded[0] if succeeded else None,
        "synced_range": span if span["transactions"] else None,
        "verification": verification,
        "tables": tables,
        "reconciliation": recon[0] if recon else None,
        "outbox": _outbox(path),
        "key_expires_at": expires,
        "warnings": warnings,
    }


def _verification(con: Any) -> dict[str, Any] | None:
    """The month verified longest ago (rolling verification, docs/refresh.md): which month,
    when (on the service's clock), and how many months were verified in the last 7 days."""
    column = (
        "coalesce(s.verified_at, s.read_at)"
        if _rows(
            con,
            "SELECT 1 AS x FROM information_schema.columns WHERE table_schema = 'ops' "
            "AND table_name = 'month_state' AND column_name = 'verified_at'",
        )
        else "s.read_at"
    )
    rows = _rows(
        con,
        f"""
        WITH m AS (
            SELECT t.month, any_value({column}) AS verified_at
            FROM (SELECT DISTINCT month FROM core.transactions) t
            LEFT JOIN ops.month_state s ON s.month = t.month GROUP BY t.month
        )
        SELECT (SELECT strftime(month, '%Y-%m') FROM m ORDER BY verified_at NULLS FIRST, month
                LIMIT 1) AS oldest_month,
               min(verified_at) AS oldest_verified_at,
               max(verified_at) AS newest_verified_at,
               count(*) AS months
        FROM m
        """,
    )
    return rows[0] if rows and rows[0]["months"] else None


def _outbox(warehouse: Path) -> dict[str, Any]:
    """The outbox file's rows per state (the truth, newer than the warehouse's copy)."""
    from centsync.pipelines.writeback import run as writeback

    inbox = writeback.inbox_path(warehouse)
    return {
        "path": str(outbox_path(warehouse)),
        "states": Outbox(outbox_path(warehouse)).counts(),
        "inbox": str(inbox),
        "inbox_files": len(list(inbox.glob("*.csv"))) if inbox.is_dir() else 0,
    }
