"""The reconciliation report's own queries (pipelines/outputs/report*.py): the rows it embeds for
drill-down, the rejected rows, the write-back outbox, the merchants and the analysts' own marts
(recurring series, transfers paired, Expenses drawn down), behind named functions.

Kept apart from `reads.py` so the report's queries grow here without growing that module. Each
function takes an open (read-only) connection and returns Polars frames or plain values.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import polars as pl

from centsync.warehouse.frames import frame as query_frame
from centsync.warehouse.reads import table_exists

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
    return query_frame(
        con,
        "SELECT strftime(month, '%Y-%m') AS month, count(*)::BIGINT AS rows "
        "FROM core.transactions GROUP BY month ORDER BY month DESC",
    )


def transactions_of_months(con: duckdb.DuckDBPyConnection, months: Sequence[str]) -> pl.DataFrame:
    """Every local transaction of the given months ('YYYY-MM'), by date and id."""
    if not months:
        return query_frame(con, _TX_SELECT + " WHERE false")
    return query_frame(
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
    return query_frame(
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
    return query_frame(
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
    return query_frame(
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
    return query_frame(
        con,
        """
        SELECT s.merchant, any_value(coalesce(n.merchant_name, s.merchant)) AS merchant_name,
               sum(s.amount_cents)::BIGINT AS amount_cents,
               sum(s.transactions)::BIGINT AS transactions
        FROM marts.spending_by_month_merchant s
        LEFT JOIN marts.merchant_names n USING (merchant)
        WHERE s.month > (SELECT max(month) FROM marts.spending_by_month_merchant) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY 3, 1 LIMIT ?
        """,
        [limit],
    )


def recurring_series(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The recurring series (marts.recurring_series), active first, the next due first."""
    return query_frame(
        con,
        """
        SELECT merchant_name, account_name, type, cadence, typical_amount_cents,
               last_amount_cents, occurrences, last_booked_at, next_expected_on, status,
               previous_amount_cents, changed_on
        FROM marts.recurring_series ORDER BY status, next_expected_on, merchant_name
        """,
    )


def transfer_routes(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The paired transfers per route (from account, to account): count, amount, last."""
    return query_frame(
        con,
        """
        SELECT coalesce(f.name, p.from_account_id::VARCHAR) AS from_account,
               coalesce(t.name, p.to_account_id::VARCHAR) AS to_account,
               count(*) AS transfers, sum(p.amount_cents)::BIGINT AS amount_cents,
               max(p.booked_at) AS last_booked_at
        FROM marts.transfer_pairs p
        LEFT JOIN core.accounts f ON f.id = p.from_account_id
        LEFT JOIN core.accounts t ON t.id = p.to_account_id
        GROUP BY ALL ORDER BY amount_cents DESC, from_account, to_account
        """,
    )


def unpaired_transfers(con: duckdb.DuckDBPyConnection, limit: int) -> pl.DataFrame:
    """The transfer legs without a pair, with their reason (the newest `limit`)."""
    return query_frame(
        con,
        """
        SELECT u.reason, strftime(u.booked_at, '%Y-%m-%d') AS date,
               coalesce(a.name, u.account_id::VARCHAR) AS account, t.concept, u.amount_cents
        FROM marts.unpaired_transfers u
        LEFT JOIN core.accounts a ON a.id = u.account_id
        LEFT JOIN core.transactions t ON t.id = u.transaction_id
        ORDER BY u.booked_at DESC, u.transaction_id LIMIT ?
        """,
        [limit],
    )


def expense_goals(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each Expense's draw: months, transactions, the total drawn (running total's last)."""
    return query_frame(
        con,
        """
        SELECT expense_goal_id::VARCHAR AS expense_goal_id, count(*) AS months,
               sum(transactions)::BIGINT AS transactions,
               sum(assigned_cents)::BIGINT AS drawn_cents,
               strftime(max(month), '%Y-%m') AS last_month
        FROM marts.expense_goals_by_month GROUP BY 1 ORDER BY drawn_cents, 1
        """,
    )
