"""The shared lake: every owner's core tables and marts as Delta tables, each owner's rows in
its lake shard.

Each owner keeps its own warehouse file (one writer, reconciled on its own). After a refresh
the owner's `core` and `marts` tables are published into `<lake>/<schema>/<table>`, one Delta
table per warehouse table with an `owner` column, partitioned by `shard` (the owners a shard
run published together, docs/scale.md). A publish replaces its owners' rows only (a
`predicate` naming them and their shards): many processes publish at once with optimistic
concurrency, and a commit that lost a race is retried (delta-rs' CommitFailedError).
`maintain` compacts, checkpoints and vacuums (`centsync lake`).

`open_lake` gives a DuckDB connection with every lake table as a view under its schema
(`core.transactions` holds every owner's rows) and the household views (`household.*`).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import orjson

from centsync.warehouse.errors import WarehouseError
from centsync.warehouse.migrate import current_version

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

PUBLISHED_SCHEMAS = ("core", "marts")
_OWNER = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Published:
    """What one owner's publish wrote: tables committed (those that changed), their rows, the
    lake shard its rows live in, and its batch's commit retries and seconds."""

    owner: str
    tables: int
    rows: int
    retries: int
    seconds: float
    shard: str = ""
    batch: int = 1

    def to_json(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "tables": self.tables,
            "rows": self.rows,
            "retries": self.retries,
            "seconds": self.seconds,
            "shard": self.shard,
            "batch": self.batch,
        }


class LakeLayoutError(WarehouseError, ValueError):
    """A lake table written by an earlier centsync, in a layout this one does not write."""

    headline = "the shared lake was written by an earlier centsync"
    what_to_do = "move the lake aside and run `centsync refresh --all` (it publishes everyone)."


class NoLakeError(WarehouseError, FileNotFoundError):
    """The lake holds no table yet."""

    headline = "there is no shared lake yet"
    what_to_do = "run `centsync refresh --all` (or `centsync --owner NAME refresh`) first."


def publish(warehouse: Path, lake: Path, owner: str, *, attempts: int = 20) -> Published:
    """Publish the owner's core tables and marts into the lake, replacing its rows."""
    return publish_many([collect_file(warehouse, lake, owner)], lake, attempts=attempts)[0]


@dataclass(frozen=True)
class Collected:
    """An owner's tables that changed since it last published them, read for the lake: each
    table's Arrow rows (with its owner column) and its new fingerprint; and the marks they
    were compared with (what the owner last published, its shard)."""

    owner: str
    tables: list[tuple[tuple[str, str], pa.Table, str]]
    marks: dict[str, str]


def collect(
    con: duckdb.DuckDBPyConnection,
    lake: Path,
    owner: str,
    marts: Mapping[str, pl.DataFrame] | None = None,
) -> Collected:
    """Read the owner's changed tables from an open connection to its warehouse (a refresh's
    working copy, before it is published: no second open of the file).

    `marts`: the mart frames this refresh built and wrote (`pipelines.reconcile`), by table
    name: those tables are taken from the frames, cast to the types DuckDB gives them, instead
    of read back (the same rows: tests/pipelines/test_owners_fleet.py).
    """
    _check_name(owner)
    marks = _marks(lake, owner)
    zone = con.execute("SELECT current_setting('TimeZone')").fetchall()[0][0]
    con.execute("SET TimeZone = 'UTC'")  # Delta keeps timestamps in UTC
    try:
        version = current_version(con)
        tables = _columns(con, version)
        found = []
        for (schema, name), columns in tables.items():
            frame = (marts or {}).get(name) if schema == "marts" else None
            data = _from_frame(con, (version, schema, name), columns, owner, frame)
            if data is None:
                data = con.sql(_select(schema, name, columns, owner)).to_arrow_table()
            # a table whose rows did not change since this owner last published it is not
            # committed again (most of a daily refresh's tables): a commit costs ~15 ms of CPU
            mark = fingerprint(data)
            target = lake / schema / name
            if marks.get(f"{schema}.{name}") == mark and (target / "_delta_log").is_dir():
                continue
            found.append(((schema, name), data, mark))
    finally:
        con.execute(f"SET TimeZone = '{str(zone).replace(chr(39), chr(39) * 2)}'")
    return Collected(owner, found, marks)


def fingerprint(data: pa.Table) -> str:
    """A published table's rows, order aside: their count and the sum of their hashes
    (Polars' `hash_rows`, the same in every process of one Polars version; a new version may
    hash anew, and each owner's tables are then committed once more)."""
    import polars as pl

    frame = pl.from_arrow(data)
    assert isinstance(frame, pl.DataFrame)
    total = frame.hash_rows(seed=0).sum() if frame.height else 0
    return f"{frame.height}:{total}"


