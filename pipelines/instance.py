"""Dagster's SQLite storage for runs and their event logs, keeping its connections.

Used by the CLI's in-process runs (`cli/runner.py`) and its schedule commands; a top-level
module of `pipelines/`, not of `cli/`, so that `defs/` and `fleet/` may open an instance the same way.

Dagster's own SQLite storages create a new SQLAlchemy engine and SQLite connection for every
event they store and run record they touch (0.5 s of a 3.4 s household refresh, py-spy). These
subclasses keep one engine and connection per database for the life of the process, and
remember the schema checks Dagster repeats (`_yes_kept`); the schema, the files, the per-run
event databases and the UI's watchers are Dagster's. Other savings, each measured in
docs/benchmarks.md: WAL commits with `synchronous=NORMAL`; new databases made as Dagster makes
them but stamped at its head revision without alembic (`_new_database`), and stamped files
opened without loading alembic's scripts (`_stamped`), so alembic is imported only for a file
that needs a migration (`_sql_storage_without_alembic`); no rich for structlog
(`_structlog_without_rich`); a CLI run's output, already on the terminal, not captured again;
and the definitions-state storage (UPath, fsspec) made on first use (`_from_ref`).

`instance(home)` gives the centsync commands an instance of the Dagster home that uses them where
the instance's `dagster.yaml` keeps Dagster's default SQLite storage. The files stay where
Dagster's defaults put them (`history/runs.db`, `history/runs/<run id>.db`, `schedules/`), so
`centsync ui`, `dagster dev` and the daemon, which use Dagster's own classes, read and write
the same history. (Not named in dagster.yaml: tools that make a temporary instance from that
file, such as `dg list defs`, give storages no home to find their files in.)

This module is the one adapter over Dagster's storage internals: the private modules imported
below, the module paths named as strings, the overridden `_initdb`/`_connect` and
`_has_asset_key_col_on_connection`, the attributes read (`_db_lock`, `_initialized_dbs`,
`_base_dir`), the schema metadata and head revision a new file is made with, and the arguments
of Dagster's `create_instance_from_ref`. The exact pin of dagster guards them, and
tests/pipelines/test_dagster_storage.py fails when any of them changes.
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import sqlite3
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import yaml

# The alembic names Dagster's SQL storage module imports (dagster 1.13, pinned by
# tests/pipelines/test_dagster_storage.py), for the migrations it runs on a new or an old file.
_ALEMBIC_NAMES = {
    "alembic.command": ("downgrade", "stamp", "upgrade"),
    "alembic.config": ("Config",),
    "alembic.runtime.environment": ("EnvironmentContext",),
    "alembic.runtime.migration": ("MigrationContext",),
    "alembic.script": ("ScriptDirectory",),
}


class _Deferred:
    """One of those names: alembic's own, imported when it is first called or read."""

    def __init__(self, module: str, name: str) -> None:
        self._module, self._name = module, name

    def _target(self) -> Any:
        return getattr(importlib.import_module(self._module), self._name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._target(), attr)


def _sql_storage_without_alembic() -> None:
    """Import Dagster's SQL storage module with `_Deferred` stand-ins for alembic's names.

    alembic (with Mako and Pygments) costs about 60 ms of every process that opens an
    instance (docs/benchmarks.md), and only a new file, an unstamped one or `dagster instance
    migrate` runs it: the stamped files of a CLI run are opened without it (`_stamped`,
    `_initdb`). The stand-in modules are in `sys.modules` for that one import only, so any later
    `import alembic` is alembic's own; a process that has alembic or the module already is left
    as it is."""
    if "alembic" in sys.modules or "dagster._core.storage.sql" in sys.modules:
        return
    importlib.import_module("dagster")  # all of it outside the window: only the one module in it
    stand_ins = {name: types.ModuleType(name) for name in ("alembic", "alembic.runtime")}
    for module, names in _ALEMBIC_NAMES.items():
        stand_ins[module] = types.ModuleType(module)
        for name in names:
            setattr(stand_ins[module], name, _Deferred(module, name))
    sys.modules.update(stand_ins)
    try:
        importlib.import_module("dagster._core.storage.sql")
    except ImportError:
        pass  # a name it imports that is not stood in: the imports below bring alembic's own
    finally:
        for name, stood in stand_ins.items():
            if sys.modules.get(name) is stood:
                del sys.modules[name]


