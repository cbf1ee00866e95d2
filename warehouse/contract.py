"""ops.contract: how each answer the API document leaves "not shown" is read (issue 42).

Rows in, rows out: the learning itself is transform/shapes.py's, wired by
pipelines/contract_book.py. A body that could not be read lands whole in
raw.unread_answers with the reason, so nothing the service said is lost.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import duckdb
import orjson

from centsync.warehouse.session import Session

COLUMNS = (
    "surface",
    "state",
    "mapping",
    "shape",
    "evidence",
    "reason",
    "learned_refresh",
    "checked_refresh",
    "changed_at",
)


def contract_rows(con: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Every surface's row of ops.contract (mapping and shape parsed), by surface; none in a
    warehouse older than migration 010."""
    try:
        got = con.execute(
            "SELECT surface, state, mapping::VARCHAR, shape::VARCHAR, evidence, reason, "
            "learned_refresh, checked_refresh, changed_at FROM ops.contract ORDER BY surface"
        ).fetchall()
    except duckdb.CatalogException:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for row in got:
        rec = dict(zip(COLUMNS, row, strict=True))
        for k in ("mapping", "shape"):
            rec[k] = None if rec[k] is None else orjson.loads(rec[k])
        out[rec["surface"]] = rec
    return out


class ContractStore(Session):
    """Reads and writes of ops.contract."""

    def contract_rows(self) -> dict[str, dict[str, Any]]:
        """Every surface's row (mapping and shape parsed), by surface."""
        return contract_rows(self.con)

    def refresh_number(self) -> int:
        """This refresh's number: its position in ops.refreshes by started_at (1 for the first)."""
        row = self._one(
            "SELECT count(*) FROM ops.refreshes WHERE started_at <= coalesce("
            "(SELECT started_at FROM ops.refreshes WHERE refresh_id = ?), now())",
            [self.refresh_id or ""],
        )
        return int(row[0]) if row else 0

    def save_contract(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Upsert surfaces' rows (a row's changed_at: now, when its state or mapping changed),
        in one statement: a refresh saves every surface, and a statement a row was a
        household refresh's 4 % (issue 46)."""
        params: list[Any] = []
        for r in rows:
            params += [
                r["surface"],
                r["state"],
                None if r.get("mapping") is None else orjson.dumps(r["mapping"]).decode(),
                None if r.get("shape") is None else orjson.dumps(r["shape"]).decode(),
                r.get("evidence"),
                r.get("reason"),
                r.get("learned_refresh"),
                r.get("checked_refresh"),
            ]
        if not params:
            return
        one = "(?, ?, ?::JSON, ?::JSON, ?, ?, ?, ?, now()::TIMESTAMP)"
        values = ", ".join([one] * (len(params) // 8))
        with self.transaction() as con:
            con.execute(
                f"""
                INSERT INTO ops.contract VALUES {values}
                ON CONFLICT (surface) DO UPDATE SET
                    changed_at = CASE WHEN ops.contract.state IS DISTINCT FROM excluded.state
                        OR ops.contract.mapping::VARCHAR IS DISTINCT FROM excluded.mapping::VARCHAR
                        THEN excluded.changed_at ELSE ops.contract.changed_at END,
                    state = excluded.state, mapping = excluded.mapping,
                    shape = excluded.shape, evidence = excluded.evidence,
                    reason = excluded.reason, learned_refresh = excluded.learned_refresh,
                    checked_refresh = excluded.checked_refresh
                """,
                params,
            )

    def land_unread(self, surface: str, raw: str, reason: str) -> None:
        """Keep an answer that could not be read, whole, with why (raw.unread_answers)."""
        with self.transaction() as con:
            con.execute(
                "INSERT INTO raw.unread_answers VALUES (?, ?, ?::JSON, ?, now())",
                [self._rid(), surface, raw, reason],
            )
