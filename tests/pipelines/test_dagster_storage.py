"""The CLI's Dagster storage (pipelines/instance.py): Dagster's SQLite files, its
connections kept, and WAL files committed without waiting for an fsync."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from centsync.pipelines import instance as dagster_storage


def _synchronous(engine: object, sql: str = "PRAGMA synchronous") -> int:
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return int(conn.exec_driver_sql(sql).scalar())


def test_wal_files_commit_with_normal_sync_and_journal_files_keep_full(tmp_path: Path) -> None:
    wal, journal = tmp_path / "wal.db", tmp_path / "journal.db"
    sqlite3.connect(wal).execute("PRAGMA journal_mode=WAL").close()
    sqlite3.connect(journal).execute("CREATE TABLE t (x)").close()
    # SQLite's numbering: 1 = NORMAL, 2 = FULL (the default)
    assert _synchronous(dagster_storage._kept_engine(f"sqlite:///{wal}")) == 1
    assert _synchronous(dagster_storage._kept_engine(f"sqlite:///{journal}")) == 2


def test_a_refresh_run_is_recorded_in_dagsters_own_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs made through the kept-connection storage are read back by Dagster's own classes
    (what `centsync ui` and the daemon use), and each run's event file is in WAL mode."""
    import dagster as dg
    from dagster import DagsterInstance

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def one() -> int:
        return 1

    job = dg.define_asset_job("j", selection=[one])
    defs = dg.Definitions(assets=[one], jobs=[job])
    with dagster_storage.instance(home) as instance:
        result = defs.resolve_job_def("j").execute_in_process(instance=instance)
        assert result.success
        kept = type(instance.event_log_storage).__name__
    assert kept == "KeptConnectionsEventLogStorage"
    with DagsterInstance.get() as plain:
        assert type(plain.event_log_storage).__name__ == "SqliteEventLogStorage"
        records = plain.get_records_for_run(result.run_id).records
        success = dg.DagsterEventType.RUN_SUCCESS
        assert any(r.event_log_entry.dagster_event_type == success for r in records)
    run_db = home / "history" / "runs" / f"{result.run_id}.db"
    mode = sqlite3.connect(run_db).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_new_run_databases_start_from_an_empty_one_at_dagsters_head(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's event database is a copy of an empty one Dagster's own `_initdb` made: stamped
    at the head revision Dagster checks for, invisible to Dagster's listing of runs, and left
    alone when another process created the run's file first."""
    import dagster as dg
    from dagster import DagsterInstance
    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def one() -> int:
        return 1

    defs = dg.Definitions(assets=[one], jobs=[dg.define_asset_job("j", selection=[one])])
    run_ids = []
    for _ in range(2):
        with dagster_storage.instance(home) as instance:
            result = defs.resolve_job_def("j").execute_in_process(instance=instance)
            assert result.success
            run_ids.append(result.run_id)
    runs_dir = home / "history" / "runs"
    assert [p.name for p in runs_dir.glob(".empty-*.sqlite")] == [f".empty-{dg.__version__}.sqlite"]
    config = get_alembic_config(sqlite_event_log.__file__)
    with DagsterInstance.get() as plain:
        assert sorted(plain.event_log_storage.get_all_run_ids()) == sorted(run_ids)  # type: ignore[attr-defined]
        for run_id in run_ids:
            engine = dagster_storage.create_engine(f"sqlite:///{runs_dir / f'{run_id}.db'}")
            with engine.connect() as conn:
                db, head = check_alembic_revision(config, conn)
            engine.dispose()
            assert db == head and db is not None
            assert plain.get_run_by_id(run_id) is not None
            assert plain.get_records_for_run(run_id).records
    # a file another process made first is not replaced by the copy
    storage = dagster_storage.KeptConnectionsEventLogStorage(str(runs_dir))
    (runs_dir / "made-elsewhere.db").write_bytes(b"")
    assert not storage._start_from_empty(str(runs_dir / "made-elsewhere.db"))
    assert (runs_dir / "made-elsewhere.db").read_bytes() == b""
    assert storage._start_from_empty(str(runs_dir / "fresh.db"))
    assert not list(runs_dir.glob("*.tmp"))


def test_a_new_homes_index_database_is_a_copy_of_the_empty_one_as_dagster_makes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new Dagster home's index database starts as a copy of the empty event database (the
    same tables, indexes and revision as Dagster's own `_initdb` gives an index, made without
    alembic), Dagster's data migrations are marked in it as in Dagster's own, and Dagster's own
    storage opens it as it is."""
    import sqlite3

    from dagster._core.storage.event_log.sqlite import sqlite_event_log
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    stamped: list[str] = []
    stamp = sqlite_event_log.stamp_alembic_rev
    monkeypatch.setattr(
        sqlite_event_log,
        "stamp_alembic_rev",
        lambda config, conn, rev="head": (stamped.append(rev), stamp(config, conn, rev))[1],
    )
    ours_dir, theirs_dir = tmp_path / "ours", tmp_path / "theirs"
    dagster_storage.KeptConnectionsEventLogStorage(str(ours_dir)).dispose()
    assert stamped == []  # the empty database made without alembic, the index its copy
    sqlite_event_log.SqliteEventLogStorage(str(theirs_dir)).dispose()
    assert (ours_dir / f".empty-{dagster_storage.dagster_version}.sqlite").exists()

    def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
        con = sqlite3.connect(path)
        try:
            return sorted(con.execute(sql).fetchall())
        finally:
            con.close()

    schema = "SELECT type, name, sql FROM sqlite_master"
    marked = "SELECT name FROM secondary_indexes"
    ours, theirs = ours_dir / "index.db", theirs_dir / "index.db"
    assert rows(ours, schema) == rows(theirs, schema)
    assert rows(ours, marked) == rows(theirs, marked) != []
    engine = dagster_storage.create_engine(f"sqlite:///{ours}")
    with engine.connect() as conn:
        db, head = check_alembic_revision(get_alembic_config(sqlite_event_log.__file__), conn)
    engine.dispose()
    assert db == head and db is not None
    before = ours.read_bytes()
    sqlite_event_log.SqliteEventLogStorage(str(ours_dir)).dispose()  # Dagster's own, on it
    assert rows(ours, schema) == rows(theirs, schema)
    assert len(ours.read_bytes()) == len(before)


def test_cli_runs_skip_stdout_capture_and_keep_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CLI run's output is on the terminal: its instance captures no stdout/stderr (no
    helper processes), while the instance the UI and the daemon load keeps Dagster's capture;
    the run's event log, warnings included, is whole either way."""
    import dagster as dg
    from dagster import DagsterInstance

    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))

    @dg.asset
    def noisy(context) -> int:  # type: ignore[no-untyped-def]  # (a local name: no string annotation)
        print("to stdout")
        context.log.warning("a warning the UI must show")
        return 1

    defs = dg.Definitions(assets=[noisy], jobs=[dg.define_asset_job("j", selection=[noisy])])
    with dagster_storage.instance(home) as instance:
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
        result = defs.resolve_job_def("j").execute_in_process(instance=instance)
        assert result.success
    with DagsterInstance.get() as plain:
        assert type(plain.compute_log_manager).__name__ == "LocalComputeLogManager"
        records = plain.get_records_for_run(result.run_id).records
        messages = [r.event_log_entry.user_message for r in records]
        assert any("a warning the UI must show" in m for m in messages)
        types = {r.event_log_entry.dagster_event_type for r in records}
        assert dg.DagsterEventType.ASSET_MATERIALIZATION in types
        assert dg.DagsterEventType.RUN_SUCCESS in types