def _structlog_without_rich() -> None:
    """Import structlog, which Dagster's run storage brings in through its daemon's modules,
    without rich (and Pygments): structlog formats exceptions with rich whenever it is
    installed, about 30 ms of every process that opens an instance (docs/benchmarks.md), for
    loggers only Dagster's daemon uses, and it runs in a process of its own (`centsync
    schedule`). rich is refused to that one import, so a later `import rich` is rich's own."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]
    try:
        importlib.import_module("structlog")
    except ImportError:
        pass  # not installed with this Dagster: nothing imports it
    finally:
        if sys.modules.get("rich", 0) is None:
            del sys.modules["rich"]


_sql_storage_without_alembic()
_structlog_without_rich()

from dagster import DagsterInstance, Field, StringSource  # noqa: E402
from dagster import __version__ as dagster_version  # noqa: E402
from dagster._core.instance import InstanceType  # noqa: E402
from dagster._core.instance.ref import InstanceRef  # noqa: E402
from dagster._core.storage.defs_state.base import DefsStateStorage  # noqa: E402
from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata  # noqa: E402
from dagster._core.storage.event_log.sqlite.sqlite_event_log import (  # noqa: E402
    INDEX_SHARD_NAME,
    SqliteEventLogStorage,
)
from dagster._core.storage.runs.schema import RunStorageSqlMetadata  # noqa: E402
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage  # noqa: E402
from dagster._core.storage.schedules import SqliteScheduleStorage  # noqa: E402
from dagster._core.storage.schedules.schema import ScheduleStorageSqlMetadata  # noqa: E402
from dagster._core.storage.sql import create_engine  # noqa: E402
from dagster._core.storage.sqlite import SQLITE_BUSY_TIMEOUT_SECONDS, create_db_conn_string  # noqa: E402
from dagster._serdes import ConfigurableClassData  # noqa: E402
from sqlalchemy import event  # noqa: E402
from sqlalchemy.engine import Connection, Engine  # noqa: E402
from sqlalchemy.exc import OperationalError  # noqa: E402
from sqlalchemy.pool import NullPool, QueuePool  # noqa: E402

# Event databases whose engines are kept: the index and the few runs a process touches.
KEPT_SHARDS = 8


def _base_dir(base_dir: str | None) -> str:
    """The storage's folder, which `instance(home)` always names in the storage's config."""
    if not base_dir:
        raise ValueError(
            "a kept-connection storage needs its base_dir: make it with instance(home)"
        )
    return base_dir


def _kept_engine(conn_string: str) -> Engine:
    """One pooled connection, usable from the threads Dagster calls it from (one at a time:
    the storages serialise their use)."""
    engine = create_engine(
        conn_string,
        poolclass=QueuePool,
        pool_size=1,
        max_overflow=4,
        connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS, "check_same_thread": False},
    )
    event.listen(engine, "connect", _wal_normal_sync)
    return engine


def _revision(engine: Engine) -> str | None:
    """The alembic revision a Dagster SQLite database is stamped with (None when unstamped)."""
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
    except OperationalError:
        return None  # no such table: a new or unstamped file


# The alembic revision Dagster stamps a new SQLite database with: the head of the migrations
# its run, event log and schedule storages share (dagster 1.13), and the table alembic keeps it
# in. tests/pipelines/test_dagster_storage.py checks both against alembic's own and a new file
# of ours against one Dagster made.
HEAD_REVISION = "29b539ebc72a"
_ALEMBIC_TABLE = (  # as alembic writes it (SQLite keeps the text)
    "CREATE TABLE alembic_version (\n\tversion_num VARCHAR(32) NOT NULL, "
    "\n\tCONSTRAINT alembic_version_pkc PRIMARY KEY (version_num)\n)"
)


def _new_database(path: str, metadata: Any) -> bool:
    """Make the Dagster SQLite database `path` as Dagster makes a new one (`from_local`,
    `_initdb`): its tables, WAL, stamped at HEAD_REVISION, without alembic, whose import and
    scripts were about 0.3 s of a new Dagster home's first command (docs/benchmarks.md). Made
    in a file of its own and linked into place; False (nothing changed) when another process,
    such as the UI, made `path` first."""
    tmp = f"{path}.{os.getpid()}.tmp"
    engine = create_engine(f"sqlite:///{tmp}", poolclass=NullPool)
    try:
        try:
            metadata.create_all(engine)
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
                conn.exec_driver_sql(_ALEMBIC_TABLE)
                conn.exec_driver_sql(
                    "INSERT INTO alembic_version (version_num) VALUES (?)", (HEAD_REVISION,)
                )
                conn.commit()
        finally:
            engine.dispose()  # the last connection closed: the WAL is folded into the file
        return _place(tmp, path)
    finally:
        for left in (tmp, f"{tmp}-wal", f"{tmp}-shm"):
            if os.path.exists(left):
                os.unlink(left)


def _place(made: str, path: str) -> bool:
    """Put the file `made` at `path` unless a file is there (False, `made` left to its
    maker): linked, so no other process's file is ever replaced, or moved where the
    filesystem has no hard links."""
    try:
        os.link(made, path)
    except FileExistsError:
        return False
    except OSError:  # no hard links on this filesystem: moved in, unless made meanwhile
        if os.path.exists(path):
            return False
        os.replace(made, path)
    return True


# a run or schedule storage class of ours (`_opened`)
_Storage = TypeVar("_Storage", "KeptConnectionsRunStorage", "CheckedScheduleStorage")


def _stamped(path: str, table: str | None = None) -> bool:
    """Whether a Dagster SQLite file is stamped with an alembic revision (and holds `table`).

    That is all Dagster's `from_local` of the run and schedule storages checks before it
    creates, stamps or fills anything: for a stamped file (with its `instance_info` table, for
    runs) it makes the storage and does nothing else, but it learns the head revision by
    loading alembic's migration scripts first (about 15 ms a database, docs/benchmarks.md).
    A file that is not so (new, unstamped, unreadable) is left to Dagster's `from_local`."""
    if not os.path.exists(path):
        return False
    try:
        con = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_SECONDS)
    except sqlite3.Error:
        return False
    try:
        if not con.execute("SELECT version_num FROM alembic_version").fetchone():
            return False
        if table is None:
            return True
        found = con.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).fetchone()
        return found is not None
    except sqlite3.Error:
        return False
    finally:
        con.close()


