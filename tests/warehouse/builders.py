"""Synthetic frames shaped like the extract client's, for warehouse tests."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from typing import Any

import duckdb
import orjson
import polars as pl

from centsync.warehouse.migrate import available

TYPES = ("expense", "income", "transfer")


def uid(rng: random.Random) -> str:
    """A uuid drawn from a seeded generator, so tests are repeatable."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def transactions(
    n: int,
    *,
    months: list[str] | None = None,
    seed: int = 1,
    categories: int = 4,
) -> pl.DataFrame:
    """A valid transactions frame of n rows spread over the given months ('YYYY-MM')."""
    rng = random.Random(seed)
    months = months or ["2024-01"]
    cats = [uid(rng) for _ in range(categories)]
    rows = []
    for _ in range(n):
        month = dt.date.fromisoformat(rng.choice(months) + "-01")
        booked = month + dt.timedelta(days=rng.randrange(28))
        kind = rng.choice(TYPES)
        amount = rng.randrange(1, 50_000) * (-1 if kind == "expense" and rng.random() < 0.9 else 1)
        created = dt.datetime(booked.year, booked.month, booked.day, 12, tzinfo=dt.UTC)
        row = {
            "id": uid(rng),
            "account_id": uid(rng),
            "concept": rng.choice(["Mercadona", "Rent", "Salary", "Amazon  EU", "Café"]),
            "amount": amount,
            "booked_at": booked,
            "type": kind,
            "category_id": rng.choice([*cats, None]),
            "expense_goal_id": None,
            "created_at": created,
            "updated_at": created,
        }
        rows.append(row)
    frame = pl.DataFrame(
        rows,
        schema={
            "id": pl.String,
            "account_id": pl.String,
            "concept": pl.String,
            "amount": pl.Int64,
            "booked_at": pl.Date,
            "type": pl.String,
            "category_id": pl.String,
            "expense_goal_id": pl.String,
            "created_at": pl.Datetime("ms", "UTC"),
            "updated_at": pl.Datetime("ms", "UTC"),
        },
    )
    return with_raw(frame)


def with_raw(frame: pl.DataFrame) -> pl.DataFrame:
    """Add the raw JSON column as the client would (the record as sent, plus an unknown field)."""
    raws = [
        orjson.dumps({**r, "unknown_field": "kept"}, default=str).decode()
        for r in frame.drop("raw", strict=False).iter_rows(named=True)
    ]
    return frame.drop("raw", strict=False).with_columns(pl.Series("raw", raws, dtype=pl.String))


def accounts(n: int = 3, *, seed: int = 7, balances: list[int] | None = None) -> pl.DataFrame:
    """A valid accounts frame."""
    rng = random.Random(seed)
    balances = balances or [rng.randrange(-500_000, 5_000_000) for _ in range(n)]
    frame = pl.DataFrame(
        {
            "id": [uid(rng) for _ in range(n)],
            "name": [f"Account {i}" for i in range(n)],
            "type": [["depository", "credit", "investment"][i % 3] for i in range(n)],
            "subtype": [None if i % 2 else "checking" for i in range(n)],
            "currency": ["EUR"] * n,
            "balance": balances,
            "connection_id": [uid(rng) for _ in range(n)],
            "institution": ["Bank"] * n,
            "updated_at": [dt.datetime(2024, 1, 1, tzinfo=dt.UTC)] * n,
        },
        schema_overrides={
            "updated_at": pl.Datetime("ms", "UTC"),
            "subtype": pl.String,
            "balance": pl.Int64,
        },
    )
    return with_raw(frame)


def at_version(con: duckdb.DuckDBPyConnection, version: int) -> None:
    """A warehouse as migration `version` left it (the versions table as migrate() creates it)."""
    con.execute("CREATE SCHEMA ops")
    con.execute(
        "CREATE TABLE ops.schema_version (version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
        " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    for migration in available()[:version]:
        con.execute(migration.sql)
        con.execute(
            "INSERT INTO ops.schema_version (version, name) VALUES (?, ?)",
            [migration.version, migration.name],
        )


CATALOG = {
    "schemas": "SELECT schema_name, comment FROM duckdb_schemas() WHERE NOT internal",
    "tables": "SELECT schema_name, table_name, comment FROM duckdb_tables()",
    "columns": "SELECT schema_name, table_name, column_name, data_type, "
    "column_default, is_nullable, comment FROM duckdb_columns()",
    "constraints": "SELECT schema_name, table_name, constraint_type, "
    "constraint_text FROM duckdb_constraints()",
    "views": "SELECT schema_name, view_name, sql FROM duckdb_views() WHERE NOT internal",
    "indexes": "SELECT schema_name, index_name, sql FROM duckdb_indexes()",
    "sequences": "SELECT schema_name, sequence_name FROM duckdb_sequences()",
}


def catalog(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Every schema, table, column (type, default, comment), constraint, view, index and
    sequence of the database `con` is on, each list sorted."""
    return {k: sorted(con.execute(q).fetchall(), key=repr) for k, q in CATALOG.items()}