# the Arrow schema DuckDB gives each published table, per schema version and process (read
# with LIMIT 0 once): a mart's frame is cast to it, so its rows are the ones a read would give
_ARROW: dict[tuple[int, str, str], pa.Schema] = {}


def _from_frame(
    con: duckdb.DuckDBPyConnection,
    key: tuple[int, str, str],
    columns: list[tuple[str, str]],
    owner: str,
    frame: pl.DataFrame | None,
) -> pa.Table | None:
    """The table as published, from the frame that was written to it (None: read it). `key`:
    the schema version, the table's schema and name."""
    if frame is None or not key[0] or any(c not in frame.columns for c, _ in columns):
        return None
    import polars as pl
    import pyarrow as pa

    _, schema, name = key
    target = _ARROW.get(key)
    if target is None:
        target = con.sql(_select(schema, name, columns, owner) + " LIMIT 0").to_arrow_table().schema
        _ARROW[key] = target
    rows = frame.select([c for c, _ in columns]).to_arrow(compat_level=pl.CompatLevel.oldest())
    owners = pa.array([owner] * rows.num_rows, pa.string())
    return rows.add_column(0, "owner", owners).cast(target)


def _check_name(owner: str) -> None:
    if not _OWNER.match(owner):
        raise ValueError(f"owner name {owner!r} is not a plain name (a-z, 0-9, '-', '_')")


def collect_file(warehouse: Path, lake: Path, owner: str) -> Collected:
    """`collect` from the owner's published warehouse file (opened read-only, then closed)."""
    _check_name(owner)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return collect(con, lake, owner)
    finally:
        con.close()


def publish_many(batch: Sequence[Collected], lake: Path, *, attempts: int = 20) -> list[Published]:
    """Publish several owners (a shard run's) in one commit per changed table: what `collect`
    (or `collect_file`) read of each.

    A table's rows of these owners are replaced, nobody else's. Each owner's rows live in its
    lake shard (the `shard` partition): the batch's first owner names the shard of owners new
    to the lake, an owner keeps the shard it has. A shard run that publishes the same owners
    every day replaces whole files of one partition, and concurrent batches in other
    partitions never conflict; a cross-owner query reads a file per shard, not per owner.
    """
    for c in batch:
        _check_name(c.owner)
    started = time.monotonic()
    names = [c.owner for c in batch]
    first = min(names) if names else ""
    marks = {c.owner: c.marks for c in batch}  # as `collect` read them: once per owner
    shard = {o: str(marks[o].get(_SHARD) or first) for o in names}
    pending: dict[tuple[str, str], list[tuple[str, pa.Table]]] = {}
    tables = dict.fromkeys(names, 0)
    rows = dict.fromkeys(names, 0)
    for c in batch:
        for key, data, mark in c.tables:
            pending.setdefault(key, []).append((c.owner, data))
            marks[c.owner][f"{key[0]}.{key[1]}"] = mark
            tables[c.owner] += 1
            rows[c.owner] += data.num_rows
    retries = 0
    for (schema, name), parts in pending.items():
        retries += _commit(lake / schema / name, parts, shard, marks, attempts)
    seconds = round(time.monotonic() - started, 3)
    out = []
    for owner in names:
        marks[owner][_SHARD] = shard[owner]
        _save_marks(lake, owner, marks[owner])
        out.append(
            Published(owner, tables[owner], rows[owner], retries, seconds, shard[owner], len(names))
        )
    return out


_SHARD = "_shard"  # the owner's lake shard, in its marks


def _commit(
    target: Path,
    parts: list[tuple[str, pa.Table]],
    shard: dict[str, str],
    marks: dict[str, dict[str, str]],
    attempts: int,
) -> int:
    """One commit of the batch's rows of one table; the retries it took."""
    import pyarrow as pa

    data = pa.concat_tables(
        [
            d.add_column(0, "shard", pa.array([shard[o]] * d.num_rows, pa.string()))
            for o, d in parts
        ],
        promote_options="default",
    )
    owners = sorted(o for o, _ in parts)
    predicate = f"owner IN ({_in_list(owners)})"
    if all(_SHARD in marks[o] for o in owners):
        # where their rows are: so a commit conflicts only with commits in the same shards
        shards = sorted({shard[o] for o in owners})
        predicate = f"shard IN ({_in_list(shards)}) AND {predicate}"
    return _retried(lambda: _write(target, data, predicate), attempts, 0.01)