def _wal_normal_sync(dbapi_conn: Any, _record: Any) -> None:
    """In WAL mode (Dagster puts each of its SQLite files in it), `synchronous=NORMAL`:
    SQLite's recommended setting for WAL, where a commit no longer waits for an fsync. A crash
    of the process loses nothing; a power cut may lose the last events, never the file. A
    household refresh stores about 100 events: 0.29 s -> 0.19 s (docs/benchmarks.md). A file
    in rollback-journal mode keeps SQLite's default, which NORMAL would make corruptible."""
    cursor = dbapi_conn.cursor()
    try:
        (mode,) = cursor.execute("PRAGMA journal_mode").fetchone()
        if str(mode).lower() == "wal":
            cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _remember_yes(storage: Any, key: tuple[str, ...], check: Callable[[], bool]) -> bool:
    """A storage's check of its schema (a table, a column, a data migration done), a yes kept:
    only `dagster instance migrate` or `reindex`, in another process, makes one. A no is asked again."""
    yes: set[tuple[str, ...]] = storage.__dict__.setdefault("_yes", set())
    if key not in yes and check():
        yes.add(key)
    return key in yes


def _yes_kept(check: Callable[..., bool]) -> Callable[..., bool]:
    """`check` (a storage method of string arguments) with its yes remembered (`_remember_yes`)."""

    @functools.wraps(check)
    def kept(self: Any, *args: str) -> bool:
        return _remember_yes(self, (check.__name__, *args), lambda: check(self, *args))

    return kept


