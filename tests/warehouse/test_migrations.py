"""Migrations: numbered SQL files shipped with the package, applied once, version recorded."""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path

import duckdb
import pytest

from centsync.warehouse import Warehouse, current_version, migrate, paths
from centsync.warehouse.instances import BLOCK_SIZE, NEW_FILE
from centsync.warehouse.migrate import available, new_file

from .builders import at_version, catalog

migrate_module = importlib.import_module("centsync.warehouse.migrate")


def test_migration_files_ship_with_the_package_numbered_from_one() -> None:
    found = available()
    assert found[0].version == 1
    assert found[0].name == "init"
    assert "CREATE TABLE core.transactions" in found[0].sql


def test_opening_a_new_file_creates_every_schema_and_records_the_version(db_path: Path) -> None:
    with Warehouse.open(db_path) as wh:
        assert wh.schema_version() == len(available())
        schemas = {
            r[0]
            for r in wh.con.execute(
                "SELECT schema_name FROM information_schema.schemata"
            ).fetchall()
        }
        assert {"raw", "core", "history", "server", "ops"} <= schemas
        tables = {
            f"{s}.{t}"
            for s, t in wh.con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables"
            ).fetchall()
        }
        for name in (
            "core.transactions",
            "core.accounts",
            "core.connections",
            "core.sync_status",
            "core.settings",
            "core.categories",
            "raw.transactions",
            "raw.rejected_rows",
            "history.accounts",
            "history.net_worth",
            "history.connections",
            "history.sync_status",
            "server.transactions_summary",
            "server.spending",
            "ops.refreshes",
            "ops.month_state",
            "ops.meta",
            "ops.schema_version",
        ):
            assert name in tables


def test_migrations_are_idempotent(db_path: Path) -> None:
    Warehouse.open(db_path).close()
    con = duckdb.connect(str(db_path))
    try:
        assert migrate(con) == []
        assert migrate(con) == []
        assert con.execute("SELECT count(*) FROM ops.schema_version").fetchone() == (
            len(available()),
        )
        assert current_version(con) == len(available())
    finally:
        con.close()


def test_money_columns_are_bigint_and_ids_uuid(db_path: Path) -> None:
    with Warehouse.open(db_path) as wh:
        types = dict(
            wh.con.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'core' AND table_name = 'transactions'"
            ).fetchall()
        )
    assert types["amount"] == "BIGINT"
    assert types["id"] == "UUID"
    assert types["booked_at"] == "DATE"
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE"


KERNEL = {"centsync.transform.calendar", "centsync.transform.contract", "centsync.transform.money"}


def test_the_warehouse_imports_no_http_layer() -> None:
    import ast

    import centsync.warehouse as pkg

    forbidden = (
        "centsync.sandbox",
        "centsync.extract",
        "centsync.transform",
        "centsync.pipelines",
        "httpx",
    )
    for path in Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                if name in KERNEL:
                    continue
                assert not name.startswith(forbidden), f"{path.name} imports {name}"


def test_006_drops_the_month_states_never_filled_server_columns(db_path: Path) -> None:
    con = duckdb.connect(str(db_path))
    try:
        # a warehouse as version 5 left it (the versions table as migrate() creates it)
        at_version(con, 5)
        con.execute(
            "INSERT INTO ops.month_state (month, read_refresh, read_at, read_reason, read_rows) "
            "VALUES ('2024-01-01', 'r1', now(), 'first sync', 12)"
        )
        applied = migrate(con)
        assert applied[0] == 6  # and any later ones
        columns = [
            r[0]
            for r in con.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = 'ops' AND table_name = 'month_state' ORDER BY ordinal_position"
            ).fetchall()
        ]
        assert columns == [
            "month",
            "read_refresh",
            "read_at",
            "read_reason",
            "read_rows",
            "read_timezone",
            "verified_at",
        ]
        assert con.execute("SELECT read_rows FROM ops.month_state").fetchall() == [(12,)]
    finally:
        con.close()


def test_the_data_dictionary_names_every_table_and_column(db_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "data-dictionary.md").read_text()
    with Warehouse.open(db_path) as wh:
        columns = wh.con.execute(
            "SELECT table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_schema IN ('raw', 'core', 'history', 'server', 'ops')"
        ).fetchall()
    missing_tables = {f"{s}.{t}" for s, t, _ in columns if f"{s}.{t}" not in doc}
    missing_columns = {f"{s}.{t}.{c}" for s, t, c in columns if f"`{c}`" not in doc}
    assert not missing_tables
    assert not missing_columns


def test_007_documents_every_mode_a_refresh_records(db_path: Path) -> None:
    con = duckdb.connect(str(db_path))
    try:
        migrate(con)
        (comment,) = con.execute(
            "SELECT comment FROM duckdb_columns() WHERE schema_name = 'ops' "
            "AND table_name = 'refreshes' AND column_name = 'mode'"
        ).fetchone()
        assert all(mode in comment for mode in ("full", "incremental", "hot", "months"))
    finally:
        con.close()