def _retried(commit: Callable[[], object], attempts: int, pause: float) -> int:
    """Run a Delta commit, again (after a growing random pause) each time another writer
    committed first (CommitFailedError: it reads the new version); the retries it took."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(attempts):
        try:
            commit()
            return attempt
        except CommitFailedError:
            if attempt == attempts - 1:
                raise
            time.sleep(random.uniform(pause, pause * 5) * (attempt + 1))
    return attempts


# which refresh last read a row: the owner's own bookkeeping, and it changes on every
# refresh, so publishing it would rewrite every table every day
_BOOKKEEPING = {"refresh_id", "first_seen_refresh", "last_seen_refresh"}


# the published tables' columns are the migrations' (core and marts are made by them alone):
# read once per schema version and process, not per refresh (duckdb_columns() is ~15 ms)
_COLUMNS: dict[int, dict[tuple[str, str], list[tuple[str, str]]]] = {}


def _columns(
    con: duckdb.DuckDBPyConnection, version: int
) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Every published table's columns and types, in table and column order (not to be
    changed: shared by every warehouse at this schema `version`, current_version's)."""
    if not version:  # not a migrated warehouse: its own tables
        return _read_columns(con)
    found = _COLUMNS.get(version)
    if found is None:
        found = _COLUMNS[version] = _read_columns(con)
    return found


def _read_columns(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], list[tuple[str, str]]]:
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for schema, name, column, kind in con.execute(
        "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = current_database() AND schema_name IN ('core', 'marts') "
        "ORDER BY schema_name, table_name, column_index"
    ).fetchall():
        if column not in _BOOKKEEPING:
            found.setdefault((str(schema), str(name)), []).append((str(column), str(kind)))
    return found


def shards(lake: Path, owners: Sequence[str]) -> dict[str, str | None]:
    """Each owner's lake shard (its partition since it was first published; None for an owner
    not published yet)."""
    return {o: _marks(lake, o).get(_SHARD) for o in owners}


def _marks_path(lake: Path, owner: str) -> Path:
    return lake / "_published" / f"{owner}.json"


