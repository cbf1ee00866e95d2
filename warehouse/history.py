"""Every version of every transaction: what each refresh changed, as validity intervals (SCD2).

`record` runs inside a month replace's transaction (warehouse/ledger.py, once the replace knows
which rows changed and before it rewrites them): it writes the version a changed row had, if it
was never written, closes it, and writes the new one (added, changed with the fields that
changed, deleted, came back). A row never changed is not written: its only version is its core
row (history.transaction_timeline shows it as first seen), so a first sync costs nothing here.
`attribute` marks, after the refresh confirmed the write-back's rows, the versions that were
ours. The readers give the ledger as of a refresh or a moment, and the changes since one.

Migration 011 holds the tables, the timeline view and the as-of macros. Knows SQL, never HTTP.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl

from centsync.warehouse.frames import frame as query_frame

# a version's values: core.transactions' columns after id, before refresh_id
VALUES = (
    "account_id",
    "concept",
    "amount",
    "booked_at",
    "month",
    "type",
    "category_id",
    "expense_goal_id",
    "created_at",
    "updated_at",
)
# the fields a changed version names (those a diff compares; month follows booked_at)
COMPARED = tuple(v for v in VALUES if v != "month")
KINDS = ("first seen", "added", "changed", "deleted", "came back")
ORIGINS = ("service", "write-back", "rule")
_VALS = ", ".join(VALUES)


def _values(alias: str) -> str:
    return ", ".join(f"{alias}.{v}" for v in VALUES)


def note_clock(
    con: duckdb.DuckDBPyConnection, refresh_id: str | None, seen_at: dt.datetime | None
) -> None:
    """Record the service's clock at a refresh (what its versions are valid from)."""
    if refresh_id:
        con.execute(
            "INSERT OR REPLACE INTO history.refresh_clock "
            "VALUES (?, coalesce(?::TIMESTAMPTZ, now()))",
            [refresh_id, seen_at],
        )


