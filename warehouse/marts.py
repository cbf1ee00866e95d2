"""Reads for the marts and reconciliation, and their writes (`marts.*`, `recon.*`).

Frames cross this boundary: the warehouse reads `core`, `history`, `server` and `raw` into
Polars frames for `transform`, and writes what comes back, each write in one transaction.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from centsync.warehouse.common import write_metas
from centsync.warehouse.frames import frame as query_frame
from centsync.warehouse.frames import register
from centsync.warehouse.instances import release
from centsync.warehouse.reads import transaction_count

MART_TABLES = (
    "spending_by_month_category",
    "spending_by_month_merchant",
    "cash_flow_by_month",
    "transactions_by_month_type",
    "balance_daily",
    "net_worth_daily",
    "net_worth_snapshots",
)


def _first(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    """The first row, reading the result to its end (DuckDB 2 refuses new work otherwise)."""
    rows = con.execute(sql, params).fetchall()
    return rows[0] if rows else None


_COLUMNS = """account_id::VARCHAR AS account_id, concept, amount, booked_at,
    type, category_id::VARCHAR AS category_id"""
_LEDGER = f"SELECT {_COLUMNS} FROM core.transactions"
# the Parquet copy (`transactions_scan`): the analysts' marts read the id and Expense from it too
_WIDE = (
    f"SELECT {_COLUMNS}, id::VARCHAR AS id, expense_goal_id::VARCHAR AS expense_goal_id "
    "FROM core.transactions"
)


def transactions(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """core.transactions with the columns the marts and the checks need (ids as text).

    Not the transaction's own id: nothing in the marts or the checks groups by it (the row
    differences are found in SQL), and as text it was 52 MB of the frame at 1,000,000 rows.
    """
    return query_frame(con, _LEDGER)


# A ledger of more rows than this is scanned from a Parquet copy, not read whole (`ledger`).
# At 1,000,000 rows the scan's marts and checks peaked 120 MB lower for 0.2 CPU-s more; at
# 200,000 the frame was both leaner (25 MB) and cheaper (0.06 CPU-s) (docs/benchmarks.md).
SCAN_ROWS = 500_000


def ledger(con: duckdb.DuckDBPyConnection, folder: Path) -> pl.DataFrame | pl.LazyFrame:
    """The ledger the marts and the checks run on: a household's as a frame (`transactions`),
    one of more than SCAN_ROWS rows as a scan of its Parquet copy in `folder`."""
    small = transaction_count(con) <= SCAN_ROWS
    return transactions(con) if small else transactions_scan(con, folder)


def transactions_scan(con: duckdb.DuckDBPyConnection, folder: Path) -> pl.LazyFrame:
    """What `transactions` returns, as a lazy scan: DuckDB writes it to a Parquet file in
    `folder` (streamed, within its memory limit) and Polars scans it, so a plan run on the
    streaming engine holds a few row groups, not the ledger (about 280 MB less at 1,000,000
    rows than the frame and the plans over it). The caller removes `folder`.

    The copy also holds the transaction's id and its Expense (`analyst_scan`), so the
    analysts' marts read the same copy instead of the ledger whole; a scan reads only the
    columns a plan uses."""
    threads = _one_thread(con)
    try:
        _write_copy(con, folder / SCAN_FILE)
    finally:
        _threads_back(con, threads)
    return pl.scan_parquet(folder / SCAN_FILE).select(LEDGER_COLUMNS)


def _one_thread(con: duckdb.DuckDBPyConnection) -> int:
    """The copy runs on one thread: at 1,000,000 rows 0.4 CPU-s and +95 MB against 0.7 and
    +160 on two, for about the same wall time (docs/benchmarks.md). DuckDB's threads are the
    instance's, so this sets them for every connection; returns the number to set back."""
    (threads,) = con.execute("SELECT current_setting('threads')").fetchall()[0]
    con.execute("SET threads = 1")
    return int(threads)


def _threads_back(con: duckdb.DuckDBPyConnection, threads: int) -> None:
    con.execute(f"SET threads = {threads}")
    release(con)  # the ledger's blocks DuckDB cached to write it: not read again


