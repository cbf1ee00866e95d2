"""Reads and writes of the analysts' own marts (transform/analyst_marts.py) and the renames.

The ledger is read with the columns these marts need beyond the service's marts' read
(`warehouse/marts.py` `transactions` leaves out the ids): the transaction's id and its Expense.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import duckdb
import orjson
import polars as pl

from centsync.warehouse import marts, reads
from centsync.warehouse.frames import frame as query_frame

# ops.meta: the digest of the inputs the analysts' marts were last built from
# (pipelines/mart_build.py `rebuild_analyst_marts`), written with their rows
BUILT_FROM = "analyst_marts.built_from"

ANALYST_TABLES = (
    "merchant_names",
    "recurring_series",
    "recurring_transactions",
    "transfer_pairs",
    "unpaired_transfers",
    "expense_goals_by_month",
)


def ledger(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """core.transactions with ids as text: id, account_id, concept, amount, booked_at, type,
    expense_goal_id."""
    return query_frame(
        con,
        """
        SELECT id::VARCHAR AS id, account_id::VARCHAR AS account_id, concept, amount, booked_at,
               type, expense_goal_id::VARCHAR AS expense_goal_id
        FROM core.transactions
        """,
    )


def accounts(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
    """core.accounts: id, name, type."""
    return query_frame(con, "SELECT id::VARCHAR AS id, name, type FROM core.accounts ORDER BY id")


def renames_path(warehouse: Path) -> Path:
    """The merchant renames beside a warehouse (or one of its working copies):
    `centsync.duckdb` -> `centsync.merchant-names.json`."""
    stem = warehouse.name.split(".duckdb", 1)[0]
    return warehouse.with_name(f"{stem}.merchant-names.json")


def _database_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    rows = con.execute(
        "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return Path(rows[0][0]) if rows and rows[0][0] else None


def renames(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The person's merchant renames (the rules file's [merchants], as `centsync rules` kept
    them beside the warehouse); none for an in-memory database or before any."""
    db = _database_file(con)
    path = None if db is None else renames_path(db)
    if path is None or not path.exists():
        return {}
    got = orjson.loads(path.read_bytes())
    return {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}


def save_renames(warehouse: Path, names: Mapping[str, str]) -> Path:
    """Keep the renames beside the warehouse (replaced whole: the rules file is the list)."""
    path = renames_path(warehouse)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(dict(sorted(names.items())), option=orjson.OPT_INDENT_2))
    tmp.replace(path)
    return path


def replace(
    con: duckdb.DuckDBPyConnection, frames: Mapping[str, pl.DataFrame], built_from: str | None
) -> dict[str, int]:
    """Replace every analyst mart with its new rows, and what they were built from
    (`BUILT_FROM`), in one transaction (marts.replace_tables)."""
    meta = {BUILT_FROM: built_from}
    return marts.replace_tables(con, frames, ANALYST_TABLES, "analyst marts", meta=meta)


def built_from(con: duckdb.DuckDBPyConnection) -> str | None:
    """The digest the analysts' marts were last built from (None: never, or not recorded)."""
    return reads.meta_values(con, [BUILT_FROM]).get(BUILT_FROM)


def input_marks(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What the analysts' marts read of the warehouse, marked in one statement: the ledger's
    columns they read and the accounts' (a count and two sums of differently mixed row
    hashes, in any order), and the schema's version."""
    ledger = "id, account_id, concept, amount, booked_at, type, expense_goal_id"
    row = con.execute(
        f"""
        SELECT
          (SELECT count(*) || ':' || coalesce(sum(hash({ledger})), 0) || ':'
                  || coalesce(sum(hash({ledger}, 'b')), 0) FROM core.transactions),
          (SELECT count(*) || ':' || coalesce(sum(hash(id, name, type)), 0) || ':'
                  || coalesce(sum(hash(id, name, type, 'b')), 0) FROM core.accounts),
          (SELECT coalesce(max(version), 0)::VARCHAR FROM ops.schema_version)
        """
    ).fetchall()[0]
    return [str(v) for v in row]
