"""Snapshots: accounts, connections, sync status and settings into core.* and history.*."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import duckdb
import orjson
import polars as pl

from centsync.warehouse import validation as v
from centsync.warehouse.common import (
    LoadResult,
    SettingsResult,
)
from centsync.warehouse.session import Session


class Snapshots(Session):
    """Current tables replaced whole, history appended, one row set per refresh."""

    def _snapshot(
        self,
        entity: str,
        frame: pl.DataFrame,
        *,
        key: str,
        core_cols: str,
        compared: Sequence[str],
        history_cols: str,
        extra: Iterable[str] = (),
        again_extra: Iterable[str] = (),
    ) -> LoadResult:
        """Replace core.<entity> and raw.<entity> with the frame; append history.<entity>.

        The counts (inserted, updated, deleted) come from the rows the replace itself
        returns, the old ones its DELETE took out and the new ones its INSERT wrote, compared
        in Python (a few rows): no diff query of its own (a statement a snapshot, issue 46).
        `extra` runs after, with the refresh id; `again_extra` before it, on a second snapshot
        in one refresh only (it takes out the first one's rows).
        """
        rid = self._rid()
        split = self._split(entity, frame)
        result = LoadResult(entity, landed=split.valid.height, rejected=split.rejected_count)
        again = self._snapshotted(entity)
        # the compared values as text: equal text, equal values, for every type compared here;
        # a timestamp with time zone would come back as a datetime, and the first of a process
        # loads pytz's zone list (~10 ms of a household refresh)
        cols = ", ".join((key, *(f"{c}::VARCHAR" for c in compared)))
        with self._registered(split.valid) as src, self.transaction() as con:
            old = con.execute(f"DELETE FROM core.{entity} RETURNING {cols}").fetchall()
            new = con.execute(
                f"INSERT INTO core.{entity} SELECT *, ? FROM (SELECT {core_cols} FROM {src}) "
                f"RETURNING {cols}",
                [rid],
            ).fetchall()
            result.inserted, result.updated, result.deleted = diff_counts(new, old)
            con.execute(f"DELETE FROM raw.{entity}")
            con.execute(
                f"INSERT INTO raw.{entity} SELECT {key}::UUID, ?, raw::JSON FROM {src}", [rid]
            )
            if again:  # one history row set per refresh: a second snapshot replaces the first
                con.execute(f"DELETE FROM history.{entity} WHERE refresh_id = ?", [rid])
                for sql in again_extra:
                    con.execute(sql, [rid])
            con.execute(
                f"INSERT INTO history.{entity} SELECT refresh_id, now(), {history_cols} FROM core.{entity}"
            )
            for sql in extra:
                con.execute(sql, [rid])
            self._land_rejected(entity, split.rejected)
        self.stats.add(result)
        return result

    def snapshot_accounts(self, frame: pl.DataFrame) -> LoadResult:
        """Land the accounts list: current table, raw, history, and this refresh's net worth."""
        return self._snapshot(
            "accounts",
            frame,
            key="id",
            core_cols="id::UUID AS id, name, type, subtype, currency, balance, "
            "connection_id::UUID AS connection_id, institution, updated_at",
            compared=(
                "name",
                "type",
                "subtype",
                "currency",
                "balance",
                "connection_id",
                "institution",
                "updated_at",
            ),
            history_cols="id, name, type, subtype, currency, balance, connection_id, institution, updated_at",
            # a second snapshot in one refresh replaces the first (not an upsert: ~1.5 ms more)
            again_extra=["DELETE FROM history.net_worth WHERE refresh_id = $1"],
            extra=[
                """
                INSERT INTO history.net_worth
                SELECT $1, now(), any_value(currency),
                       coalesce(sum(balance) FILTER (WHERE balance > 0), 0)::BIGINT,
                       coalesce(-sum(balance) FILTER (WHERE balance < 0), 0)::BIGINT,
                       coalesce(sum(balance), 0)::BIGINT, count(*)
                FROM core.accounts
                """,
            ],
        )

    def snapshot_connections(self, frame: pl.DataFrame) -> LoadResult:
        """Land the connections list: current table, raw and history."""
        return self._snapshot(
            "connections",
            frame,
            key="id",
            core_cols="id::UUID AS id, provider, institution, status, last_synced_at, "
            "account_ids::UUID[] AS account_ids",
            compared=("provider", "institution", "status", "last_synced_at", "account_ids"),
            history_cols="id, provider, institution, status, last_synced_at, account_ids",
        )

    def snapshot_sync_status(self, frame: pl.DataFrame) -> LoadResult:
        """Land the sync status list: current table, raw and history."""
        return self._snapshot(
            "sync_status",
            frame,
            key="connection_id",
            core_cols="connection_id::UUID AS connection_id, provider, status, last_synced_at, next_sync_at",
            compared=("provider", "status", "last_synced_at", "next_sync_at"),
            history_cols="connection_id, provider, status, last_synced_at, next_sync_at",
        )

    def snapshot_settings(self, settings: Mapping[str, Any] | pl.DataFrame) -> SettingsResult:
        """Land the settings (one row) and remember the timezone; says whether it changed."""
        rid = self._rid()
        if isinstance(settings, pl.DataFrame):
            frame = settings
        else:
            frame = pl.DataFrame(
                {
                    **{
                        k: [None if settings.get(k) is None else str(settings.get(k))]
                        for k in ("timezone", "currency", "locale", "week_start")
                    },
                    "raw": [orjson.dumps(dict(settings)).decode()],
                },
                schema={
                    "timezone": pl.String,
                    "currency": pl.String,
                    "locale": pl.String,
                    "week_start": pl.String,
                    "raw": pl.String,
                },
            )
        previous = self.get_meta("timezone")
        split = self._split("settings", frame.head(1))
        if frame.height > 1:
            split = v.Split(
                split.valid,
                pl.concat(
                    [
                        split.rejected,
                        frame.slice(1).select(
                            pl.col("raw").alias("record")
                            if "raw" in frame.columns
                            else pl.lit("{}").alias("record"),
                            pl.lit("settings: more than one row").alias("reason"),
                        ),
                    ]
                ),
            )
        with self.transaction() as con:
            self._land_rejected("settings", split.rejected)
            if split.valid.height:
                self._land_settings(con, split.valid.row(0, named=True), rid)
        timezone = split.valid.get_column("timezone")[0] if split.valid.height else None
        self.stats.rows_landed += split.valid.height
        self.stats.rows_rejected += split.rejected_count
        return SettingsResult(previous, timezone, rejected=split.rejected_count)

    def _land_settings(self, con: duckdb.DuckDBPyConnection, row: dict[str, Any], rid: str) -> None:
        """One settings row into core, raw, history and ops.meta's timezone. Values are bound as
        parameters (one row: no frame to register). core, raw and the timezone are rewritten
        only when the row or its payload differs from what is stored (most refreshes: the
        settings did not change); history gets its row every refresh."""
        values = [row[c] for c in _SETTINGS]
        stored = con.execute(
            "SELECT s.timezone, s.currency, s.locale, s.week_start, r.raw::VARCHAR "
            "FROM core.settings s, raw.settings r"
        ).fetchall()
        if stored != [(*values, row["raw"])]:
            con.execute("DELETE FROM core.settings")
            con.execute("INSERT INTO core.settings VALUES (?, ?, ?, ?, ?)", [*values, rid])
            con.execute("DELETE FROM raw.settings")
            con.execute("INSERT INTO raw.settings VALUES (?, ?::JSON)", [rid, row["raw"]])
            con.execute("DELETE FROM ops.meta WHERE key = 'timezone'")
            con.execute("INSERT INTO ops.meta VALUES ('timezone', ?, now())", [row["timezone"]])
        if self._snapshotted("settings"):
            con.execute("DELETE FROM history.settings WHERE refresh_id = ?", [rid])
        con.execute("INSERT INTO history.settings VALUES (?, now(), ?, ?, ?, ?)", [rid, *values])


def diff_counts(
    new: Sequence[tuple[Any, ...]], old: Sequence[tuple[Any, ...]]
) -> tuple[int, int, int]:
    """Inserted, updated and deleted rows of `new` against `old` (each row: its key, then the
    compared values), as a FULL JOIN on the key counts them: a null key matches nothing, and a
    matched pair is updated when a value differs (None equal to None: IS DISTINCT FROM)."""
    by_key: dict[Any, list[tuple[Any, ...]]] = {}
    for row in old:
        if row[0] is not None:
            by_key.setdefault(row[0], []).append(row[1:])
    inserted = updated = 0
    matched: set[Any] = set()
    for row in new:
        olds = by_key.get(row[0]) if row[0] is not None else None
        if not olds:
            inserted += 1
            continue
        matched.add(row[0])
        updated += sum(1 for values in olds if values != row[1:])
    deleted = sum(1 for row in old if row[0] is None or row[0] not in matched)
    return inserted, updated, deleted


# core.settings' columns before its refresh_id, in order (history.settings' after snapshot_at)
_SETTINGS = ("timezone", "currency", "locale", "week_start")