def _write_copy(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    # uncompressed, as the file lives for one reconciliation: 0.25 against 0.33 CPU-s (snappy,
    # DuckDB's default) for 50 MB against 41 (docs/benchmarks.md)
    quoted = str(path).replace("'", "''")
    con.execute(
        f"COPY ({_WIDE}) TO '{quoted}' "
        "(FORMAT parquet, ROW_GROUP_SIZE 65536, COMPRESSION uncompressed)"
    )


class LedgerCopy:
    """The ledger's copy `transactions_scan` makes, made on a thread of its own from the moment
    the ledger is final, while the refresh asks the service for its accounts and aggregates and
    lands them (`ledger_copy`). At 1,000,000 rows the copy takes 0.6-0.85 s of one core, and
    those steps 0.6-0.9 s, a third of it waiting on the service (docs/benchmarks.md). On every
    DuckDB thread the copy took the cores the service's answers needed: one thread it is.

    The copy reads through a cursor of its own, in a transaction that sees the ledger as it
    was when the copy started: what the refresh writes meanwhile (its snapshots, the service's
    aggregates) is in other tables. DuckDB runs on one thread until `scan` (`_one_thread`).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, folder: Path) -> None:
        self.folder = folder
        self._con = con
        self._cursor = con.cursor()
        # a cursor starts in the instance's default database: a working copy attached to a
        # thread's instance (instances.attach) is named, as the refresh's connection uses it
        (database,) = con.execute("SELECT current_database()").fetchall()[0]
        quoted = str(database).replace('"', '""')
        self._cursor.execute(f'USE "{quoted}"')
        self._threads = _one_thread(con)
        self._failed: BaseException | None = None
        self._ended = False
        self._thread = threading.Thread(target=self._copy, name="centsync-ledger-copy", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        try:
            _write_copy(self._cursor, self.folder / SCAN_FILE)
        except BaseException as exc:  # raised where it is waited for (`scan`)
            self._failed = exc

    def scan(self) -> pl.LazyFrame:
        """What `transactions_scan` returns, once the copy is made (its failure raised here)."""
        self._end()
        if self._failed is not None:
            raise self._failed
        return pl.scan_parquet(self.folder / SCAN_FILE).select(LEDGER_COLUMNS)

    def _end(self, *, stop: bool = False) -> None:
        """Wait for the copy (stopped first with `stop`, on the way out of a failed refresh),
        then set DuckDB's threads back; once."""
        while stop and self._thread.is_alive():  # until its statement has begun and stopped
            self._cursor.interrupt()
            self._thread.join(timeout=0.05)
        self._thread.join()  # again after a join a signal interrupted
        if self._ended:
            return
        self._ended = True
        self._cursor.close()
        with contextlib.suppress(*((duckdb.Error,) if stop else ())):
            _threads_back(self._con, self._threads)


@contextlib.contextmanager
def ledger_copy(con: duckdb.DuckDBPyConnection) -> Iterator[LedgerCopy | None]:
    """A big ledger's copy (`LedgerCopy`) started now in a private temporary folder, removed
    when the block ends (the copy stopped first if it still runs); None for a ledger of at most
    SCAN_ROWS rows, which the marts read whole (`ledger`)."""
    if transaction_count(con) <= SCAN_ROWS:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="centsync-ledger-") as folder:
        copy = LedgerCopy(con, Path(folder))
        try:
            yield copy
        finally:
            copy._end(stop=True)


# the ledger copy's file in the scan's folder, and the columns `transactions` has
SCAN_FILE = "transactions.parquet"
LEDGER_COLUMNS = ("account_id", "concept", "amount", "booked_at", "type", "category_id")


def analyst_scan(folder: Path) -> pl.LazyFrame | None:
    """The ledger copy `transactions_scan` wrote in `folder` with the columns the analysts'
    marts read (warehouse/analyst_marts.py `ledger`); None when it wrote none (a household's
    ledger is read whole)."""
    path = folder / SCAN_FILE
    if not path.exists():
        return None
    columns = ("id", "account_id", "concept", "amount", "booked_at", "type", "expense_goal_id")
    return pl.scan_parquet(path).select(columns)


def accounts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """core.accounts: id, name, type, balance."""
    return query_frame(
        con, "SELECT id::VARCHAR AS id, name, type, balance FROM core.accounts ORDER BY id"
    )


