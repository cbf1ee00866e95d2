"""The local side of a range's fingerprint, and the read helpers the refresh asks the warehouse.

A fingerprint (pipelines/refresh/fingerprints.py, docs/refresh.md) is the count and sums per
type, spending per category and spending per merchant of the rows booked in a range. This is
the one computation of its local side: the refresh compares it with the service's, and the
confirmation step of reconciliation uses its totals. The merchant key is the contract's rule
(transform.spending.merchant_key), so the warehouse hands over the expense rows it applies to.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl

from centsync.transform.calendar import month_key
from centsync.warehouse.frames import frame as query_frame
from centsync.warehouse.migrate import current_version
from centsync.warehouse.session import Session

EPOCH = dt.date(1900, 1, 1)  # the lower bound of a range open below
# Count and sums per type, in the server summary's order: (count, income, expense, transfer).
Totals = tuple[int, int, int, int]


def local_totals(con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date) -> Totals:
    """Count and sums per type of the local rows booked in ``lo``..``hi`` (``lo`` None: since
    the first)."""
    row = con.execute(
        """
        SELECT count(*)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'income'), 0)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'expense'), 0)::BIGINT,
               coalesce(sum(amount) FILTER (WHERE type = 'transfer'), 0)::BIGINT
        FROM core.transactions WHERE booked_at BETWEEN ? AND ?
        """,
        [lo or EPOCH, hi],
    ).fetchall()[0]
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def local_category_spending(
    con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date
) -> pl.DataFrame:
    """Spending per category of the rows booked in ``lo``..``hi``: every expense row, refunds
    included (the spending endpoint's rules). Columns: key (category id), amount, count."""
    return query_frame(
        con,
        """
        SELECT category_id::VARCHAR AS key, sum(amount)::BIGINT AS amount, count(*)::BIGINT AS count
        FROM core.transactions WHERE type = 'expense' AND booked_at BETWEEN ? AND ? GROUP BY 1
        """,
        [lo or EPOCH, hi],
    )


def local_expenses(con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date) -> pl.DataFrame:
    """Expenses booked in ``lo``..``hi`` per concept: concept, amount (their sum), count (the
    merchant fingerprint's input; the merchant key itself is the contract's rule, applied by
    the caller to each concept). Summed here, not one row per expense: a ledger holds a few
    hundred concepts, and a 2,000,000-row ledger's expense rows read whole were 200 MB."""
    return query_frame(
        con,
        "SELECT concept, sum(amount)::BIGINT AS amount, count(*)::BIGINT AS count "
        "FROM core.transactions WHERE type = 'expense' AND booked_at BETWEEN ? AND ? "
        "GROUP BY concept",
        [lo or EPOCH, hi],
    )


class Fingerprints(Session):
    """Month state, and what a refresh needs to decide what to read."""

    def verification_order(self) -> pl.DataFrame:
        """Months with local rows, verified longest ago first (then oldest month first).

        Columns: month ('YYYY-MM'), rows (local), verified_at (when the month was last read
        whole, on the service's clock; NULL when no read is recorded).
        """
        return self.query(
            """
            SELECT strftime(t.month, '%Y-%m') AS month, count(*)::BIGINT AS rows,
                   any_value(coalesce(s.verified_at, s.read_at)) AS verified_at
            FROM core.transactions t LEFT JOIN ops.month_state s ON s.month = t.month
            GROUP BY t.month ORDER BY verified_at NULLS FIRST, t.month
            """
        )

    def months_present(self) -> list[str]:
        """Months ('YYYY-MM') with at least one local transaction."""
        rows = self.con.execute(
            "SELECT DISTINCT month FROM core.transactions ORDER BY 1"
        ).fetchall()
        return [month_key(r[0]) for r in rows]

    def month_state(self) -> pl.DataFrame:
        """ops.month_state with month as 'YYYY-MM'."""
        return self.query(
            "SELECT strftime(month, '%Y-%m') AS month, * EXCLUDE (month) FROM ops.month_state ORDER BY month"
        )

    def rejected_rows(self, refresh_id: str | None = None) -> pl.DataFrame:
        """Rejected rows (of one refresh, or all) with their reasons: the asset check's input."""
        if refresh_id is None:
            return self.query("SELECT * FROM raw.rejected_rows ORDER BY rejected_at")
        return self.query(
            "SELECT * FROM raw.rejected_rows WHERE refresh_id = ? ORDER BY rejected_at",
            [refresh_id],
        )

    def schema_version(self) -> int:
        """The migration version of this file."""
        return current_version(self.con)


def local_spending_by_month(
    con: duckdb.DuckDBPyConnection, lo: dt.date | None, hi: dt.date
) -> dict[str, tuple[int, int]]:
    """Spending per month ('YYYY-MM': (cents, rows)) of the expense rows booked in ``lo``..``hi``:
    the local side of the spending endpoint grouped by month."""
    con.complete()
    rows = con.execute(
        """
        SELECT strftime(booked_at, '%Y-%m'), sum(amount)::BIGINT, count(*)::BIGINT
        FROM core.transactions WHERE type = 'expense' AND booked_at BETWEEN ? AND ? GROUP BY 1
        """,
        [lo or EPOCH, hi],
    ).fetchall()
    return {str(m): (int(a), int(n)) for m, a, n in rows}