def _migrated_on_file(path: Path) -> duckdb.DuckDBPyConnection:
    """A file with every migration applied to it, one by one (as an old warehouse is upgraded)."""
    con = duckdb.connect(str(path), config=NEW_FILE)
    migrate(con)
    return con


def test_a_new_file_is_the_migrations_applied_and_dated_when_it_was_made(
    tmp_path: Path,
) -> None:
    migrated = _migrated_on_file(tmp_path / "migrated.duckdb")
    migrate_module._schema_bytes()  # the process's schema made before: its time is not the file's
    before = dt.datetime.now(dt.UTC)
    made = tmp_path / "made.duckdb"
    new_file(made)
    con = duckdb.connect(str(made))
    try:
        # every table, column (type, default, comment), constraint, view and sequence
        assert catalog(con) == catalog(migrated)
        assert len(catalog(con)["columns"]) > 300
        versions = "SELECT version, name FROM ops.schema_version ORDER BY version"
        assert con.execute(versions).fetchall() == migrated.execute(versions).fetchall()
        (oldest,) = con.execute("SELECT min(applied_at) FROM ops.schema_version").fetchone() or ()
        assert oldest >= before  # applied to this file now, not when the schema was first made
        (block,) = (
            con.execute(
                "SELECT block_size FROM pragma_database_size() WHERE database_name = current_database()"
            ).fetchone()
            or ()
        )
        assert block == BLOCK_SIZE  # published compact, as a file migrated in place
        assert migrate(con) == []  # nothing left to apply
        assert con.execute("SELECT count(*) FROM core.transactions").fetchone() == (0,)
    finally:
        con.close()
        migrated.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["made.duckdb", "migrated.duckdb"]


def test_a_new_file_stopped_while_made_leaves_nothing_at_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = tmp_path / "centsync.duckdb"

    def stopped(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(migrate_module.os, "replace", stopped)
    with pytest.raises(KeyboardInterrupt):
        new_file(made)
    assert list(tmp_path.iterdir()) == []
    # a part a killed process left is removed by the next refresh, as a half-written publish
    (tmp_path / "centsync.duckdb.new").write_bytes(b"half")
    assert paths.stale_temporaries(made) == [tmp_path / "centsync.duckdb.new"]


def test_a_refresh_and_an_open_of_a_new_warehouse_start_from_the_made_file(
    tmp_path: Path,
) -> None:
    """Both ways a warehouse comes to be give the schema a file migrated in place has."""
    migrated = _migrated_on_file(tmp_path / "migrated.duckdb")
    expected = catalog(migrated)
    migrated.close()
    with Warehouse.refreshing(tmp_path / "first" / "centsync.duckdb", mode="full") as wh:
        assert catalog(wh.con) == expected
    with Warehouse.open(tmp_path / "opened" / "centsync.duckdb") as wh:
        assert catalog(wh.con) == expected
        assert wh.schema_version() == len(available())


def test_the_schema_made_ahead_on_a_thread_is_the_one_a_new_file_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first sync's CLI makes the schema while it imports Dagster (`prepare_new_file`)."""
    import threading

    monkeypatch.setattr(migrate_module, "_schema_file", None)
    migrate_module.prepare_new_file()
    (thread,) = [t for t in threading.enumerate() if t.name == "centsync-schema"]
    thread.join(timeout=60)
    made = migrate_module._schema_file
    assert made is not None
    migrate_module.prepare_new_file()  # made already: nothing more started
    assert not [t for t in threading.enumerate() if t.name == "centsync-schema"]
    new_file(tmp_path / "centsync.duckdb")
    assert migrate_module._schema_file is made
    migrated = _migrated_on_file(tmp_path / "migrated.duckdb")
    con = duckdb.connect(str(tmp_path / "centsync.duckdb"))
    try:
        assert catalog(con) == catalog(migrated)
    finally:
        con.close()
        migrated.close()


def test_a_schema_that_failed_ahead_is_made_by_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    monkeypatch.setattr(migrate_module, "_schema_file", None)
    real = migrate_module.migrate
    calls: list[str] = []

    def fails_once(con: duckdb.DuckDBPyConnection) -> list[int]:
        calls.append(threading.current_thread().name)
        if len(calls) == 1:
            raise OSError("disk full")
        return real(con)

    monkeypatch.setattr(migrate_module, "migrate", fails_once)
    migrate_module.prepare_new_file()
    for t in [t for t in threading.enumerate() if t.name == "centsync-schema"]:
        t.join(timeout=60)
    assert migrate_module._schema_file is None  # the failure kept nothing
    new_file(tmp_path / "centsync.duckdb")
    assert calls == ["centsync-schema", threading.current_thread().name]
    with Warehouse.open(tmp_path / "centsync.duckdb") as wh:
        assert wh.schema_version() == len(available())