def test_has_table_keeps_a_yes_and_asks_again_after_a_no(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    storage = dagster_storage.KeptConnectionsEventLogStorage(str(tmp_path / "runs"))
    try:
        assert storage.has_table("event_logs")
        assert not storage.has_table("made_later")
        index = tmp_path / "runs" / "index.db"
        sqlite3.connect(index).execute("CREATE TABLE made_later (x)").connection.commit()
        assert storage.has_table("made_later")
        sqlite3.connect(index).execute("DROP TABLE made_later").connection.commit()
        assert storage.has_table("made_later")  # a yes is kept (only a migration adds tables)
    finally:
        storage.dispose()


def _two_assets() -> list[Any]:
    """Two assets, the second depending on the first: their run stores asset events and reads
    the first's record for the second's provenance."""
    import dagster as dg

    @dg.asset
    def a() -> None: ...

    @dg.asset(deps=[a])
    def b() -> None: ...

    return [a, b]


def test_an_asset_key_column_found_is_kept_and_a_missing_one_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The asset-key index columns Dagster checks before storing each asset event: a column
    found is not reflected again; one not found is asked again (and found once it is added)."""
    import dagster as dg
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    asked: list[str] = []
    own = SqlEventLogStorage._has_asset_key_col_on_connection

    def counted(self: SqlEventLogStorage, conn: object, column_name: str) -> bool:
        asked.append(column_name)
        return own(self, conn, column_name)  # type: ignore[arg-type]

    monkeypatch.setattr(SqlEventLogStorage, "_has_asset_key_col_on_connection", counted)
    with dagster_storage.instance(tmp_path) as instance:
        assert dg.materialize(_two_assets(), instance=instance).success
        assert dg.materialize(_two_assets(), instance=instance).success
        # the columns Dagster checks were reflected once each, however many events were stored
        assert "last_materialization_timestamp" in asked
        assert len(asked) == len(set(asked))
        storage = instance.event_log_storage
        assert isinstance(storage, dagster_storage.KeptConnectionsEventLogStorage)
        with storage.index_connection() as conn:
            assert not storage._has_asset_key_col_on_connection(conn, "added_later")
            assert not storage._has_asset_key_col_on_connection(conn, "added_later")
            conn.exec_driver_sql("ALTER TABLE asset_keys ADD COLUMN added_later TEXT")
            assert storage._has_asset_key_col_on_connection(conn, "added_later")
            assert storage._has_asset_key_col_on_connection(conn, "added_later")
        assert asked.count("added_later") == 3
        assert instance.get_latest_materialization_event(dg.AssetKey("b")) is not None


def test_a_migration_found_done_and_the_runs_columns_found_are_asked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dagster asks whether a data migration is done for every asset record it reads, and
    reflects the runs table for every run event it stores: each yes is asked of SQLite once,
    however many events two runs store, and a no is asked again."""
    import dagster as dg
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    asked: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, params: object, *_: object) -> None:
        if "secondary_indexes" in statement and statement.lstrip().startswith("SELECT"):
            asked.append(f"index {params}")
        elif 'table_xinfo("runs")' in statement:
            asked.append("runs columns")

    event.listen(Engine, "before_cursor_execute", note)
    try:
        with dagster_storage.instance(tmp_path) as instance:
            assert dg.materialize(_two_assets(), instance=instance).success
            first = list(asked)
            assert dg.materialize(_two_assets(), instance=instance).success
            assert asked == first  # the second run asks nothing the first found
            assert any(q.startswith("index") for q in first) and "runs columns" in first
            storage = instance.event_log_storage
            asked.clear()
            assert not storage.has_secondary_index("not_done")
            assert not storage.has_secondary_index("not_done")
            storage.enable_secondary_index("not_done")
            assert storage.has_secondary_index("not_done")
            assert storage.has_secondary_index("not_done")
            assert len(asked) == 3
            assert instance.get_latest_materialization_event(dg.AssetKey("b")) is not None
    finally:
        event.remove(Engine, "before_cursor_execute", note)


