"""Numbered SQL migrations (`migrations/NNN_name.sql`), applied in order when a warehouse opens;
a new warehouse file made at their head (`new_file`)."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb

from centsync.warehouse import paths
from centsync.warehouse.instances import NEW_FILE, copy_compact

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


# A new file's bytes: the migrations applied once a process (new_file)
_schema_file: bytes | None = None
_schema_lock = threading.Lock()


def _schema_bytes() -> bytes:
    """A warehouse file with every migration applied and nothing else, made once a process.

    The migrations run on an in-memory database, which the publish's compact copy
    (`instances.copy_compact`: every table, view, comment and constraint) writes to a file: about
    0.25 s, against 0.3-0.46 s for the migrations on a file (its 550 comments are a catalog
    change each, its 15 commits a WAL write each)."""
    global _schema_file
    with _schema_lock:
        if _schema_file is None:
            with tempfile.TemporaryDirectory(prefix="centsync-schema-") as folder:
                path = Path(folder) / "schema.duckdb"
                # one thread: DDL has nothing to share out (0.31 against 0.42-0.44 CPU-s on
                # DuckDB's default of a thread a core, whose idle workers cost the rest)
                con = duckdb.connect(":memory:", config={**NEW_FILE, "threads": "1"})
                try:
                    migrate(con)
                    copy_compact(con, "memory", path)
                finally:
                    con.close()
                _schema_file = path.read_bytes()
        return _schema_file


def prepare_new_file() -> None:
    """Start making the schema's bytes (`_schema_bytes`) on a thread of their own, for a
    process about to make a new warehouse while it does other work first (a first sync's CLI
    while it imports Dagster and starts its run): DuckDB runs the migrations outside the GIL,
    and `new_file` then waits for them, or makes them itself if this failed."""
    if _schema_file is None:
        threading.Thread(target=_prepared, name="centsync-schema").start()


def _prepared() -> None:
    with contextlib.suppress(Exception):  # new_file makes them again, and raises there
        _schema_bytes()


def new_file(path: Path) -> None:
    """Make a new warehouse file at `path`, at the head of the migrations: a copy of the
    migrated schema (`_schema_bytes`, about 0.2 MB) written under a temporary name and moved
    into place, so a stop leaves no half-made file; its versions are dated now, when they
    were applied to this file. About 30 ms after the first of a process."""
    part = path.with_name(path.name + ".new")
    try:
        part.write_bytes(_schema_bytes())
        con = duckdb.connect(str(part))
        try:
            con.execute("UPDATE ops.schema_version SET applied_at = now()")
        finally:
            con.close()
        os.replace(part, path)
    except BaseException:
        paths.remove(part)  # and its WAL
        raise
