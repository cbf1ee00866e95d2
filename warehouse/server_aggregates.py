"""The service's own aggregates, as fetched, into server.* (for reconciliation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import polars as pl

from centsync.warehouse.common import (
    LoadResult,
    _frame,
)
from centsync.warehouse.session import Session


class ServerAggregateLoader(Session):
    """Loaders of server.* tables, stamped with the refresh."""

    def load_transactions_summaries(self, rows: Sequence[Mapping[str, Any]]) -> LoadResult:
        """Land `GET /v1/transactions/summary` answers, each merged with the request's scope.

        Each row: scope ('all'|'year'|'month'|'window'), from, to (dates or None), optional params
        (the other filters sent), and the body's count, income, expense, transfer, net.
        """
        records = []
        for r in rows:
            rec = dict(r)
            params = rec.get("params")
            rec["params"] = (
                None
                if params is None
                else (params if isinstance(params, str) else orjson.dumps(params).decode())
            )
            for k in ("from", "to"):
                rec[k] = None if rec.get(k) is None else str(rec[k])
            rec["raw"] = orjson.dumps(rec).decode()
            records.append(rec)
        frame = _frame(
            records,
            [
                "scope",
                "from",
                "to",
                "params",
                "count",
                "income",
                "expense",
                "transfer",
                "net",
                "raw",
            ],
        )
        split = self._split("server.transactions_summary", frame)
        result = LoadResult(
            "server.transactions_summary", landed=split.valid.height, rejected=split.rejected_count
        )
        with self._registered(split.valid) as src, self.transaction() as con:
            con.execute(
                f"""
                INSERT INTO server.transactions_summary
                SELECT ?, now(), scope, "from", "to", params::JSON, count, income, expense, transfer,
                       coalesce(net, income + expense + transfer)
                FROM {src}
                """,
                [self._rid()],
            )
            self._land_rejected("server.transactions_summary", split.rejected)
        self.stats.rows_rejected += result.rejected
        return result

    def load_spending(
        self, responses: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> LoadResult:
        """Land `GET /v1/analytics/spending` answers (any group_by); category labels feed core.categories."""
        bodies = [responses] if isinstance(responses, Mapping) else list(responses)
        totals: list[dict[str, Any]] = []
        lines: list[dict[str, Any]] = []
        for body in bodies:
            data = list(body.get("data") or [])
            head = {
                "group_by": body.get("group_by", "category"),
                "from": body.get("from"),
                "to": body.get("to"),
            }
            totals.append(
                {
                    **head,
                    "currency": body.get("currency"),
                    "total": body.get("total"),
                    "row_count": len(data),
                }
            )
            for item in data:
                line = {
                    **head,
                    "key": item.get("key"),
                    "label": item.get("label"),
                    "amount": item.get("amount"),
                    "count": item.get("count"),
                }
                lines.append({**line, "raw": orjson.dumps(item).decode()})
        for t in totals:
            t["raw"] = orjson.dumps(t).decode()
        t_split = self._split(
            "server.spending_totals",
            _frame(totals, ["group_by", "from", "to", "currency", "total", "row_count", "raw"]),
        )
        l_split = self._split(
            "server.spending",
            _frame(lines, ["group_by", "from", "to", "key", "label", "amount", "count", "raw"]),
        )
        rid = self._rid()
        result = LoadResult(
            "server.spending",
            landed=l_split.valid.height,
            rejected=l_split.rejected_count + t_split.rejected_count,
        )
        with self.transaction() as con:
            with self._registered(t_split.valid) as src:
                con.execute(
                    f'INSERT INTO server.spending_totals SELECT ?, now(), group_by, "from", "to", currency, '
                    f"total, row_count FROM {src}",
                    [rid],
                )
            with self._registered(l_split.valid) as src:
                con.execute(
                    f'INSERT INTO server.spending SELECT ?, group_by, "from", "to", key, label, amount, count FROM {src}',
                    [rid],
                )
                con.execute(
                    f"""
                    INSERT INTO core.categories
                    SELECT try_cast(key AS UUID) AS id, any_value(label), ?, ? FROM {src}
                    WHERE group_by = 'category' AND try_cast(key AS UUID) IS NOT NULL AND label IS NOT NULL
                    GROUP BY 1
                    ON CONFLICT (id) DO UPDATE SET name = excluded.name,
                        last_seen_refresh = excluded.last_seen_refresh
                    """,
                    [rid, rid],
                )
            self._land_rejected("server.spending_totals", t_split.rejected)
            self._land_rejected("server.spending", l_split.rejected)
        self.stats.rows_rejected += result.rejected
        return result

    def load_accounts_summary(self, body: Mapping[str, Any]) -> LoadResult:
        """Land `GET /v1/accounts/summary` (with its by_type breakdown)."""
        by_type = body.get("by_type") or {}
        rec = {k: body.get(k) for k in ("currency", "assets", "liabilities", "net_worth", "count")}
        rec["by_type"] = orjson.dumps(by_type).decode()
        rec["raw"] = orjson.dumps(dict(body)).decode()
        split = self._split(
            "server.accounts_summary",
            _frame(
                [rec], ["currency", "assets", "liabilities", "net_worth", "count", "by_type", "raw"]
            ),
        )
        rid = self._rid()
        again = self._snapshotted("server.accounts_summary")
        types = pl.DataFrame(
            {"type": [str(k) for k in by_type], "balance": [int(x) for x in by_type.values()]},
            schema={"type": pl.String, "balance": pl.Int64},
        )
        with self.transaction() as con:
            self._land_rejected("server.accounts_summary", split.rejected)
            if split.valid.height:
                with self._registered(split.valid) as src, self._registered(types) as bt:
                    # a second load in one refresh replaces the first (DELETE then INSERT: an
                    # upsert costs DuckDB ~1.5 ms more; the first has nothing to take out)
                    if again:
                        con.execute(
                            "DELETE FROM server.accounts_summary WHERE refresh_id = ?", [rid]
                        )
                        con.execute(
                            "DELETE FROM server.accounts_summary_by_type WHERE refresh_id = ?",
                            [rid],
                        )
                    con.execute(
                        f"INSERT INTO server.accounts_summary SELECT ?, now(), currency, assets, "
                        f"liabilities, net_worth, count, by_type::JSON FROM {src}",
                        [rid],
                    )
                    con.execute(
                        f"INSERT INTO server.accounts_summary_by_type SELECT ?, type, balance FROM {bt}",
                        [rid],
                    )
        self.stats.rows_rejected += split.rejected_count
        return LoadResult(
            "server.accounts_summary", landed=split.valid.height, rejected=split.rejected_count
        )

    def load_net_worth(self, body: Mapping[str, Any]) -> LoadResult:
        """Land `GET /v1/analytics/net-worth`."""
        rec = {k: body.get(k) for k in ("currency", "assets", "liabilities", "total", "as_of")}
        rec["raw"] = orjson.dumps(dict(body)).decode()
        split = self._split(
            "server.net_worth",
            _frame([rec], ["currency", "assets", "liabilities", "total", "as_of", "raw"]),
        )
        again = self._snapshotted("server.net_worth")
        with self.transaction() as con:
            self._land_rejected("server.net_worth", split.rejected)
            if split.valid.height:
                with self._registered(split.valid) as src:
                    rid = self._rid()
                    if again:  # a second load in one refresh replaces the first
                        con.execute("DELETE FROM server.net_worth WHERE refresh_id = ?", [rid])
                    con.execute(
                        f"INSERT INTO server.net_worth SELECT ?, now(), currency, assets, "
                        f"liabilities, total, as_of FROM {src}",
                        [rid],
                    )
        self.stats.rows_rejected += split.rejected_count
        return LoadResult(
            "server.net_worth", landed=split.valid.height, rejected=split.rejected_count
        )