def record(
    con: duckdb.DuckDBPyConnection,
    refresh_id: str,
    seen_at: dt.datetime | None,
    *,
    changed: int,
    clock_noted: bool = False,
) -> int:
    """Write the versions a month replace is about to change; returns the changes recorded.

    Inside the replace's transaction, after `_changed_tx` (id, added, gone, in_core, updated)
    and the `_new_tx` view (the rows as sent, typed) exist and before core.transactions is
    rewritten (its rows are the versions being replaced). `seen_at`: the service's clock.
    `changed`: the rows in `_changed_tx` (the replace has counted them); `clock_noted`: the
    refresh's clock is already in history.refresh_clock (`Session.note_service_clock` with this
    `seen_at`), so it is not written again (a statement each: issue 46).
    """
    if not changed:
        return 0  # a month read unchanged: nothing to keep
    if not clock_noted:
        note_clock(con, refresh_id, seen_at)
    differs = ", ".join(f"CASE WHEN n.{f} IS DISTINCT FROM o.{f} THEN '{f}' END" for f in COMPARED)
    # CREATE ... AS answers the rows it wrote: no count(*) of its own
    count = con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE _hist_events AS
        FROM (
        SELECT c.id,
               CASE WHEN c.gone THEN 'deleted'
                    WHEN c.in_core THEN 'changed'
                    WHEN EXISTS (SELECT 1 FROM history.transaction_versions v
                                 WHERE v.id = c.id AND v.kind = 'deleted'
                                   AND v.valid_to_refresh IS NULL) THEN 'came back'
                    ELSE 'added' END AS kind,
               CASE WHEN c.in_core AND NOT c.gone THEN
                   coalesce(nullif(list_filter([{differs}], lambda x: x IS NOT NULL), []),
                            ['payload']) END AS changed_fields,
               n.month IN (SELECT month FROM ops.month_state) AS month_read
        FROM _changed_tx c
        LEFT JOIN _new_tx n ON n.id = c.id
        LEFT JOIN core.transactions o ON o.id = c.id
        WHERE c.in_core OR NOT c.gone
        )
        -- a row new in a month never read before is first seen: its core row says it all
        WHERE kind <> 'added' OR month_read
        """
    ).fetchall()[0][0]
    if count:
        _write_versions(con, refresh_id)
    con.execute("DROP TABLE _hist_events")
    return int(count)


def _write_versions(con: duckdb.DuckDBPyConnection, refresh_id: str) -> None:
    """Close the replaced versions and write the new ones, in two statements (each refresh's
    connection is new, and a statement's first run is most of its cost)."""
    seen = "(SELECT seen_at FROM history.refresh_clock WHERE refresh_id = $rid)"
    # when the refresh that wrote a core row read: its clock, else its start
    when = "coalesce(c.seen_at, r.started_at, now())"
    stale = "(s.refresh_id IS NOT NULL AND v.valid_from_refresh <> s.refresh_id)"
    # the open versions of the rows changed end here; one left open though core moved on
    # without history (a writer that bypassed it) ends where the core row's version begins
    con.execute(
        f"""
        UPDATE history.transaction_versions v
        SET valid_to_refresh = CASE WHEN {stale} THEN s.refresh_id ELSE $rid END,
            valid_to = CASE WHEN {stale} THEN s.seen ELSE {seen} END
        FROM _hist_events e
        LEFT JOIN (
            SELECT o.id, o.refresh_id, {when} AS seen FROM core.transactions o
            LEFT JOIN history.refresh_clock c ON c.refresh_id = o.refresh_id
            LEFT JOIN ops.refreshes r ON r.refresh_id = o.refresh_id
            WHERE o.id IN (SELECT id FROM _hist_events)
        ) s ON s.id = e.id AND s.refresh_id <> $rid
        WHERE v.id = e.id AND v.valid_to_refresh IS NULL
        """,
        {"rid": refresh_id},
    )
    con.execute(
        f"""
        INSERT INTO history.transaction_versions
        -- the version being replaced, if never written: its core row, valid since then
        SELECT o.id, o.refresh_id, $rid, {when}, {seen},
               CASE WHEN EXISTS (SELECT 1 FROM history.transaction_versions v WHERE v.id = o.id)
                    THEN 'came back' ELSE 'first seen' END,
               NULL, 'service', {_values("o")}
        FROM core.transactions o JOIN _hist_events USING (id)
        LEFT JOIN history.refresh_clock c ON c.refresh_id = o.refresh_id
        LEFT JOIN ops.refreshes r ON r.refresh_id = o.refresh_id
        WHERE NOT EXISTS (SELECT 1 FROM history.transaction_versions v
                          WHERE v.id = o.id AND v.valid_from_refresh = o.refresh_id)
        UNION ALL
        -- the new versions: the rows as sent, or, deleted, as they were
        SELECT e.id, $rid, NULL, {seen}, NULL, e.kind, e.changed_fields, 'service', {_values("n")}
        FROM _hist_events e JOIN _new_tx n ON n.id = e.id WHERE e.kind <> 'deleted'
        UNION ALL
        SELECT e.id, $rid, NULL, {seen}, NULL, e.kind, NULL, 'service', {_values("o")}
        FROM _hist_events e JOIN core.transactions o ON o.id = e.id WHERE e.kind = 'deleted'
        """,
        {"rid": refresh_id},
    )


def attribute(con: duckdb.DuckDBPyConnection, refresh_id: str) -> int:
    """Mark as ours the versions this refresh saw that our write-back made: a row ops.outbox
    says this refresh confirmed (a create, an edit, an assignment; 'rule' when a rules file
    asked for it). Call after the outbox is copied in. Returns the versions marked."""
    row = con.execute(
        """
        WITH ours AS (
            SELECT coalesce(server_id, transaction_id) AS id,
                   CASE WHEN bool_or(source = 'rules') THEN 'rule' ELSE 'write-back' END AS origin
            FROM ops.outbox WHERE confirmed_by = $rid GROUP BY 1
        )
        UPDATE history.transaction_versions v SET origin = ours.origin FROM ours
        WHERE v.id = ours.id AND v.valid_from_refresh = $rid AND v.kind <> 'deleted'
        RETURNING 1
        """,
        {"rid": refresh_id},
    ).fetchall()
    return len(row)


# -- reading ---------------------------------------------------------------------------------


def kept(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether this warehouse keeps history (a read-only one last written before 011 does not)."""
    return bool(
        con.execute(
            "SELECT count(*) FROM duckdb_tables() "
            "WHERE schema_name = 'history' AND table_name = 'transaction_versions'"
        ).fetchall()[0][0]
    )


def table_macros(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str]]:
    """The history's table macros: (name with its parameters, comment), for the dictionary."""
    rows = con.execute(
        "SELECT DISTINCT schema_name || '.' || function_name, array_to_string(parameters, ', '), "
        "coalesce(comment, '') FROM duckdb_functions() WHERE function_type = 'table_macro' "
        "AND schema_name = 'history' ORDER BY 1"
    ).fetchall()
    return [(f"{name}({params})", comment, "") for name, params, comment in rows]


def latest_refresh_no(con: duckdb.DuckDBPyConnection) -> int:
    """The number of the last refresh (0 when none)."""
    return int(
        con.execute("SELECT coalesce(max(refresh_no), 0) FROM history.refreshes").fetchall()[0][0]
    )


def before_last_no(con: duckdb.DuckDBPyConnection) -> int:
    """The number of the refresh before the last that landed (succeeded or interrupted: a
    failed one published nothing), so that changes after it are the last one's (0: none)."""
    got = con.execute(
        "SELECT refresh_no FROM history.refreshes WHERE status <> 'failed' "
        "ORDER BY refresh_no DESC LIMIT 2"
    ).fetchall()
    return int(got[1][0]) if len(got) == 2 else 0


def refresh_no_at(con: duckdb.DuckDBPyConnection, at: dt.datetime | dt.date) -> int:
    """The number of the last refresh whose versions were seen at or before `at` (0: none)."""
    row = con.execute(
        "SELECT coalesce(max(refresh_no), 0) FROM history.refreshes WHERE seen_at <= ?::TIMESTAMPTZ",
        [at],
    ).fetchall()
    return int(row[0][0])


def ledger_as_of(con: duckdb.DuckDBPyConnection, refresh_no: int) -> pl.DataFrame:
    """The ledger as it stood after refresh number `refresh_no`, as marts' inputs read it
    (warehouse/marts.py `transactions`: ids as text)."""
    return query_frame(
        con,
        """
        SELECT account_id::VARCHAR AS account_id, concept, amount, booked_at,
               type, category_id::VARCHAR AS category_id
        FROM history.ledger_as_of_refresh(?)
        """,
        [refresh_no],
    )


def refresh_seen(con: duckdb.DuckDBPyConnection, refresh_no: int) -> dt.datetime | None:
    """When refresh number `refresh_no` read (history.refreshes.seen_at); None: no such one."""
    got = con.execute(
        "SELECT seen_at FROM history.refreshes WHERE refresh_no = ?", [refresh_no]
    ).fetchall()
    return got[0][0] if got else None


def accounts_as_of(con: duckdb.DuckDBPyConnection, refresh_no: int) -> pl.DataFrame:
    """The accounts (id, name, type, balance) as the last snapshot up to refresh number
    `refresh_no` held them (history.accounts), as marts' inputs read core.accounts."""
    return query_frame(
        con,
        """
        WITH last AS (
            SELECT a.refresh_id FROM history.accounts a
            JOIN history.refreshes r USING (refresh_id) WHERE r.refresh_no <= ?
            ORDER BY r.refresh_no DESC LIMIT 1
        )
        SELECT id::VARCHAR AS id, name, type, balance FROM history.accounts
        WHERE refresh_id = (SELECT refresh_id FROM last) ORDER BY id
        """,
        [refresh_no],
    )


def net_worth_as_of(con: duckdb.DuckDBPyConnection, refresh_no: int) -> pl.DataFrame:
    """history.net_worth up to refresh number `refresh_no` (marts' net worth snapshots)."""
    return query_frame(
        con,
        """
        SELECT n.refresh_id, n.snapshot_at, n.currency, n.assets, n.liabilities, n.net_worth,
               n.account_count
        FROM history.net_worth n JOIN history.refreshes r USING (refresh_id)
        WHERE r.refresh_no <= ? ORDER BY n.snapshot_at
        """,
        [refresh_no],
    ).with_columns(pl.col("snapshot_at").dt.convert_time_zone("UTC"))


def changes_since(con: duckdb.DuckDBPyConnection, refresh_no: int) -> pl.DataFrame:
    """Every change refreshes after number `refresh_no` saw, oldest first: the version after
    (kind, fields, origin) beside the one before (b_*, NULL for a row added)."""
    before = ", ".join(f"b.{v} AS b_{v}" for v in VALUES)
    return query_frame(
        con,
        f"""
        SELECT a.id::VARCHAR AS id, a.valid_from_no AS refresh_no, a.valid_from AS seen_at,
               a.kind, a.changed_fields, a.origin,
               {", ".join(f"a.{v}" for v in VALUES)}, {before}
        FROM history.transaction_timeline a
        LEFT JOIN history.transaction_timeline b
               ON b.id = a.id AND b.valid_to_refresh = a.valid_from_refresh
        WHERE a.valid_from_no > ? AND a.kind IN ('added', 'changed', 'deleted', 'came back')
        ORDER BY a.valid_from_no, a.booked_at, a.id
        """,
        [refresh_no],
    ).with_columns(
        pl.col("account_id", "category_id", "b_account_id", "b_category_id").cast(pl.String)
    )


__all__ = [
    "COMPARED",
    "KINDS",
    "ORIGINS",
    "VALUES",
    "accounts_as_of",
    "attribute",
    "before_last_no",
    "changes_since",
    "kept",
    "latest_refresh_no",
    "ledger_as_of",
    "net_worth_as_of",
    "note_clock",
    "record",
    "refresh_no_at",
    "refresh_seen",
    "table_macros",
]