class KeptConnectionsEventLogStorage(SqliteEventLogStorage):
    """`SqliteEventLogStorage` with one engine per database kept, not one per event."""

    def __init__(self, base_dir: str | None = None, inst_data: Any = None) -> None:
        self._engines: dict[str, Engine] = {}
        self._empty_known = False
        self._empty_rev: str | None = None
        self._index_engine: Engine | None = None
        super().__init__(_base_dir(base_dir), inst_data)

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> KeptConnectionsEventLogStorage:
        return cls(inst_data=inst_data, **dict(config_value))

    @_yes_kept
    def has_table(self, table_name: str) -> bool:
        """Dagster's `has_table` over a kept index connection of its own (Dagster asks while it
        holds another one; its own makes a new engine and SQLite connection each time), asked
        before reading asset records and storing asset events: 35 times a household refresh."""
        if self._index_engine is None:
            self._index_engine = _kept_engine(self.conn_string_for_shard(INDEX_SHARD_NAME))
        with self._index_engine.connect() as conn:
            return bool(conn.dialect.has_table(conn, table_name))

    def _has_asset_key_col_on_connection(self, conn: Connection, column_name: str) -> bool:
        """Dagster's check of an asset-key index column, which reflects the table's columns for
        every asset event it stores (80 a household refresh, ~17 ms), a yes remembered."""
        parent = super()._has_asset_key_col_on_connection
        return _remember_yes(self, ("asset_keys", column_name), lambda: parent(conn, column_name))

    # asked twice for every asset record Dagster reads (28 times a household refresh, 16-30 ms)
    has_secondary_index = _yes_kept(SqliteEventLogStorage.has_secondary_index)

    def _empty_path(self) -> str:
        """An empty event database as Dagster's own `_initdb` makes one (`_new_database`), for
        this Dagster version, kept beside the run files under a name Dagster's `*.db` listing
        of runs skips."""
        return os.path.join(self._base_dir, f".empty-{dagster_version}.sqlite")

    def _empty_revision(self) -> str | None:
        """The alembic revision of the empty database (made on first use)."""
        if not self._empty_known:
            path = self._empty_path()
            if not os.path.exists(path):
                _new_database(path, SqlEventLogStorageMetadata)
            engine = create_engine(
                f"sqlite:///file:{path}?immutable=1&uri=true", poolclass=NullPool
            )
            try:
                self._empty_rev = _revision(engine)
            finally:
                engine.dispose()
            self._empty_known = True
        return self._empty_rev

    def _start_from_empty(self, path: str) -> bool:
        """A new event database at `path` (a run's, or a new home's index: Dagster makes both
        with the same `_initdb`) as a copy of the empty one (no clobbering: if another process,
        such as the UI, created the file first, Dagster's `_initdb` takes it from there)."""
        if os.path.exists(path) or self._empty_revision() is None:
            return False
        tmp = f"{path}.{os.getpid()}.tmp"
        shutil.copyfile(self._empty_path(), tmp)
        try:
            return _place(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def _initdb(self, engine: Engine, for_index_shard: bool = False) -> None:
        """Dagster's `_initdb`, skipped where its outcome is known without loading alembic's
        migration scripts (about 35 ms a database, two databases a run, docs/benchmarks.md): a
        new database starts as a copy of the empty one (`_start_from_empty`), and one already at
        the revision Dagster stamps an empty one with needs nothing."""
        path = engine.url.database
        if path:
            self._start_from_empty(path)
        if path and os.path.exists(path) and _revision(engine) == self._empty_revision():
            return
        super()._initdb(engine, for_index_shard)

    @contextmanager
    def _connect(self, shard: str) -> Iterator[Connection]:
        with self._db_lock:
            engine = self._engines.get(shard)
            if engine is None:
                engine = _kept_engine(self.conn_string_for_shard(shard))
                if shard not in self._initialized_dbs:
                    self._initdb(engine)
                    self._initialized_dbs.add(shard)
                    # a new file is in WAL mode only now: reconnect to get its synchronous mode
                    engine.dispose()
                while len(self._engines) >= KEPT_SHARDS:
                    self._engines.pop(next(iter(self._engines))).dispose()
                self._engines[shard] = engine
            with engine.connect() as conn, conn.begin():
                yield conn

    def dispose(self) -> None:
        super().dispose()
        with self._db_lock:
            for engine in self._engines.values():
                engine.dispose()
            self._engines.clear()
        if self._index_engine is not None:
            self._index_engine.dispose()
            self._index_engine = None


class KeptConnectionsRunStorage(SqliteRunStorage):
    """`SqliteRunStorage` with its engine kept, not one per call."""

    def __init__(self, conn_string: str, inst_data: Any = None) -> None:
        self._engine = _kept_engine(conn_string)
        super().__init__(conn_string, inst_data)

    # reflected from the runs table for every run event stored and run read
    has_run_stats_index_cols = _yes_kept(SqliteRunStorage.has_run_stats_index_cols)
    has_backfill_id_column = _yes_kept(SqliteRunStorage.has_backfill_id_column)

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> KeptConnectionsRunStorage:
        return _opened(cls, inst_data, config_value, "runs", RunStorageSqlMetadata, "instance_info")

    @contextmanager
    def connect(self) -> Iterator[Connection]:
        with self._engine.connect() as conn, conn.begin():
            yield conn

    def dispose(self) -> None:
        super().dispose()
        self._engine.dispose()


class CheckedScheduleStorage(SqliteScheduleStorage):
    """`SqliteScheduleStorage` whose stamped file is opened without loading alembic's scripts."""

    @classmethod
    def config_type(cls) -> Any:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: Any) -> CheckedScheduleStorage:
        return _opened(cls, inst_data, config_value, "schedules", ScheduleStorageSqlMetadata)