def test_the_dagster_internals_the_storage_relies_on_are_as_pinned(tmp_path: Path) -> None:
    """Every private name of Dagster that pipelines/instance.py overrides, calls or reads,
    with the signature it relies on: a Dagster release that renames or reshapes one fails
    here rather than in a user's run."""
    import importlib
    import inspect

    from dagster._core.instance.ref import InstanceRef
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._serdes import ConfigurableClassData

    def params(fn: object) -> list[str]:
        return list(inspect.signature(fn).parameters)  # type: ignore[arg-type]

    # overridden (and called through super())
    assert params(SqliteEventLogStorage._initdb) == ["self", "engine", "for_index_shard"]
    assert (
        inspect.signature(SqliteEventLogStorage._initdb).parameters["for_index_shard"].default
        is False
    )
    assert params(SqliteEventLogStorage._connect) == ["self", "shard"]
    assert params(SqliteEventLogStorage.__init__) == ["self", "base_dir", "inst_data"]
    assert params(SqliteEventLogStorage.has_table) == ["self", "table_name"]
    assert params(SqliteEventLogStorage.has_secondary_index) == ["self", "name"]
    assert params(SqliteRunStorage.has_run_stats_index_cols) == ["self"]
    assert params(SqliteRunStorage.has_backfill_id_column) == ["self"]
    assert params(SqliteEventLogStorage._has_asset_key_col_on_connection) == [
        "self",
        "conn",
        "column_name",
    ]
    assert params(SqliteEventLogStorage.conn_string_for_shard) == ["self", "shard_name"]
    assert params(SqliteEventLogStorage.path_for_shard) == ["self", "run_id"]
    assert params(SqliteRunStorage.__init__) == ["self", "conn_string", "inst_data"]
    assert params(SqliteRunStorage.connect) == ["self"]
    assert params(SqliteRunStorage.from_local) == ["base_dir", "inst_data"]
    # read
    storage = SqliteEventLogStorage(str(tmp_path / "runs"))
    try:
        assert hasattr(storage._db_lock, "__enter__")
        assert isinstance(storage._initialized_dbs, set)
        assert storage._base_dir == str(tmp_path / "runs")
    finally:
        storage.dispose()
    # the NamedTuples replaced, and the classes named by module path
    assert {"compute_logs_data", "storage_data"} <= set(InstanceRef._fields)
    assert ConfigurableClassData._fields == ("module_name", "class_name", "config_yaml")
    for module, name in [
        ("dagster._core.storage.sqlite_storage", "DagsterSqliteStorage"),
        ("dagster._core.storage.schedules", "SqliteScheduleStorage"),
        ("dagster._core.storage.legacy_storage", "CompositeStorage"),
        ("dagster._core.storage.local_compute_log_manager", "LocalComputeLogManager"),
        ("dagster._core.storage.noop_compute_log_manager", "NoOpComputeLogManager"),
    ]:
        assert isinstance(getattr(importlib.import_module(module), name), type), (module, name)
    assert dagster_storage.SQLITE_BUSY_TIMEOUT_SECONDS > 0
    assert params(dagster_storage.create_engine)[0] == "url"


