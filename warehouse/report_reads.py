"""The reconciliation report's own queries (pipelines/outputs/report*.py): the rows it embeds for
drill-down, the rejected rows, the write-back outbox and the merchants, behind named functions.

Kept apart from `reads.py` so the report's queries grow here without growing that module. Each
function takes an open (read-only) connection and returns Polars frames or plain values.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from centsync.warehouse.reads import table_exists


def _as_frame(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[object] | None = None
) -> pl.DataFrame:
    """A query's result as a Polars frame (through Arrow)."""
    frame = pl.from_arrow(con.sql(sql, params=params or None).to_arrow_table())
    assert isinstance(frame, pl.DataFrame)
    return frame


# The drill-down's columns, one row per transaction: names resolved, money in integer cents.
_TX_SELECT = """
    SELECT t.id::VARCHAR AS id, strftime(t.booked_at, '%Y-%m-%d') AS date,
           strftime(t.month, '%Y-%m') AS month, coalesce(a.name, t.account_id::VARCHAR) AS account,
           coalesce(c.name, '') AS category, t.concept, t.type, t.amount AS amount_cents
    FROM core.transactions t
    LEFT JOIN core.accounts a ON a.id = t.account_id
    LEFT JOIN core.categories c ON c.id = t.category_id
"""


def month_row_counts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Local transactions per month ('YYYY-MM', rows), newest first: what drill-down could embed."""
    return _as_frame(
        con,
        "SELECT strftime(month, '%Y-%m') AS month, count(*)::BIGINT AS rows "
        "FROM core.transactions GROUP BY month ORDER BY month DESC",
    )


def transactions_of_months(con: duckdb.DuckDBPyConnection, months: Sequence[str]) -> pl.DataFrame:
    """Every local transaction of the given months ('YYYY-MM'), by date and id."""
    if not months:
        return _as_frame(con, _TX_SELECT + " WHERE false")
    return _as_frame(
        con,
        _TX_SELECT + " WHERE strftime(t.month, '%Y-%m') IN (SELECT unnest(?)) "
        "ORDER BY t.booked_at, t.id",
        [list(months)],
    )


def category_names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Category id -> name (to name a row the service sent that is not stored locally)."""
    return {
        str(i): str(n)
        for i, n in con.execute("SELECT id::VARCHAR, name FROM core.categories").fetchall()
    }


def account_names(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Account id -> name."""
    return {
        str(i): str(n)
        for i, n in con.execute("SELECT id::VARCHAR, name FROM core.accounts").fetchall()
    }


def row_differences(con: duckdb.DuckDBPyConnection, recon_id: str, limit: int) -> pl.DataFrame:
    """The first `limit` rows behind one reconciliation's differences, both sides as JSON text."""
    return _as_frame(
        con,
        """
        SELECT kind, entity, id::VARCHAR AS id, strftime(month, '%Y-%m') AS month, fields,
               "local"::VARCHAR AS local, server::VARCHAR AS server, source
        FROM recon.row_differences WHERE recon_id = ? ORDER BY month, id LIMIT ?
        """,
        [recon_id, limit],
    )


def rejected_rows(con: duckdb.DuckDBPyConnection, refresh_id: str, limit: int) -> pl.DataFrame:
    """Rows validation rejected in one refresh: entity, reason, the record as received."""
    return _as_frame(
        con,
        """
        SELECT entity, reason, record::VARCHAR AS record, rejected_at
        FROM raw.rejected_rows WHERE refresh_id = ? ORDER BY rejected_at, entity LIMIT ?
        """,
        [refresh_id, limit],
    )


def outbox_rows(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The write-back outbox as of the last refresh (`ops.outbox`; empty when it has none)."""
    if not table_exists(con, "ops.outbox"):
        return pl.DataFrame()
    return _as_frame(
        con,
        """
        SELECT id, state, operation, source_name, source_line, event_ref,
               strftime(booked_at, '%Y-%m-%d') AS booked_at, amount, concept,
               transaction_id::VARCHAR AS transaction_id, reason, attempts, response_status,
               strftime(updated_at, '%Y-%m-%d %H:%M') AS updated_at
        FROM ops.outbox ORDER BY id
        """,
    )


def merchants_last_year(con: duckdb.DuckDBPyConnection, limit: int) -> pl.DataFrame:
    """The `limit` merchants most spent at over the 12 months up to the latest one."""
    return _as_frame(
        con,
        """
        SELECT merchant, sum(amount_cents)::BIGINT AS amount_cents,
               sum(transactions)::BIGINT AS transactions
        FROM marts.spending_by_month_merchant
        WHERE month > (SELECT max(month) FROM marts.spending_by_month_merchant) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY 2, 1 LIMIT ?
        """,
        [limit],
    )