def _opened(
    cls: type[_Storage],
    inst_data: Any,
    config_value: Any,
    name: str,
    metadata: Any,
    table: str | None = None,
) -> _Storage:
    """The run or schedule storage `cls` of `<base_dir>/<name>.db`: a new file made as Dagster's
    from_local makes one (`_new_database`, from the storage's schema `metadata`), a file it
    would leave as it is opened without it (`_stamped`), any other (unstamped, damaged) left to
    Dagster's from_local."""
    base = _base_dir(dict(config_value).get("base_dir"))
    path = os.path.join(base, f"{name}.db")
    if not os.path.exists(path):
        os.makedirs(base, exist_ok=True)
        if _new_database(path, metadata):
            made = cls(create_db_conn_string(base, name), inst_data)
            made.migrate()  # a new file's data migrations marked done, as Dagster's from_local
            made.optimize()
            return made
    if _stamped(path, table):
        return cls(create_db_conn_string(base, name), inst_data)
    return cast("_Storage", cls.from_local(base_dir=base, inst_data=inst_data))


def _data(cls: type, base_dir: str) -> dict[str, str]:
    return {
        "module_name": cls.__module__,
        "class_name": cls.__name__,
        "config_yaml": yaml.dump({"base_dir": base_dir}, default_flow_style=False),
    }


def instance(home: str | os.PathLike[str]) -> DagsterInstance:
    """The instance of the Dagster home `home` (the settings' `dagster_home`), its default SQLite storage swapped for
    the one that keeps its connections and its default stdout/stderr capture left out
    (`_cli_compute_logs`); anything else is left as configured."""
    home = os.fspath(home)
    ref = InstanceRef.from_dir(home)
    ref = ref._replace(compute_logs_data=_cli_compute_logs(ref))
    data = ref.storage_data
    if data is None or (data.module_name, data.class_name) != (
        "dagster._core.storage.sqlite_storage",
        "DagsterSqliteStorage",
    ):
        return _from_ref(ref)
    base = yaml.safe_load(data.config_yaml).get("base_dir") or home
    composite = {
        "run_storage": _data(KeptConnectionsRunStorage, os.path.join(base, "history", "")),
        "event_log_storage": _data(
            KeptConnectionsEventLogStorage, os.path.join(base, "history", "runs", "")
        ),
        "schedule_storage": _data(CheckedScheduleStorage, os.path.join(base, "schedules")),
    }
    storage = ConfigurableClassData(
        "dagster._core.storage.legacy_storage",
        "CompositeStorage",
        yaml.dump(composite, default_flow_style=False),
    )
    return _from_ref(ref._replace(storage_data=storage))