def test_the_instance_takes_its_home_as_a_parameter(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    with dagster_storage.instance(str(home)) as instance:
        assert type(instance.event_log_storage).__name__ == "KeptConnectionsEventLogStorage"
        assert instance.root_directory == str(home)


def test_stamped_run_and_schedule_files_open_without_alembic_s_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Dagster home's runs.db and schedules.db, once Dagster has made and stamped them, are
    opened without loading alembic's migration scripts; a file that is not stamped still goes
    through Dagster's own `from_local`, which stamps it."""
    import dagster._core.storage.runs.sqlite.sqlite_run_storage as run_module
    import dagster._core.storage.schedules.sqlite.sqlite_schedule_storage as schedule_module

    home = tmp_path / "dagster"
    home.mkdir()
    with dagster_storage.instance(str(home)) as instance:  # made and stamped by Dagster
        assert type(instance.schedule_storage).__name__ == "CheckedScheduleStorage"
    runs_db, schedules_db = home / "history" / "runs.db", home / "schedules" / "schedules.db"
    assert dagster_storage._stamped(str(runs_db), "instance_info")
    assert dagster_storage._stamped(str(schedules_db))

    checked: list[str] = []
    real = run_module.check_alembic_revision

    def counting(config: object, conn: object) -> object:
        checked.append(str(conn.engine.url))  # type: ignore[attr-defined]
        return real(config, conn)  # type: ignore[arg-type]

    monkeypatch.setattr(run_module, "check_alembic_revision", counting)
    monkeypatch.setattr(schedule_module, "check_alembic_revision", counting)
    with dagster_storage.instance(str(home)) as instance:
        assert instance.get_runs() == []
        assert instance.schedule_storage is not None
        assert list(instance.all_instigator_state()) == []
    assert checked == []

    # unstamped: Dagster's own from_local runs, and stamps it again
    with sqlite3.connect(runs_db) as con:
        con.execute("DELETE FROM alembic_version")
    assert not dagster_storage._stamped(str(runs_db), "instance_info")
    with dagster_storage.instance(str(home)) as instance:
        assert instance.get_runs() == []
    assert any("runs.db" in url for url in checked)
    assert dagster_storage._stamped(str(runs_db), "instance_info")


def test_a_new_homes_files_are_made_as_dagster_makes_them_without_alembic(
    tmp_path: Path,
) -> None:
    """A new home's runs.db, schedules.db and event databases, made by the adapter without
    alembic (`_new_database`), hold what Dagster's own `from_local` and `_initdb` make: the
    same tables, indexes, revision (HEAD_REVISION, alembic's own head for this Dagster) and
    data migrations marked done; a file another process made first is left as it is."""
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._core.storage.schedules import SqliteScheduleStorage
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config

    def dump(path: Path) -> list[tuple[object, ...]]:
        with sqlite3.connect(path) as con:
            out = sorted(con.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            out += con.execute("SELECT * FROM alembic_version").fetchall()
            out.append(tuple(con.execute("PRAGMA journal_mode").fetchone()))
            if any(r[1] == "secondary_indexes" for r in out):
                out += sorted(con.execute("SELECT name FROM secondary_indexes").fetchall())
            return out

    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    with dagster_storage.instance(str(ours)) as instance:
        assert instance.get_runs_count() == 0
    SqliteRunStorage.from_local(base_dir=str(theirs / "history")).dispose()
    SqliteScheduleStorage.from_local(base_dir=str(theirs / "schedules")).dispose()
    for name in ("history/runs.db", "schedules/schedules.db"):
        assert dump(ours / name) == dump(theirs / name), name
    empty = ours / "history" / "runs" / f".empty-{dagster_storage.dagster_version}.sqlite"
    theirs_event = theirs / "event.db"
    engine = dagster_storage.create_engine(f"sqlite:///{theirs_event}")
    dagster_storage.SqliteEventLogStorage._initdb(object(), engine)  # type: ignore[arg-type]
    engine.dispose()
    assert dump(empty) == dump(theirs_event)
    from dagster._core.storage.runs.sqlite import sqlite_run_storage

    engine = dagster_storage.create_engine(f"sqlite:///{theirs / 'history' / 'runs.db'}")
    with engine.connect() as conn:
        db, head = check_alembic_revision(get_alembic_config(sqlite_run_storage.__file__), conn)
    engine.dispose()
    assert db == head == dagster_storage.HEAD_REVISION
    # made elsewhere first: left as it is
    (tmp_path / "elsewhere.db").write_bytes(b"")
    assert not dagster_storage._new_database(
        str(tmp_path / "elsewhere.db"), dagster_storage.RunStorageSqlMetadata
    )
    assert (tmp_path / "elsewhere.db").read_bytes() == b""
    assert not list(tmp_path.glob("*.tmp*"))


def test_a_new_file_is_moved_in_where_the_filesystem_has_no_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem that refuses hard links: a new file is moved into place (a file already
    there is still left as it is), and a whole new home opens."""
    import os

    def refused(src: str, dst: str) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refused)
    made = tmp_path / "runs.db"
    assert dagster_storage._new_database(str(made), dagster_storage.RunStorageSqlMetadata)
    assert dagster_storage._stamped(str(made), "instance_info")
    assert not dagster_storage._new_database(str(made), dagster_storage.RunStorageSqlMetadata)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.db"]
    home = tmp_path / "home"
    home.mkdir()
    with dagster_storage.instance(str(home)) as instance:  # a whole new home, moved in
        assert instance.get_runs_count() == 0


def test_dagster_s_from_local_changes_nothing_in_a_stamped_file(tmp_path: Path) -> None:
    """What `_stamped` relies on: Dagster's `from_local` of the run and schedule storages, given
    a file it made and stamped, leaves its schema and revision as they are."""
    from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage
    from dagster._core.storage.schedules import SqliteScheduleStorage

    def schema(path: Path) -> list[tuple[str, ...]]:
        with sqlite3.connect(path) as con:
            tables = con.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name")
            return [*tables.fetchall(), *con.execute("SELECT * FROM alembic_version").fetchall()]

    for cls, folder, name in [
        (SqliteRunStorage, tmp_path / "history", "runs.db"),
        (SqliteScheduleStorage, tmp_path / "schedules", "schedules.db"),
    ]:
        cls.from_local(base_dir=str(folder)).dispose()
        made = schema(folder / name)
        assert dagster_storage._stamped(
            str(folder / name), "instance_info" if "runs" in name else None
        )
        cls.from_local(base_dir=str(folder)).dispose()
        assert schema(folder / name) == made


def test_dagster_s_storage_is_imported_without_alembic_until_a_file_needs_it_nor_rich(
    tmp_path: Path,
) -> None:
    """The storage adapter imports Dagster's SQL storage module with stand-ins for the alembic
    names it imports (alembic and Mako, ~60 ms of every process that opens an instance), and
    structlog without rich (rich and Pygments, ~30 ms). In a fresh process: neither is
    imported by the adapter, nor by a new Dagster home (made as Dagster makes one, stamped
    without alembic), and later imports of alembic and rich are their own."""

    code = (
        "import sys\n"
        "from centsync.pipelines import instance as s\n"
        "assert 'alembic' not in sys.modules and 'mako' not in sys.modules, 'alembic loaded'\n"
        "assert 'rich' not in sys.modules and 'pygments' not in sys.modules, 'rich loaded'\n"
        "import structlog.dev\n"
        "assert structlog.dev.rich is None\n"
        "import dagster._core.storage.sql as sql\n"
        "assert type(sql.stamp).__name__ == '_Deferred'\n"
        f"with s.instance({str(tmp_path / 'home')!r}) as i:\n"
        "    assert i.get_runs_count() == 0\n"
        "assert 'alembic' not in sys.modules, 'a new home loaded alembic'\n"
        "import alembic.command\n"
        "assert sql.stamp._target() is alembic.command.stamp\n"
        "assert hasattr(alembic.command, '__file__')\n"
        "import rich.console\n"
        "assert hasattr(rich.console, 'Console')\n"
    )
    _in_a_fresh_process(tmp_path, code)
    assert (tmp_path / "home" / "history" / "runs.db").exists()


def _in_a_fresh_process(tmp_path: Path, code: str) -> None:
    """Run `code` in a new Python process, with an empty Dagster home at tmp_path/home; it
    must get to its end."""
    import subprocess
    import sys

    (tmp_path / "home").mkdir()
    done = subprocess.run(
        [sys.executable, "-c", code + "print('ok')\n"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_alembic_names_stood_in_are_the_ones_dagster_imports() -> None:
    """`_ALEMBIC_NAMES` is every `from alembic... import ...` of Dagster's SQL storage module:
    a Dagster release that imports another name fails here (in a user's process it would
    import alembic as before: the adapter falls back)."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("dagster._core.storage.sql")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    imported: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("alembic"):
            imported[node.module or ""] = tuple(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            assert not any(a.name.startswith("alembic") for a in node.names)
    assert imported == dagster_storage._ALEMBIC_NAMES


def test_the_definitions_state_storage_is_made_when_first_used(tmp_path: Path) -> None:
    """An instance of the adapter imports no UPath or fsspec until its definitions-state
    storage is used (~15 ms of every process that opens one); used, it is the storage Dagster's
    own instance of the same home makes: what one writes, the other reads."""

    code = (
        "import sys, pathlib\n"
        "from centsync.pipelines import instance as s\n"
        f"home = {str(tmp_path / 'home')!r}\n"
        "with s.instance(home) as i:\n"
        "    assert i.get_runs_count() == 0\n"
        "    assert 'upath' not in sys.modules and 'fsspec' not in sys.modules, 'upath loaded'\n"
        "    state = i.defs_state_storage\n"
        "    assert state.get_latest_defs_state_info() is None\n"
        "    f = pathlib.Path(home) / 'state.json'\n"
        "    f.write_text('{}')\n"
        "    state.upload_state_from_path('key', 'v1', f)\n"
        "    state.set_latest_version('key', 'v1')\n"
        "    assert state.list_state_keys_with_prefix('k') == ['key']\n"
        "    assert state.storage()._instance is i\n"
        "from dagster import DagsterInstance\n"
        "own = DagsterInstance.from_ref(i.get_ref())\n"
        "assert type(own.defs_state_storage).__name__ == 'UPathDefsStateStorage'\n"
        "assert own.defs_state_storage.get_latest_version('key') == 'v1'\n"
    )
    _in_a_fresh_process(tmp_path, code)


def test_the_instance_is_made_as_dagster_makes_it_from_a_ref() -> None:
    """`_from_ref` passes Dagster's instance class the same arguments as Dagster's own
    `create_instance_from_ref` (parsed from its source), and the storage made on first use
    forwards every public method of Dagster's `DefsStateStorage`: a Dagster release that adds
    either fails here."""
    import ast
    import inspect

    from dagster._core.instance import factory
    from dagster._core.storage.defs_state.base import DefsStateStorage

    def keywords(fn: object) -> set[str]:
        tree = ast.parse(inspect.getsource(fn))  # type: ignore[arg-type]
        calls = [
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "klass"
        ]
        assert len(calls) == 1
        return {k.arg or "**" for k in calls[0].keywords}

    assert keywords(dagster_storage._from_ref) == keywords(factory.create_instance_from_ref)
    public = {
        name
        for name, member in vars(DefsStateStorage).items()
        if callable(member) and not name.startswith("_") and name != "get"
    }
    forwarded = set(vars(dagster_storage._DefsStateOnFirstUse)) - {"storage"}
    assert public <= forwarded, public - forwarded