def categories(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """core.categories: id, name (names learnt from spending labels)."""
    return query_frame(con, "SELECT id::VARCHAR AS id, name FROM core.categories")


def net_worth_history(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """history.net_worth, one row per refresh."""
    return query_frame(
        con,
        """
        SELECT refresh_id, snapshot_at, currency, assets, liabilities, net_worth, account_count
        FROM history.net_worth ORDER BY snapshot_at
        """,
    ).with_columns(pl.col("snapshot_at").dt.convert_time_zone("UTC"))


@dataclass(frozen=True)
class ServerAggregates:
    """What the service itself computed, as landed by one refresh (or fetched live)."""

    refresh_id: str
    accounts_summary: dict[str, int | None] | None
    by_type: pl.DataFrame  # type, balance
    net_worth: dict[str, int | None] | None
    spending_requests: pl.DataFrame  # group_by, from_date, to_date
    spending_rows: pl.DataFrame  # group_by, from_date, to_date, key, label, amount, count
    summaries: pl.DataFrame  # scope, from_date, to_date, count, income, expense, transfer, net
    today: dt.date | None  # the service's today (net worth's as_of in the settings timezone)


def latest_refresh(con: duckdb.DuckDBPyConnection) -> str | None:
    """The newest refresh that succeeded (None before the first)."""
    row = _first(
        con,
        "SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' "
        "ORDER BY started_at DESC LIMIT 1",
        [],
    )
    return None if row is None else str(row[0])


def _int(value: Any) -> int | None:
    """A figure of the service's answer (None: the answer does not give it)."""
    return None if value is None else int(value)


def server_aggregates(con: duckdb.DuckDBPyConnection, refresh_id: str) -> ServerAggregates:
    """The `server.*` rows one refresh landed."""
    acc = _first(
        con,
        "SELECT assets, liabilities, net_worth, count FROM server.accounts_summary WHERE refresh_id = ?",
        [refresh_id],
    )
    nw = _first(
        con,
        """
        SELECT n.assets, n.liabilities, n.total,
               CAST(timezone(coalesce(s.timezone, 'UTC'), n.as_of) AS DATE)
        FROM server.net_worth n LEFT JOIN history.settings s USING (refresh_id)
        WHERE n.refresh_id = ?
        """,
        [refresh_id],
    )
    return ServerAggregates(
        refresh_id=refresh_id,
        accounts_summary=None
        if acc is None
        else dict(
            zip(("assets", "liabilities", "net_worth", "count"), map(_int, acc), strict=True)
        ),
        by_type=query_frame(
            con,
            "SELECT type, balance FROM server.accounts_summary_by_type WHERE refresh_id = ?",
            [refresh_id],
        ),
        net_worth=None
        if nw is None
        else dict(zip(("assets", "liabilities", "total"), map(_int, nw[:3]), strict=True)),
        spending_requests=query_frame(
            con,
            """
            SELECT group_by, from_date, to_date FROM server.spending_totals
            WHERE refresh_id = ? ORDER BY fetched_at
            """,
            [refresh_id],
        ),
        spending_rows=query_frame(
            con,
            """
            SELECT group_by, from_date, to_date, key, label, amount, count FROM server.spending
            WHERE refresh_id = ?
            """,
            [refresh_id],
        ),
        summaries=query_frame(
            con,
            """
            SELECT scope, from_date, to_date, count, income, expense, transfer, net
            FROM server.transactions_summary WHERE refresh_id = ? ORDER BY fetched_at
            """,
            [refresh_id],
        ),
        today=None if nw is None or nw[3] is None else nw[3],
    )


# raw.transactions parsed once per row (from_json), about twice as fast as one ->> per field;
# the rows there passed validation, so the types hold (else the per-field TRY_CASTs below)
_RECEIVED_TX_FAST = """
    SELECT unnest(from_json(raw, '{"id": "UUID", "account_id": "UUID", "concept": "VARCHAR",
        "amount": "BIGINT", "booked_at": "DATE", "type": "VARCHAR", "category_id": "UUID"}'))
    FROM raw.transactions
"""
_RECEIVED_TX_SAFE = """
    SELECT TRY_CAST(raw->>'id' AS UUID) AS id, TRY_CAST(raw->>'account_id' AS UUID) AS account_id,
           raw->>'concept' AS concept, TRY_CAST(raw->>'amount' AS BIGINT) AS amount,
           TRY_CAST(raw->>'booked_at' AS DATE) AS booked_at, raw->>'type' AS type,
           TRY_CAST(raw->>'category_id' AS UUID) AS category_id
    FROM raw.transactions
"""


def differing_transactions(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The ledger rows whose local copy differs from what the service sent (raw.transactions).

    Compared in DuckDB in one pass (ids as UUIDs), so only the differing rows reach Python:
    (local side, received side), each in the columns of `transactions()`; a row only on one
    side appears in one frame.
    """
    local = "SELECT id, account_id, concept, amount, booked_at, type, category_id FROM core.transactions"
    fields = ("account_id", "concept", "amount", "booked_at", "type", "category_id")
    ids = ("account_id", "category_id")
    try:
        return _differing(con, local, _RECEIVED_TX_FAST, fields, ids=ids)
    except duckdb.Error:
        return _differing(con, local, _RECEIVED_TX_SAFE, fields, ids=ids)


def differing_accounts(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The accounts whose local copy differs from what the service sent (raw.accounts)."""
    return _differing(
        con,
        "SELECT id, name, type, balance FROM core.accounts",
        """
        SELECT TRY_CAST(raw->>'id' AS UUID) AS id, raw->>'name' AS name, raw->>'type' AS type,
               TRY_CAST(raw->>'balance' AS BIGINT) AS balance
        FROM raw.accounts
        """,
        ("name", "type", "balance"),
        ids=(),
    )


def _differing(
    con: duckdb.DuckDBPyConnection,
    local_sql: str,
    received_sql: str,
    fields: tuple[str, ...],
    *,
    ids: tuple[str, ...],
) -> tuple[pl.DataFrame, pl.DataFrame]:
    def out(side: str, f: str) -> str:
        return f"{side}.{f}::VARCHAR" if f in ("id", *ids) else f"{side}.{f}"

    differs = " OR ".join(f"l.{f} IS DISTINCT FROM r.{f}" for f in fields)
    both = query_frame(
        con,
        f"""
        WITH l AS ({local_sql}), r AS ({received_sql})
        SELECT {", ".join(f"{out('l', f)} AS l_{f}" for f in ("id", *fields))},
               {", ".join(f"{out('r', f)} AS r_{f}" for f in ("id", *fields))}
        FROM l FULL JOIN r ON l.id = r.id
        WHERE l.id IS NULL OR r.id IS NULL OR {differs}
        """,
    )

    def side(prefix: str) -> pl.DataFrame:
        cols = [pl.col(f"{prefix}_{f}").alias(f) for f in ("id", *fields)]
        return both.filter(pl.col(f"{prefix}_id").is_not_null()).select(cols)

    return side("l"), side("r")


def month_reads(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """When each month was last read from the service: {'YYYY-MM': 'refresh r at time'}."""
    rows = con.execute(
        """
        SELECT strftime(month, '%Y-%m'), read_refresh, read_at FROM ops.month_state
        WHERE read_at IS NOT NULL
        """
    ).fetchall()
    return {m: f"read by refresh {r} at {t:%Y-%m-%d %H:%M:%S %Z}" for m, r, t in rows}


def rejected_transactions(con: duckdb.DuckDBPyConnection, refresh_id: str) -> dict[str, int]:
    """Transactions validation rejected in one refresh, per month ('' when undated)."""
    rows = con.execute(
        """
        SELECT coalesce(strftime(try_cast(record->>'booked_at' AS DATE), '%Y-%m'), ''),
               count(DISTINCT coalesce(record->>'id', reason))
        FROM raw.rejected_rows WHERE entity = 'transactions' AND refresh_id = ? GROUP BY 1
        """,
        [refresh_id],
    ).fetchall()
    return {str(m): int(n) for m, n in rows}


def rejected_count(con: duckdb.DuckDBPyConnection, refresh_id: str) -> int:
    """Distinct rows validation rejected in one refresh (a row read twice counts once)."""
    ((n,),) = con.execute(
        """
        SELECT count(DISTINCT entity || ':' || coalesce(record->>'id', record->>'connection_id', reason))
        FROM raw.rejected_rows WHERE refresh_id = ?
        """,
        [refresh_id],
    ).fetchall()
    return int(n)


def explained_by_refresh(
    con: duckdb.DuckDBPyConnection, refresh_id: str
) -> dict[tuple[str, str], tuple[int, str]]:
    """What the refresh's own reconciliation explained: (check, scope) -> (difference, why)."""
    rows = con.execute(
        """
        SELECT r."check", r.scope, r.difference_cents, r.explanation
        FROM recon.results r JOIN recon.runs u USING (recon_id)
        WHERE u.refresh_id = ? AND u.source = 'refresh' AND r.status = 'explained'
        """,
        [refresh_id],
    ).fetchall()
    return {(c, s): (int(d), str(e)) for c, s, d, e in rows}


def narrowed_by_refresh(con: duckdb.DuckDBPyConnection, refresh_id: str) -> pl.DataFrame:
    """The months the refresh's own reconciliation placed differing categories and merchants
    in, with the service's spending it asked there: what an offline run replays."""
    return pl.DataFrame(
        con.execute(
            """
            SELECT r."check", r.subject, r.label, r.from_date, r.server_cents, r.server_count
            FROM recon.results r JOIN recon.runs u USING (recon_id)
            WHERE u.refresh_id = ? AND u.source = 'refresh'
              AND r."check" IN ('spending.category', 'spending.merchant')
              AND r.from_date = date_trunc('month', r.to_date) AND r.to_date = last_day(r.from_date)
              AND r.server_cents IS NOT NULL
            QUALIFY u.ran_at = max(u.ran_at) OVER ()
            ORDER BY r.from_date, r."check", r.label
            """,
            [refresh_id],
        ).fetchall(),
        schema={
            "check": pl.String,
            "subject": pl.String,
            "label": pl.String,
            "from_date": pl.Date,
            "server_cents": pl.Int64,
            "server_count": pl.Int64,
        },
        orient="row",
    )


def replace_marts(
    con: duckdb.DuckDBPyConnection, frames: Mapping[str, pl.DataFrame]
) -> dict[str, int]:
    """Replace every mart with its new rows, all in one transaction; returns rows per mart
    (a monthly mart's frame carries its `partial` column, migration 012)."""
    return replace_tables(con, frames, MART_TABLES, "marts")


def replace_tables(
    con: duckdb.DuckDBPyConnection,
    frames: Mapping[str, pl.DataFrame],
    tables: Sequence[str],
    what: str,
    *,
    meta: Mapping[str, str | None] | None = None,
) -> dict[str, int]:
    """Replace each of `tables` in the marts schema with its frame's rows, all in one
    transaction with the ops.meta keys in `meta` (`what` names them in the error when one is
    missing); rows per table."""
    missing = set(tables) - set(frames)
    if missing:
        raise ValueError(f"{what} missing from the rebuild: {sorted(missing)}")
    con.begin()
    try:
        for name in tables:
            frame = frames[name]
            register(con, "_mart", frame)  # replaces the last table's frame
            cols = ", ".join(f'"{c}"' for c in frame.columns)
            con.execute(f"DELETE FROM marts.{name}")
            con.execute(f"INSERT INTO marts.{name} ({cols}) SELECT {cols} FROM _mart")
        write_metas(con, meta or {})
        con.commit()
    except BaseException:
        con.rollback()
        raise
    finally:
        with contextlib.suppress(duckdb.Error):
            con.unregister("_mart")
    return {name: frames[name].height for name in tables}


def write_reconciliation(
    con: duckdb.DuckDBPyConnection,
    run: Mapping[str, Any],
    results: pl.DataFrame,
    row_differences: pl.DataFrame,
) -> None:
    """Append one reconciliation (its run, results and row differences) in one transaction."""
    recon_id = run["recon_id"]
    con.begin()
    try:
        con.execute(
            """
            INSERT INTO recon.runs (recon_id, refresh_id, ran_at, source, verdict, checked, agree,
                                    explained, differ, seconds)
            VALUES (?, ?, now(), ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                recon_id,
                run["refresh_id"],
                run["source"],
                run["verdict"],
                results.height,
                results.filter(pl.col("status") == "agree").height,
                results.filter(pl.col("status") == "explained").height,
                results.filter(pl.col("status") == "differ").height,
                run.get("seconds"),
            ],
        )
        res = results.with_columns(recon_id=pl.lit(recon_id), refresh_id=pl.lit(run["refresh_id"]))
        register(con, "_results", res)
        register(con, "_rows", row_differences.with_columns(recon_id=pl.lit(recon_id)))
        try:
            cols = ", ".join(f'"{c}"' for c in res.columns)
            con.execute(f"INSERT INTO recon.results ({cols}) SELECT {cols} FROM _results")
            rcols = ", ".join(f'"{c}"' for c in row_differences.columns) + ", recon_id"
            con.execute(f"INSERT INTO recon.row_differences ({rcols}) SELECT {rcols} FROM _rows")
        finally:
            con.unregister("_results")
            con.unregister("_rows")
        con.commit()
    except BaseException:
        con.rollback()
        raise
