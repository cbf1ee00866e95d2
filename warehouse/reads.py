"""Every query the use cases and outputs run against a warehouse, behind named functions.

`pipelines/` holds no SQL (the demo's printed example queries aside): what it needs to know of a
warehouse it asks here, by name, the way sqlite-utils keeps every statement behind its library.
Each function takes an open connection (read only or the refresh's own) and returns plain
Python values or Polars frames. Sections by the room that asks.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from centsync.warehouse.frames import frame as query_frame

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


def meta_values(
    con: duckdb.DuckDBPyConnection, keys: Sequence[str] | None = None
) -> dict[str, str]:
    """`ops.meta` (the source the warehouse is bound to, the key's expiry...) as a dict: these
    keys, or all of them (a file with no ops schema yet has none)."""
    try:
        if keys is None:
            rows = con.execute("SELECT key, value FROM ops.meta").fetchall()
        else:
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


def writeback_reference(
    con: duckdb.DuckDBPyConnection, transaction_ids: Sequence[str]
) -> WritebackReference:
    """The reference data of a write-back, with the types of `transaction_ids` only."""
    accounts = query_frame(con, "SELECT id::VARCHAR AS id, name, currency FROM core.accounts")
    categories = query_frame(con, "SELECT id::VARCHAR AS id, name FROM core.categories")
    goals = [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT expense_goal_id FROM core.transactions "
            "WHERE expense_goal_id IS NOT NULL"
        ).fetchall()
    ]
    transactions = query_frame(
        con,
        "SELECT t.id::VARCHAR AS id, t.type, a.connection_id IS NOT NULL AS bank_fed "
        "FROM core.transactions t LEFT JOIN core.accounts a ON a.id = t.account_id "
        "WHERE t.id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
        [list(transaction_ids)],
    )
    currency = con.execute("SELECT any_value(currency) FROM core.settings").fetchall()[0][0]
    return WritebackReference(accounts, categories, goals, transactions, currency)


def rule_candidates(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Every transaction with what categorisation rules match on and set (ids as text)."""
    return query_frame(
        con,
        "SELECT t.id::VARCHAR AS id, t.account_id::VARCHAR AS account_id, a.name AS account_name, "
        "t.booked_at, t.amount, t.concept, t.type, t.category_id::VARCHAR AS category_id, "
        "t.expense_goal_id::VARCHAR AS expense_goal_id FROM core.transactions t "
        "JOIN core.accounts a ON a.id = t.account_id ORDER BY t.booked_at, t.id",
    )


def ledger_rows_between(
    con: duckdb.DuckDBPyConnection, account_ids: Sequence[str], first: dt.date, last: dt.date
) -> pl.DataFrame:
    """The transactions of these accounts booked within [first, last] (a bank file's days)."""
    return query_frame(
        con,
        "SELECT id::VARCHAR AS id, account_id::VARCHAR AS account_id, booked_at, amount, concept "
        "FROM core.transactions WHERE account_id::VARCHAR IN (SELECT unnest(?::VARCHAR[])) "
        "AND booked_at BETWEEN ? AND ? ORDER BY booked_at, id",
        [list(account_ids), first, last],
    )


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


def _as_dicts(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None
) -> list[dict[str, Any]]:
    """A query's rows as dicts keyed by column name."""
    cur = con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def table_exists(con: duckdb.DuckDBPyConnection, qualified: str) -> bool:
    """Whether `schema.table` exists (an older warehouse may lack a newer table)."""
    schema, table = qualified.split(".")
    (n,) = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE schema_name = ? AND table_name = ?",
        [schema, table],
    ).fetchall()[0]
    return bool(n)


def row_counts(con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> dict[str, int]:
    """Rows per table, in the order given, for those of `tables` that exist."""
    return {
        t: int(con.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0])
        for t in tables
        if table_exists(con, t)
    }


# a refresh's duration as a person reads it, in `status` and at the end of the refresh
_SECONDS = "round(epoch(finished_at) - epoch(started_at), 2)"


