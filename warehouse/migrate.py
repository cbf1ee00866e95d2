"""Numbered SQL migrations (`migrations/NNN_name.sql`), applied in order when a warehouse opens."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources

import duckdb

_NAME = re.compile(r"^(\d{3})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One migration file: its version number, name and SQL text."""

    version: int
    name: str
    sql: str


def available() -> list[Migration]:
    """Every migration shipped with the package, in version order."""
    folder = resources.files("centsync.warehouse").joinpath("migrations")
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), match.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if versions != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migration numbers must run 1..n without gaps, got {versions}")
    return found


def current_version(con: duckdb.DuckDBPyConnection) -> int:
    """The highest migration applied to this database (0 for a new one)."""
    # the version table itself, not the catalog: a first duckdb_tables() loads every table's
    # metadata (15 ms of a household's refresh), a missing table is one cheap error
    try:
        row = con.execute("SELECT coalesce(max(version), 0) FROM ops.schema_version").fetchall()
    except duckdb.CatalogException:
        return 0
    return int(row[0][0]) if row else 0


def migrate(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Apply every pending migration, each in its own transaction; return the versions applied."""
    applied: list[int] = []
    done = current_version(con)
    for m in available():
        if m.version <= done:
            continue
        con.begin()
        try:
            # The version table is created with the first migration so that both commit together.
            con.execute("CREATE SCHEMA IF NOT EXISTS ops")
            con.execute(
                "CREATE TABLE IF NOT EXISTS ops.schema_version ("
                " version INTEGER PRIMARY KEY, name VARCHAR NOT NULL,"
                " applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            con.execute(m.sql)
            con.execute(
                "INSERT INTO ops.schema_version (version, name) VALUES (?, ?)", [m.version, m.name]
            )
            con.commit()
        except BaseException:
            con.rollback()
            raise
        applied.append(m.version)
    return applied
