"""Month fingerprints and the read helpers the refresh algorithm asks the warehouse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from centsync.warehouse.common import (
    Period,
    category_hash,
    month_key,
    month_start,
)
from centsync.warehouse.migrate import current_version
from centsync.warehouse.session import Session


class Fingerprints(Session):
    """Local fingerprints, month state, and what a refresh needs to decide what to read."""

    def record_month_fingerprints(
        self, fingerprints: pl.DataFrame | Sequence[Mapping[str, Any]]
    ) -> int:
        """Remember the server's per-month fingerprints (count, sums per type, category hash).

        Columns: month ('YYYY-MM' or date), count, income, expense, transfer, and optionally net
        and category_hash. Upserts ops.month_state; returns the number of months recorded.
        """
        frame = (
            fingerprints
            if isinstance(fingerprints, pl.DataFrame)
            else pl.DataFrame(list(fingerprints))
        )
        if frame.height == 0:
            return 0
        months = [month_start(m) for m in frame.get_column("month").to_list()]
        cols: dict[str, Any] = {
            "month": pl.Series(months, dtype=pl.Date),
            "count": frame.get_column("count").cast(pl.Int64),
        }
        for name in ("income", "expense", "transfer"):
            cols[name] = frame.get_column(name).cast(pl.Int64)
        cols["net"] = (
            frame.get_column("net").cast(pl.Int64)
            if "net" in frame.columns
            else cols["income"] + cols["expense"] + cols["transfer"]
        )
        cols["category_hash"] = (
            frame.get_column("category_hash").cast(pl.String)
            if "category_hash" in frame.columns
            else pl.Series([None] * frame.height, dtype=pl.String)
        )
        with self._registered(pl.DataFrame(cols)) as name, self.transaction() as con:
            con.execute(
                f"""
                INSERT INTO ops.month_state (month, server_count, server_income, server_expense,
                    server_transfer, server_net, server_category_hash, checked_refresh, checked_at)
                SELECT month, count, income, expense, transfer, net, category_hash, ?, now() FROM {name}
                ON CONFLICT (month) DO UPDATE SET
                    server_count = excluded.server_count, server_income = excluded.server_income,
                    server_expense = excluded.server_expense, server_transfer = excluded.server_transfer,
                    server_net = excluded.server_net, server_category_hash = excluded.server_category_hash,
                    checked_refresh = excluded.checked_refresh, checked_at = excluded.checked_at
                """,
                [self._rid()],
            )
        return frame.height

    def local_fingerprints(self, period: Period = "month") -> pl.DataFrame:
        """Per month ('YYYY-MM') or year: count and sums per type of core.transactions, in SQL.

        Columns: month|year, count, income, expense, transfer, net (the server summary's shape).
        """
        label = (
            "strftime(month, '%Y-%m') AS month"
            if period == "month"
            else "year(month)::INTEGER AS year"
        )
        return self._df(
            f"""
            SELECT {label}, count(*)::BIGINT AS count,
                   coalesce(sum(amount) FILTER (WHERE type = 'income'), 0)::BIGINT AS income,
                   coalesce(sum(amount) FILTER (WHERE type = 'expense'), 0)::BIGINT AS expense,
                   coalesce(sum(amount) FILTER (WHERE type = 'transfer'), 0)::BIGINT AS transfer,
                   coalesce(sum(amount), 0)::BIGINT AS net
            FROM core.transactions GROUP BY 1 ORDER BY 1
            """
        )

    def local_category_spending(self, period: Period = "month") -> pl.DataFrame:
        """Per month or year and category: sum and count of type='expense' rows (the spending endpoint's rules)."""
        label = (
            "strftime(month, '%Y-%m') AS month"
            if period == "month"
            else "year(month)::INTEGER AS year"
        )
        return self._df(
            f"""
            SELECT {label}, category_id::VARCHAR AS category_id,
                   sum(amount)::BIGINT AS amount, count(*)::BIGINT AS count
            FROM core.transactions WHERE type = 'expense'
            GROUP BY ALL ORDER BY 1, 2 NULLS FIRST
            """
        )

    def local_category_hashes(self, period: Period = "month") -> pl.DataFrame:
        """Per month or year: `category_hash` of the local per-category spending."""
        spending = self.local_category_spending(period)
        label = "month" if period == "month" else "year"
        out: dict[str, list[Any]] = {label: [], "category_hash": []}
        for (key,), group in spending.group_by(label, maintain_order=True):
            out[label].append(key)
            out["category_hash"].append(
                category_hash(group.select("category_id", "amount", "count").iter_rows())
            )
        dtype = pl.String if period == "month" else pl.Int32
        return pl.DataFrame(out, schema={label: dtype, "category_hash": pl.String})

    def verification_order(self) -> pl.DataFrame:
        """Months with local rows, verified longest ago first (then oldest month first).

        Columns: month ('YYYY-MM'), rows (local), verified_at (when the month was last read
        whole, on the service's clock; NULL when no read is recorded).
        """
        return self._df(
            """
            SELECT strftime(t.month, '%Y-%m') AS month, count(*)::BIGINT AS rows,
                   any_value(coalesce(s.verified_at, s.read_at)) AS verified_at
            FROM core.transactions t LEFT JOIN ops.month_state s ON s.month = t.month
            GROUP BY t.month ORDER BY verified_at NULLS FIRST, t.month
            """
        )

    def local_merchant_spending(self, lo: Any, hi: Any) -> pl.DataFrame:
        """Expense rows booked in ``lo``..``hi``: concept and amount (the merchant fingerprint's
        input; the merchant key itself is the contract's rule, computed by the caller)."""
        return self._df(
            "SELECT concept, amount FROM core.transactions "
            "WHERE type = 'expense' AND booked_at BETWEEN ? AND ?",
            [lo, hi],
        )

    def months_present(self) -> list[str]:
        """Months ('YYYY-MM') with at least one local transaction."""
        rows = self.con.execute(
            "SELECT DISTINCT month FROM core.transactions ORDER BY 1"
        ).fetchall()
        return [month_key(r[0]) for r in rows]

    def last_timezone(self) -> str | None:
        """The settings timezone seen by the last settings snapshot (None before any)."""
        return self.get_meta("timezone")

    def month_state(self) -> pl.DataFrame:
        """ops.month_state with month as 'YYYY-MM'."""
        return self._df(
            "SELECT strftime(month, '%Y-%m') AS month, * EXCLUDE (month) FROM ops.month_state ORDER BY month"
        )

    def resumable_months(self) -> list[str]:
        """Months already re-read by unfinished refreshes since the last successful one.

        A refresh that was stopped (and published its progress) left these months complete: a
        resumed first sync can skip them when their server fingerprint still matches.
        """
        rows = self.con.execute(
            """
            SELECT DISTINCT strftime(r.month, '%Y-%m') FROM ops.month_reads r
            JOIN ops.refreshes f USING (refresh_id)
            WHERE f.status <> 'succeeded'
              AND f.started_at > coalesce(
                  (SELECT max(started_at) FROM ops.refreshes WHERE status = 'succeeded'),
                  '-infinity'::TIMESTAMPTZ)
            ORDER BY 1
            """
        ).fetchall()
        return [str(r[0]) for r in rows]

    def rejected_rows(self, refresh_id: str | None = None) -> pl.DataFrame:
        """Rejected rows (of one refresh, or all) with their reasons: the asset check's input."""
        if refresh_id is None:
            return self._df("SELECT * FROM raw.rejected_rows ORDER BY rejected_at")
        return self._df(
            "SELECT * FROM raw.rejected_rows WHERE refresh_id = ? ORDER BY rejected_at",
            [refresh_id],
        )

    def schema_version(self) -> int:
        """The migration version of this file."""
        return current_version(self.con)
