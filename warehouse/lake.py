"""The shared lake: every owner's core tables and marts as Delta tables partitioned by owner.

Each owner keeps its own warehouse file (one writer, reconciled on its own). After a refresh the
owner's `core` and `marts` tables are published into `<lake>/<schema>/<table>`, one Delta table
per warehouse table with an `owner` column, replacing that owner's partition only
(`predicate="owner = '...'"`): many owners' processes publish at once with optimistic
concurrency, and a commit that lost a race is retried (delta-rs' CommitFailedError).

`open_lake` gives a DuckDB connection with every lake table as a view under its schema
(`core.transactions` holds every owner's rows) and the household views (`household.*`).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import orjson

if TYPE_CHECKING:
    import pyarrow as pa

PUBLISHED_SCHEMAS = ("core", "marts")
_OWNER = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")


@dataclass(frozen=True)
class Published:
    """What one owner's publish wrote: tables committed (those that changed), their rows,
    commit retries, seconds."""

    owner: str
    tables: int
    rows: int
    retries: int
    seconds: float

    def to_json(self) -> dict[str, object]:
        return {
            "owner": self.owner,
            "tables": self.tables,
            "rows": self.rows,
            "retries": self.retries,
            "seconds": self.seconds,
        }


def publish(warehouse: Path, lake: Path, owner: str, *, attempts: int = 20) -> Published:
    """Publish the owner's core tables and marts into the lake, replacing its partition."""
    from deltalake.exceptions import CommitFailedError

    if not _OWNER.match(owner):
        raise ValueError(f"owner name {owner!r} is not a plain name (a-z, 0-9, '-', '_')")
    started = time.monotonic()
    con = duckdb.connect(str(warehouse), read_only=True)
    rows = retries = written = 0
    marks = _marks(lake, owner)
    try:
        con.execute("SET TimeZone = 'UTC'")  # Delta keeps timestamps in UTC
        tables = _tables(con)
        for schema, name in tables:
            target = lake / schema / name
            # a table whose rows did not change since this owner last published it is not
            # committed again (most of a daily refresh's tables): a commit costs ~15 ms of CPU
            mark = _fingerprint(con, schema, name)
            if marks.get(f"{schema}.{name}") == mark and (target / "_delta_log").is_dir():
                continue
            data = con.sql(_select(con, schema, name, owner)).to_arrow_table()
            rows += data.num_rows
            written += 1
            for attempt in range(attempts):
                try:
                    _write(target, data, owner)
                    break
                except CommitFailedError:
                    # another owner committed first: read the new version and try again
                    if attempt == attempts - 1:
                        raise
                    retries += 1
                    time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
            marks[f"{schema}.{name}"] = mark
    finally:
        con.close()
    _save_marks(lake, owner, marks)
    return Published(owner, written, rows, retries, round(time.monotonic() - started, 3))


def _fingerprint(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> str:
    """The table's published rows, order aside: their count and the sum of their hashes."""
    cols = ", ".join(f'"{c}"' for c, _ in _columns(con, schema, name))
    query = f'SELECT count(*), sum(hash(t)) FROM (SELECT {cols} FROM "{schema}"."{name}") t'
    found = con.execute(query).fetchone() or (0, 0)
    return f"{found[0]}:{found[1]}"


# which refresh last read a row: the owner's own bookkeeping, and it changes on every
# refresh, so publishing it would rewrite every table every day
_BOOKKEEPING = {"refresh_id", "first_seen_refresh", "last_seen_refresh"}


def _columns(con: duckdb.DuckDBPyConnection, schema: str, name: str) -> list[tuple[str, str]]:
    cols = con.execute(f'DESCRIBE "{schema}"."{name}"').fetchall()
    return [(str(c), str(t)) for c, t, *_ in cols if c not in _BOOKKEEPING]


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


def _write(target: Path, data: pa.Table, owner: str) -> None:
    from deltalake import write_deltalake

    if (target / "_delta_log").is_dir():
        write_deltalake(
            target,
            data,
            mode="overwrite",
            predicate=f"owner = '{owner}'",
            partition_by=["owner"],
            schema_mode="merge",
        )
    else:  # the first owner creates it (a racing second one retries as an overwrite)
        target.mkdir(parents=True, exist_ok=True)
        write_deltalake(target, data, mode="append", partition_by=["owner"])


def _tables(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    found = con.execute(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema IN ('core', 'marts') ORDER BY 1, 2"
    ).fetchall()
    return [(str(s), str(t)) for s, t in found]


def _select(con: duckdb.DuckDBPyConnection, schema: str, name: str, owner: str) -> str:
    """The table with its owner first, without the refresh bookkeeping; UUIDs as text (Delta
    has no UUID type)."""
    parts = [
        f'CAST("{c}" AS VARCHAR) AS "{c}"' if t.upper() == "UUID" else f'"{c}"'
        for c, t in _columns(con, schema, name)
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
    import polars as pl

    tables = lake_tables(lake)
    if not tables:
        raise FileNotFoundError(
            f"the lake {lake} holds no tables yet: run `centsync refresh --all` (or "
            "`centsync --owner NAME refresh`) first"
        )
    con = duckdb.connect()
    for schema in (*PUBLISHED_SCHEMAS, "household"):
        con.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    for schema, name, path in tables:
        if only is not None and (schema, name) not in only:
            continue
        # a Polars scan, which DuckDB reads through Arrow: over 10 M rows 3.4 s against 8.9 s
        # over delta-rs' pyarrow dataset on the loaded machine (docs/scale.md)
        handle = f"lake_{schema}_{name}"
        con.register(handle, pl.scan_delta(str(path)))
        con.execute(f'CREATE VIEW "{schema}"."{name}" AS SELECT * FROM "{handle}"')
    present = {(s, t) for s, t, _ in tables if only is None or (s, t) in only}
    if ("core", "transactions") in present:
        _household_views(con, list(household), list(accounts), present)
    return con


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
