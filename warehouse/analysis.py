"""The analysts' queries: the warehouse's catalogue with its comments, a query's result or a
relation copied to a file (Parquet with the comments as metadata, CSV, JSON), the rows of a
Beancount ledger. Read only: `centsync sql` and `centsync export` (pipelines/cli/sql.py,
pipelines/outputs/export.py, pipelines/outputs/beancount.py) never take the refresh's lock.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import polars as pl

from centsync.warehouse.frames import Scan
from centsync.warehouse.frames import frame as query_frame
from centsync.warehouse.reads import (
    _as_dicts,
    catalogue_columns,
    catalogue_relations,
    latest_successful_refresh,
    table_exists,
)

# DuckDB types Polars cannot take from Arrow (or not faithfully): shown as their text.
_TEXT_FOR_POLARS = frozenset({"interval", "union", "time with time zone"})
# UUIDs (and lists or structs of them) are written as text in files: Polars and most other
# tools read a Parquet UUID as raw bytes.
_UUID = re.compile(r"\bUUID\b", re.IGNORECASE)
FILE_FORMATS = {
    "csv": "FORMAT csv, HEADER",
    "json": "FORMAT json, ARRAY true",
    "parquet": "FORMAT parquet",
}


@dataclass(frozen=True)
class Column:
    """One column of a relation: its name, DuckDB type and comment."""

    name: str
    type: str
    comment: str | None


@dataclass(frozen=True)
class Relation:
    """A table or view an analyst exports: where it is, what it holds, its columns."""

    schema: str
    name: str
    kind: str  # "table" or "view"
    comment: str | None
    columns: tuple[Column, ...]

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}"


def _ident(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    """A quoted SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def text_type(duckdb_type: str) -> str:
    """The type a column of `duckdb_type` is written as in a file: UUIDs become VARCHAR."""
    return _UUID.sub("VARCHAR", duckdb_type)


def _uuid_as_text(name: str, duckdb_type: str) -> str:
    """A select-list item: the column, cast to text where it holds UUIDs."""
    written = text_type(duckdb_type)
    if written == duckdb_type:
        return _ident(name)
    return f"CAST({_ident(name)} AS {written}) AS {_ident(name)}"


def analyst_relations(con: duckdb.DuckDBPyConnection, schemas: Sequence[str]) -> list[Relation]:
    """Every table and view of `schemas` with its comment and columns, by schema order, name."""
    columns: dict[tuple[str, str], list[Column]] = {}
    for s, t, c, typ, comment in catalogue_columns(con):
        columns.setdefault((s, t), []).append(Column(c, typ, comment))
    found = [
        Relation(s, t, k, c, tuple(columns.get((s, t), [])))
        for s, t, k, c in catalogue_relations(con)
        if s in schemas
    ]
    return sorted(found, key=lambda r: (list(schemas).index(r.schema), r.name))


def latest_refresh_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """The refresh the published warehouse holds: the latest that succeeded (None: none yet)."""
    row = latest_successful_refresh(con) if table_exists(con, "ops.refreshes") else None
    return str(row["refresh_id"]) if row else None


def _copy(
    con: duckdb.DuckDBPyConnection, rel: duckdb.DuckDBPyRelation | Scan, path: str, opts: str
) -> int:
    """COPY a relation to a file; rows written. COPY takes no parameter inside its query, so
    the relation (bound with any) is copied from a temporary view, which read only allows."""
    con.register("centsync_copy", rel)
    try:
        return int(
            con.execute(f"COPY (FROM centsync_copy) TO {_literal(path)} ({opts})").fetchall()[0][0]
        )
    finally:
        con.unregister("centsync_copy")