def _from_ref(ref: InstanceRef) -> DagsterInstance:
    """`DagsterInstance.from_ref(ref)` (Dagster's `create_instance_from_ref`, argument for
    argument), but for its definitions-state storage, made on first use (`_DefsStateOnFirstUse`)."""
    klass = ref.custom_instance_class or DagsterInstance
    unified = ref.storage
    return klass(
        instance_type=InstanceType.PERSISTENT,
        local_artifact_storage=ref.local_artifact_storage,
        # None only for a ref without storage, which Dagster's factory does not check either
        run_storage=unified.run_storage if unified else ref.run_storage,  # type: ignore[arg-type]
        event_storage=unified.event_log_storage if unified else ref.event_storage,  # type: ignore[arg-type]
        schedule_storage=unified.schedule_storage if unified else ref.schedule_storage,
        compute_log_manager=None,  # made on first use, as Dagster's
        scheduler=ref.scheduler,
        run_coordinator=None,
        run_launcher=None,
        settings=ref.settings,
        secrets_loader=ref.secrets_loader,
        defs_state_storage=_DefsStateOnFirstUse(ref),
        ref=ref,
        **ref.custom_instance_class_config,
    )


class _DefsStateOnFirstUse(DefsStateStorage):
    """The instance's definitions-state storage (the files of Dagster's state-backed
    components), made when first used. Making it (`InstanceRef.defs_state_storage`) imports
    UPath and fsspec, ~15 ms of every process that opens an instance (docs/benchmarks.md), and
    centsync's definitions have no such component; any that did would reach the storage
    configured, as through Dagster's own instance."""

    def __init__(self, ref: InstanceRef) -> None:
        super().__init__()
        self._ref = ref
        self._made: DefsStateStorage | None = None

    def storage(self) -> DefsStateStorage:
        """The storage the instance's `dagster.yaml` configures (Dagster's default: UPath)."""
        if self._made is None:
            made = cast("DefsStateStorage", self._ref.defs_state_storage)
            if self.has_instance:
                made.register_instance(self._instance)
            self._made = made
        return self._made

    def get_latest_version(self, key: str) -> str | None:
        return self.storage().get_latest_version(key)

    def get_latest_defs_state_info(self) -> Any:
        return self.storage().get_latest_defs_state_info()

    def list_state_keys_with_prefix(self, prefix: str) -> list[str]:
        return self.storage().list_state_keys_with_prefix(prefix)

    def download_state_to_path(self, key: str, version: str, path: Any) -> None:
        self.storage().download_state_to_path(key, version, path)

    def upload_state_from_path(self, key: str, version: str, path: Any) -> None:
        self.storage().upload_state_from_path(key, version, path)

    def set_latest_version(self, key: str, version: str | None) -> None:
        self.storage().set_latest_version(key, version)


def _cli_compute_logs(ref: InstanceRef) -> ConfigurableClassData:
    """No stdout/stderr capture for a run the CLI makes, where Dagster's default would capture it.

    Dagster's `LocalComputeLogManager` mirrors a run's output into files through four helper
    processes, waited for at the end: 40 ms of a household refresh (docs/benchmarks.md). A CLI
    run's output is already on the terminal, and all it reports is in its event log, which the
    UI shows. Runs the UI or the daemon launch keep the instance's own setting, and a manager
    other than Dagster's default is left as configured.
    """
    data = ref.compute_logs_data
    if (data.module_name, data.class_name) != (
        "dagster._core.storage.local_compute_log_manager",
        "LocalComputeLogManager",
    ):
        return data
    return ConfigurableClassData(
        "dagster._core.storage.noop_compute_log_manager", "NoOpComputeLogManager", "{}\n"
    )