def latest_refresh(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The latest refresh of any outcome: when, mode, result, duration, requests, error."""
    rows = _as_dicts(
        con,
        f"""
        SELECT refresh_id, status, mode, started_at, finished_at, {_SECONDS} AS seconds,
               requests_total, rows_changed, rows_rejected, months_checked, error,
               transactions_new, transactions_updated, transactions_removed
        FROM ops.refreshes ORDER BY started_at DESC LIMIT 1
        """,
    )
    return rows[0] if rows else None


def latest_refresh_seconds(con: duckdb.DuckDBPyConnection) -> float:
    """The latest refresh's duration (`latest_refresh`'s `seconds`; 0.0 when there is none),
    read without its times: a time with its zone, the first of a process, loads pytz's zone
    list (~10 ms of a household refresh)."""
    rows = con.execute(
        f"SELECT {_SECONDS} FROM ops.refreshes ORDER BY started_at DESC LIMIT 1"
    ).fetchall()
    return float(rows[0][0] or 0.0) if rows else 0.0


def latest_successful_refresh(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The latest refresh that succeeded: its id and when it finished."""
    rows = _as_dicts(
        con,
        "SELECT refresh_id, finished_at FROM ops.refreshes WHERE status = 'succeeded' "
        "ORDER BY started_at DESC LIMIT 1",
    )
    return rows[0] if rows else None


def refresh_outcome(con: duckdb.DuckDBPyConnection, refresh_id: str) -> tuple[str, str] | None:
    """A refresh's (status, mode), None for an unknown refresh."""
    rows = con.execute(
        "SELECT status, mode FROM ops.refreshes WHERE refresh_id = ?", [refresh_id]
    ).fetchall()
    return (rows[0][0], rows[0][1]) if rows else None


def refresh_finished_at(con: duckdb.DuckDBPyConnection, refresh_id: str) -> Any:
    """When a refresh finished (a timezone-aware datetime; None: unknown or still running)."""
    rows = con.execute(
        "SELECT finished_at FROM ops.refreshes WHERE refresh_id = ?", [refresh_id]
    ).fetchall()
    return rows[0][0] if rows else None