def copy_relation(
    con: duckdb.DuckDBPyConnection,
    relation: Relation,
    path: str,
    fmt: str,
    *,
    where: tuple[str, Any] | None = None,
    metadata: dict[str, str] | None = None,
    reshape: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> int:
    """Write one table or view to a file (`fmt` of FILE_FORMATS), UUIDs as text, rows where
    `where` = (column, lowest value) says; Parquet key-value `metadata`; the rows passed
    through `reshape` first when given (names beside ids, say). Rows written."""
    select = ", ".join(_uuid_as_text(c.name, c.type) for c in relation.columns)
    sql = f"SELECT {select} FROM {_ident(relation.schema)}.{_ident(relation.name)}"
    if where is not None:
        sql += f" WHERE {_ident(where[0])} >= ?"
    options = FILE_FORMATS[fmt]
    if metadata and fmt == "parquet":
        pairs = ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in metadata.items())
        options += f", KV_METADATA {{{pairs}}}"
    rel = con.sql(sql, params=[where[1]] if where else None)
    source: duckdb.DuckDBPyRelation | Scan = rel
    if reshape is not None:
        source = Scan(reshape(pl.DataFrame(rel)))
    return _copy(con, source, path, options)


def id_names(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(account_id, account_name) of every account and (category_id, category_name) of every
    category the warehouse holds a name for, ids as text."""
    accounts = query_frame(
        con, "SELECT id::VARCHAR AS account_id, name AS account_name FROM core.accounts"
    )
    categories = query_frame(
        con, "SELECT id::VARCHAR AS category_id, name AS category_name FROM core.categories"
    )
    return accounts, categories


def _types(result: duckdb.DuckDBPyRelation) -> list[tuple[str, str]]:
    return [(n, str(t)) for n, t in zip(result.columns, result.types, strict=True)]


def result_frame(result: duckdb.DuckDBPyRelation) -> pl.DataFrame:
    """A query's result as a Polars frame; the types Polars cannot take become their text."""
    select = ", ".join(
        f"CAST({_ident(name)} AS VARCHAR) AS {_ident(name)}"
        if typ.lower() in _TEXT_FOR_POLARS or typ.lower().startswith("union")
        else _ident(name)
        for name, typ in _types(result)
    )
    return pl.DataFrame(result.project(select))


def copy_result(
    con: duckdb.DuckDBPyConnection, result: duckdb.DuckDBPyRelation, path: str, fmt: str
) -> int:
    """Write a query's result to a file (`fmt` of FILE_FORMATS), UUIDs as text; rows written."""
    select = ", ".join(_uuid_as_text(name, typ) for name, typ in _types(result))
    return _copy(con, result.project(select), path, FILE_FORMATS[fmt])


@dataclass(frozen=True)
class LedgerRows:
    """What a Beancount ledger is written from: the accounts now, their snapshots, the rows."""

    currency: str | None
    timezone: str | None
    accounts: pl.DataFrame  # id, name, type, currency, balance, institution
    # id, refresh_id, snapshot_at, local_date (the service's day), balance
    snapshots: pl.DataFrame
    # id, account_id, booked_at, amount, type, concept, category_id, category_name
    transactions: pl.DataFrame


def ledger_rows(con: duckdb.DuckDBPyConnection, since: dt.date | None) -> LedgerRows:
    """The accounts, their snapshots (each with the service's day it was taken on) and the
    transactions booked on or after `since` (all of them without it), by day and id."""
    settings = _as_dicts(
        con, "SELECT any_value(currency) AS c, any_value(timezone) AS tz FROM core.settings"
    )[0]
    tz = settings["tz"] or "UTC"
    accounts = query_frame(
        con,
        "SELECT id::VARCHAR AS id, name, type, currency, balance, institution "
        "FROM core.accounts ORDER BY type, name, id",
    )
    snapshots = query_frame(
        con,
        """
        SELECT id::VARCHAR AS id, refresh_id, snapshot_at,
               (timezone(?, snapshot_at))::DATE AS local_date, balance
        FROM history.accounts ORDER BY snapshot_at, id
        """,
        [tz],
    )
    transactions = query_frame(
        con,
        """
        SELECT t.id::VARCHAR AS id, t.account_id::VARCHAR AS account_id, t.booked_at, t.amount,
               t.type, t.concept, t.category_id::VARCHAR AS category_id,
               c.name AS category_name
        FROM core.transactions t LEFT JOIN core.categories c ON c.id = t.category_id
        WHERE t.booked_at >= coalesce(?::DATE, DATE '0001-01-01')
        ORDER BY t.booked_at, t.id
        """,
        [since],
    )
    return LedgerRows(settings["c"], settings["tz"], accounts, snapshots, transactions)