def _marks(lake: Path, owner: str) -> dict[str, str]:
    """What this owner last published, table by table (none: publish everything)."""
    try:
        found = orjson.loads(_marks_path(lake, owner).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def _save_marks(lake: Path, owner: str, marks: dict[str, str]) -> None:
    path = _marks_path(lake, owner)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(orjson.dumps(marks))
    tmp.replace(path)  # one owner publishes at a time (its refresh holds its warehouse's lock)


def _write(target: Path, data: pa.Table, predicate: str) -> None:
    from deltalake import DeltaTable, write_deltalake

    if (target / "_delta_log").is_dir():
        table = DeltaTable(target)
        layout = table.metadata().partition_columns
        if layout != ["shard"]:
            raise LakeLayoutError(
                f"the lake table {target} is partitioned by {layout}, written by an earlier "
                f"centsync; move the lake aside (`mv {target.parent.parent} "
                f"{target.parent.parent}.old`) and publish every owner again "
                "(`centsync refresh --all`): the owners' warehouses hold every row"
            )
        write_deltalake(
            table,
            data,
            mode="overwrite",
            predicate=predicate,
            partition_by=["shard"],
            schema_mode="merge",
        )
    else:  # the first batch creates it (a racing second one retries as an overwrite)
        target.mkdir(parents=True, exist_ok=True)
        write_deltalake(target, data, mode="append", partition_by=["shard"])


def _select(schema: str, name: str, columns: list[tuple[str, str]], owner: str) -> str:
    """The table with its owner first, without the refresh bookkeeping; UUIDs as text (Delta
    has no UUID type)."""
    parts = [
        f'CAST("{c}" AS VARCHAR) AS "{c}"' if t.upper() == "UUID" else f'"{c}"' for c, t in columns
    ]
    return f'SELECT \'{owner}\' AS owner, {", ".join(parts)} FROM "{schema}"."{name}"'


def lake_tables(lake: Path) -> list[tuple[str, str, Path]]:
    """Every Delta table in the lake: (schema, table, path)."""
    found = []
    for schema in PUBLISHED_SCHEMAS:
        folder = lake / schema
        if folder.is_dir():
            for table in sorted(folder.iterdir()):
                if (table / "_delta_log").is_dir():
                    found.append((schema, table.name, table))
    return found


_NAMED = re.compile(r"\b(core|marts|household)\s*\.\s*\"?([a-z0-9_]+)", re.IGNORECASE)
# what the household views read
_HOUSEHOLD_NEEDS = {("core", "transactions"), ("core", "categories"), ("marts", "net_worth_daily")}


def referenced(query: str) -> set[tuple[str, str]] | None:
    """The lake tables a query names (`core.transactions`, the household views' own), or None
    when it names none (it may list the catalog: open everything)."""
    found = {(s.lower(), t.lower()) for s, t in _NAMED.findall(query)}
    if any(s == "household" for s, _ in found):
        found = {f for f in found if f[0] != "household"} | _HOUSEHOLD_NEEDS
    return found or None


def open_lake(
    lake: Path,
    household: Sequence[str] = (),
    accounts: Sequence[str] = (),
    only: set[tuple[str, str]] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the lake's tables as views (`only` those, when given: opening
    a Delta table reads its log, ~10-30 ms each), and the household's views over the owners in
    `household` (default: every owner in the lake)."""
    tables = lake_tables(lake)
    if not tables:
        raise NoLakeError(
            f"the lake {lake} holds no tables yet: run `centsync refresh --all` (or "
            "`centsync --owner NAME refresh`) first"
        )
    con = duckdb.connect()
    for schema in (*PUBLISHED_SCHEMAS, "household"):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for schema, name, path in tables:
        if only is not None and (schema, name) not in only:
            continue
        con.execute(f'CREATE VIEW "{schema}"."{name}" AS {_scan(con, schema, name, path)}')
    present = {(s, t) for s, t, _ in tables if only is None or (s, t) in only}
    if ("core", "transactions") in present:
        _household_views(con, list(household), list(accounts), present)
    return con


def _scan(con: duckdb.DuckDBPyConnection, schema: str, name: str, path: Path) -> str:
    """What a lake table's view selects: DuckDB's own Parquet reader over the files of the
    table's current version (the Delta log says which), without the `shard` partition column.

    Over 2,000 owners (10 M rows in 80 shard files) 0.2 s against 1.0 s for a Polars scan read
    through Arrow (docs/scale.md). A table whose files need more than Parquet to read (deletion
    vectors, column mapping: delta-rs writes neither) or has none is read by `pl.scan_delta`.
    """
    import polars as pl
    from deltalake import DeltaTable

    table = DeltaTable(path)
    protocol = table.protocol()
    features = set(protocol.reader_features or ())
    files = table.file_uris()
    plain = protocol.min_reader_version <= 1 and not features
    if files and plain and table.metadata().partition_columns == ["shard"]:
        listed = ", ".join("'" + f.removeprefix("file://").replace("'", "''") + "'" for f in files)
        return f"SELECT * FROM read_parquet([{listed}], union_by_name = true, hive_partitioning = false)"
    handle = f"lake_{schema}_{name}"
    scan = pl.scan_delta(str(path))
    con.register(handle, scan.drop("shard") if "shard" in scan.collect_schema() else scan)
    return f'SELECT * FROM "{handle}"'


def _in_list(values: Sequence[str]) -> str:
    return ", ".join("'" + v.replace("'", "''") + "'" for v in values)


def _household_views(
    con: duckdb.DuckDBPyConnection,
    owners: list[str],
    accounts: list[str],
    present: set[tuple[str, str]],
) -> None:
    """household.transactions (each row flagged `between_owners`), and the household's cash
    flow, spending and net worth with the money moved between its own owners netted out.

    A transfer between owners is two legs: rows of two different owners of the household, on
    the same day, with opposite amounts, on the household's accounts (`accounts` in the owners
    file; default every account of its owners), not both expenses (a refund of one and a
    purchase of the other are not a transfer), and neither already paired with an opposite
    leg of its own owner that day (a transfer between one owner's own accounts). Equal legs
    pair in order of id: the k-th leg of one owner with the k-th opposite leg of another.
    """
    members = f"owner IN ({_in_list(owners)})" if owners else "TRUE"
    on_accounts = f"account_id IN ({_in_list(accounts)})" if accounts else "TRUE"
    con.execute(f"""
        CREATE VIEW household.transactions AS
        WITH h AS (SELECT * FROM core.transactions WHERE {members}),
        legs AS (
            SELECT owner, id, booked_at, amount, type,
                   row_number() OVER (PARTITION BY owner, booked_at, amount ORDER BY id) AS k
            FROM h WHERE {on_accounts} AND amount <> 0
        ),
        own AS (  -- an owner's transfer between its own accounts: both legs its own
            SELECT DISTINCT a.owner, a.id FROM legs a JOIN legs b
              ON a.owner = b.owner AND a.booked_at = b.booked_at AND a.amount = -b.amount
             AND a.k = b.k
        ),
        free AS (
            SELECT l.owner, l.id, l.booked_at, l.amount, l.type,
                   row_number() OVER (PARTITION BY l.owner, l.booked_at, l.amount ORDER BY l.id) AS k
            FROM legs l ANTI JOIN own o ON o.owner = l.owner AND o.id = l.id
        ),
        paired AS (
            SELECT DISTINCT a.owner, a.id FROM free a JOIN free b
              ON a.booked_at = b.booked_at AND a.amount = -b.amount AND a.k = b.k
             AND a.owner <> b.owner AND NOT (a.type = 'expense' AND b.type = 'expense')
        )
        SELECT h.*, p.id IS NOT NULL AS between_owners
        FROM h LEFT JOIN paired p ON p.owner = h.owner AND p.id = h.id
    """)
    con.execute("""
        CREATE VIEW household.cash_flow_by_month AS
        SELECT month,
               CAST(coalesce(sum(amount) FILTER (type = 'income' AND NOT between_owners), 0) AS BIGINT) AS income_cents,
               CAST(coalesce(sum(amount) FILTER (type = 'expense' AND NOT between_owners), 0) AS BIGINT) AS spending_cents,
               income_cents + spending_cents AS net_cents,
               CAST(coalesce(sum(amount) FILTER (between_owners AND amount < 0), 0) AS BIGINT) AS between_owners_cents
        FROM household.transactions GROUP BY month ORDER BY month
    """)  # fmt: skip
    if ("core", "categories") in present:
        _spending_by_category(con)
    if ("marts", "net_worth_daily") in present:
        _net_worth(con, members)


def _spending_by_category(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("""
        CREATE VIEW household.spending_by_month_category AS
        SELECT t.month, coalesce(c.name, 'Uncategorized') AS category_name,
               CAST(sum(t.amount) AS BIGINT) AS amount_cents, count(*) AS transactions
        FROM household.transactions t
        LEFT JOIN core.categories c ON c.owner = t.owner AND c.id = t.category_id
        WHERE t.type = 'expense' AND NOT t.between_owners
        GROUP BY ALL ORDER BY 1, 3
    """)


def _net_worth(con: duckdb.DuckDBPyConnection, members: str) -> None:
    con.execute(f"""
        CREATE VIEW household.net_worth_daily AS
        SELECT date, CAST(sum(net_worth_cents) AS BIGINT) AS net_worth_cents, count(*) AS owners
        FROM marts.net_worth_daily WHERE {members}
        GROUP BY date HAVING count(*) = (SELECT count(DISTINCT owner) FROM marts.net_worth_daily WHERE {members})
        ORDER BY date
    """)  # fmt: skip


@dataclass(frozen=True)
class Maintained:
    """What `maintain` did to one lake table."""

    table: str
    files_before: int
    files_after: int
    removed: int
    seconds: float

    def to_json(self) -> dict[str, object]:
        return dict(self.__dict__)


def maintain(lake: Path, *, retain_hours: int = 24, attempts: int = 10) -> list[Maintained]:
    """Keep the lake fast to read and small: in each table, compact every shard's files into
    one (a shard gets a file per batch that published into it), write a checkpoint of the log
    (a reader then reads one file, not every commit), and delete the data and log files that
    no version younger than `retain_hours` refers to (readers of an older version fail).

    Safe while owners publish (a compaction that lost a race to a publish is retried), as long
    as `retain_hours` outlasts a publish: a commit in flight has written files the log does
    not name yet, and a vacuum deletes every file the kept versions do not name.
    """
    from deltalake import DeltaTable

    done = []
    for schema, name, path in lake_tables(lake):
        started = time.monotonic()
        before = len(DeltaTable(path).file_uris())
        # each attempt on the newest version: a publish may have committed since
        _retried(lambda: DeltaTable(path).optimize.compact(), attempts, 0.05)  # noqa: B023
        table = DeltaTable(path)
        after = len(table.file_uris())  # a vacuum removes no file of the current version
        table.create_checkpoint()
        removed = table.vacuum(
            retention_hours=retain_hours, dry_run=False, enforce_retention_duration=False
        )
        table.cleanup_metadata()
        seconds = round(time.monotonic() - started, 3)
        done.append(Maintained(f"{schema}.{name}", before, after, len(removed), seconds))
    return done
