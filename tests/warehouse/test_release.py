"""A checkpoint gives the memory DuckDB held for the rows back (`instances.release`, issue 46).

After a big load and its checkpoint DuckDB keeps the blocks cached up to its memory limit
and its allocator keeps what it freed: a first sync of 1,000,000 rows, or the Parquet copy
the marts scan, left about 90 MB of the process idle. `checkpoint` now evicts them and sets
the limit back as it was; nothing in the file changes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
import polars as pl
import pytest

from centsync.warehouse import Warehouse, marts
from centsync.warehouse.instances import release
from centsync.warehouse.session import checkpoint

from .builders import transactions

ROWS = 600_000
FLOOR = 8 * 1024 * 1024  # the limit release() sets for a moment


def _held(con: duckdb.DuckDBPyConnection) -> int:
    (held,) = con.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()").fetchall()[0]
    return int(held)


def _loaded(path: Path) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(str(path))
    con.execute("SET memory_limit = '256MB'; SET threads = 1")
    con.execute(
        "CREATE TABLE t AS SELECT i, md5(i::VARCHAR) || md5((i + 1)::VARCHAR) AS s FROM range(?) r(i)",
        [ROWS],
    )
    return con


def test_checkpoint_gives_back_the_cached_blocks_and_keeps_the_limit(tmp_path: Path) -> None:
    con = _loaded(tmp_path / "w.duckdb")
    con.execute("CHECKPOINT")
    con.execute("SELECT max(s) FROM t").fetchall()  # every block read, cached
    cached = _held(con)
    limit = con.execute("SELECT current_setting('memory_limit')").fetchall()
    checkpoint(con)
    assert cached > 2 * FLOOR  # what a checkpoint alone leaves held
    assert _held(con) <= FLOOR, (cached, _held(con))
    assert con.execute("SELECT current_setting('memory_limit')").fetchall() == limit
    assert con.execute("SELECT count(*), count(DISTINCT s) FROM t").fetchall() == [(ROWS, ROWS)]


@pytest.mark.parametrize("limit", ["160MB", "256MB", "3GB", "100MB", "18.8GiB", "5000KiB"])
def test_release_sets_the_limit_back_as_it_was_shown(limit: str) -> None:
    con = duckdb.connect()
    con.execute(f"SET memory_limit = '{limit}'")
    shown = con.execute("SELECT current_setting('memory_limit')").fetchall()
    for _ in range(4):  # the same however often
        release(con)
        assert con.execute("SELECT current_setting('memory_limit')").fetchall() == shown


def test_the_ledger_copy_gives_its_memory_back_and_keeps_the_threads(wh: Warehouse) -> None:
    """The marts' Parquet copy runs on one thread and releases DuckDB's cache after it; the
    connection's threads and memory limit are as they were."""
    wh.replace_months(["2024-01", "2024-02"], transactions(3_000, months=["2024-01", "2024-02"]))
    wh.con.execute("SET threads = 3; SET memory_limit = '160MB'")
    settings = "SELECT current_setting('threads'), current_setting('memory_limit')"
    before = wh.con.execute(settings).fetchall()
    folder = Path(tempfile.mkdtemp())
    scan = marts.transactions_scan(wh.con, folder)
    assert scan.select(pl.len()).collect().item() == 3_000
    assert wh.con.execute(settings).fetchall() == before
    wh.con.execute("RESET threads; RESET memory_limit")