def synced_range(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The ledger's extent: `transactions`, `first` and `last` booked day, distinct `months`."""
    return _as_dicts(
        con,
        """
        SELECT count(*) AS transactions, min(booked_at) AS first, max(booked_at) AS last,
               count(DISTINCT month) AS months FROM core.transactions
        """,
    )[0]


def verification_state(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The month verified longest ago (rolling verification, docs/refresh.md): which month,
    when (on the service's clock), the newest verification, and how many months (None: no
    transactions)."""
    # a warehouse from before rolling verification has only read_at
    has_verified_at = _as_dicts(
        con,
        "SELECT 1 AS x FROM information_schema.columns WHERE table_schema = 'ops' "
        "AND table_name = 'month_state' AND column_name = 'verified_at'",
    )
    column = "coalesce(s.verified_at, s.read_at)" if has_verified_at else "s.read_at"
    rows = _as_dicts(
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


def latest_reconciliation(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The latest reconciliation run: ids, when, source, verdict and its counts (None: none)."""
    if not table_exists(con, "recon.runs"):
        return None
    rows = _as_dicts(
        con,
        "SELECT recon_id, refresh_id, ran_at, source, verdict, checked, explained, differ "
        "FROM recon.runs ORDER BY ran_at DESC LIMIT 1",
    )
    return rows[0] if rows else None


def reconciliation_results(con: duckdb.DuckDBPyConnection, recon_id: str) -> pl.DataFrame:
    """Every comparison of one reconciliation, both numbers and the status."""
    return query_frame(
        con,
        """
        SELECT "check", scope, from_date, to_date, local_cents, server_cents,
               difference_cents, local_count, server_count, status, explanation
        FROM recon.results WHERE recon_id = ?
        """,
        [recon_id],
    )


def spending_by_category_last_year(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Spending per category over the 12 months up to the latest one, most spent first."""
    return query_frame(
        con,
        """
        SELECT category_name, sum(amount_cents) AS amount_cents FROM marts.spending_by_month_category
        WHERE month > (SELECT max(month) FROM marts.spending_by_month_category) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY 2
        """,
    )


def net_worth_by_day(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """The daily net-worth curve: net worth, assets and liabilities per date."""
    return query_frame(
        con,
        "SELECT date, net_worth_cents, assets_cents, liabilities_cents FROM marts.net_worth_daily ORDER BY date",
    )


def net_worth_snapshot_points(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Each refresh's net-worth snapshot: when, and the service's net worth then."""
    return query_frame(
        con, "SELECT snapshot_at, net_worth_cents FROM marts.net_worth_snapshots ORDER BY 1"
    )


def cash_flow_months(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """Income, spending and net per month, and whether the month is still running (partial)."""
    return query_frame(
        con,
        "SELECT month, income_cents, spending_cents, net_cents, coalesce(partial, false) AS partial "
        "FROM marts.cash_flow_by_month ORDER BY month",
    )


# The catalogue, for the data dictionary (pipelines/outputs/data_dictionary.py).


def catalogue_schemas(con: duckdb.DuckDBPyConnection, skip: Sequence[str]) -> list[str]:
    """The database's own schemas (not DuckDB's internal ones, nor any of `skip`)."""
    return [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT schema_name FROM duckdb_schemas() "
            "WHERE NOT internal AND database_name = current_database() "
            "AND schema_name <> ALL(?::VARCHAR[])",
            [list(skip)],
        ).fetchall()
    ]


def schema_descriptions(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[int, str]]:
    """`ops.schemas`: each schema's (position, comment) in the dictionary (empty if absent)."""
    if not table_exists(con, "ops.schemas"):
        return {}
    return {
        n: (p, c)
        for n, p, c in con.execute(
            "SELECT schema_name, position, comment FROM ops.schemas"
        ).fetchall()
    }


def catalogue_relations(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, str | None]]:
    """Every table and view: (schema, name, "table" or "view", comment), by schema, kind, name."""
    return [
        (s, t, k, c)
        for s, t, k, c in con.execute(
            """
            SELECT schema_name, table_name, 'table' AS kind, comment FROM duckdb_tables()
            WHERE database_name = current_database() AND NOT temporary
            UNION ALL
            SELECT schema_name, view_name, 'view', comment FROM duckdb_views()
            WHERE database_name = current_database() AND NOT internal AND NOT temporary
            ORDER BY schema_name, kind, table_name
            """
        ).fetchall()
    ]


def catalogue_columns(
    con: duckdb.DuckDBPyConnection,
) -> list[tuple[str, str, str, str, str | None]]:
    """Every column: (schema, table, column, type, comment), in each table's column order."""
    return [
        (s, t, c, typ, comment)
        for s, t, c, typ, comment in con.execute(
            """
            SELECT schema_name, table_name, column_name, data_type, comment FROM duckdb_columns()
            WHERE database_name = current_database() AND NOT internal
            ORDER BY schema_name, table_name, column_index
            """
        ).fetchall()
    ]


# --- the CLI (pipelines/cli/) ----------------------------------------------------------------


def rejected_in_latest_refresh(con: duckdb.DuckDBPyConnection) -> tuple[int, str | None]:
    """Rows validation rejected in the latest succeeded refresh, and one of their reasons
    (the `no_rejected_rows` asset check)."""
    row = con.execute(
        """
        SELECT count(*), any_value(reason) FROM raw.rejected_rows
        WHERE refresh_id = (SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1)
        """
    ).fetchone()
    n, reason = row or (0, None)
    return int(n), None if reason is None else str(reason)


def rejected_by_latest_refresh(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Each row the latest succeeded refresh rejected (raw.rejected_rows): its entity, the id
    the service gave it (when it had one), its reason and the refresh; a row rejected by an
    earlier refresh and landed since is no longer listed."""
    cur = con.execute(
        """
        SELECT entity, record->>'id' AS record_id, reason, refresh_id, rejected_at,
               left(record::VARCHAR, 300) AS record
        FROM raw.rejected_rows
        WHERE refresh_id = (SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1)
        ORDER BY rejected_at, entity, record_id
        """
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


# --- planner ---------------------------------------------------------------------------------


def months_by_verification(
    con: duckdb.DuckDBPyConnection,
) -> list[tuple[str, int, dt.datetime | None]]:
    """Months with local rows as (month 'YYYY-MM', rows, verified_at), verified longest ago
    first: what the refresh's plan prices (the same as `Warehouse.verification_order`)."""
    try:
        rows = con.execute(
            """
            SELECT strftime(t.month, '%Y-%m') AS month, count(*)::BIGINT AS rows,
                   any_value(coalesce(s.verified_at, s.read_at)) AS verified_at
            FROM core.transactions t LEFT JOIN ops.month_state s ON s.month = t.month
            GROUP BY t.month ORDER BY verified_at NULLS FIRST, t.month
            """
        ).fetchall()
    except duckdb.CatalogException:
        return []
    return [(str(m), int(n), v) for m, n, v in rows]


# --- the service's contract: doctor, the contract report (pipelines/outputs/contract_report.py)

# The raw tables that hold records as the service sent them, and their first column.
RAW_RECORDS = (
    "raw.transactions",
    "raw.accounts",
    "raw.connections",
    "raw.sync_status",
    "raw.settings",
)


def contract_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]] | None:
    """Every row of ops.contract (what refreshes learned of the service's shapes), JSON columns
    as text; None when the warehouse has no such table (no refresh has learned one yet)."""
    if not table_exists(con, "ops.contract"):
        return None
    return _as_dicts(
        con,
        "SELECT surface, state, mapping::VARCHAR AS mapping, shape::VARCHAR AS shape, evidence, "
        "reason, learned_refresh, checked_refresh, changed_at FROM ops.contract ORDER BY surface",
    )


def raw_records(con: duckdb.DuckDBPyConnection, table: str, limit: int) -> list[str]:
    """Up to `limit` records of a raw table (one of RAW_RECORDS), as the JSON text received."""
    if table not in RAW_RECORDS or not table_exists(con, table):
        return []
    rows = con.execute(f"SELECT raw::VARCHAR FROM {table} LIMIT ?", [limit]).fetchall()
    return [r[0] for r in rows]


def month_payloads(con: duckdb.DuckDBPyConnection, month: dt.date) -> list[str]:
    """The payloads as sent (raw.transactions) of the rows booked in `month` (its first day)."""
    rows = con.execute(
        "SELECT raw::VARCHAR FROM raw.transactions "
        "WHERE booked_at >= ? AND booked_at < ? + INTERVAL 1 MONTH",
        [month, month],
    ).fetchall()
    return [r[0] for r in rows]


def known_words(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The names a warehouse holds (accounts, institutions, categories, merchants, settings):
    what a report that must never show a name checks its key names against."""
    queries = {
        "core.accounts": "SELECT name FROM core.accounts UNION SELECT institution FROM core.accounts",
        "core.categories": "SELECT name FROM core.categories",
        "core.transactions": "SELECT DISTINCT concept FROM core.transactions",
        "core.connections": "SELECT institution FROM core.connections",
    }
    words: set[str] = set()
    for table, sql in queries.items():
        if table_exists(con, table):
            words.update(str(r[0]).lower() for r in con.execute(sql).fetchall() if r[0])
    return words


def unread_answers(con: duckdb.DuckDBPyConnection, limit: int) -> list[tuple[str, str]]:
    """(surface, body as JSON text) of the latest answers a refresh could not read
    (raw.unread_answers, migration 010), up to `limit` a surface; none before that table."""
    if not table_exists(con, "raw.unread_answers"):
        return []
    rows = con.execute(
        "SELECT surface, body::VARCHAR FROM raw.unread_answers WHERE body IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY surface ORDER BY received_at DESC) <= ?",
        [limit],
    ).fetchall()
    return [(str(s), str(b)) for s, b in rows]
