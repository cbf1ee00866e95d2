"""Frames in and out of DuckDB through the Arrow C stream (`warehouse/frames.py`): the same
frames pyarrow's route gave, a registered frame read any number of times, and no pyarrow."""

from __future__ import annotations

import subprocess
import sys
import uuid

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from centsync.warehouse import frames

EVERY_TYPE = """
SELECT '0b1f3c1e-5d1a-4c1e-9a51-6f0f1d9e2b11'::UUID AS u, 12.34::DECIMAL(18, 2) AS d,
       TIMESTAMPTZ '2026-11-28 10:11:12.345+00' AS ts, TIMESTAMP '2026-11-28 10:11:12' AS t,
       DATE '2026-11-28' AS day, 'b'::mood AS e, [1, 2] AS l, {'x': 1, 'y': 'z'} AS s,
       'text' AS v, 1::HUGEINT AS h, NULL::VARCHAR AS n, '{"a": 1}'::JSON AS j,
       -8377::BIGINT AS cents, 1::TINYINT AS ti, 1.5::DOUBLE AS f, true AS bo, 'ab'::BLOB AS bl
FROM range(3)
"""


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'; CREATE TYPE mood AS ENUM ('a', 'b')")
    return con


def test_a_query_reads_as_pyarrows_route_read_it(con: duckdb.DuckDBPyConnection) -> None:
    pa = pytest.importorskip("pyarrow")  # the route it replaces, to compare with
    got = frames.frame(con, EVERY_TYPE)
    before = pl.from_arrow(con.sql(EVERY_TYPE).to_arrow_table())
    assert isinstance(before, pl.DataFrame) and isinstance(pa.Table, type)
    assert got.schema == before.schema
    assert_frame_equal(got, before)
    assert got.height == 3 and got["cents"].to_list() == [-8377] * 3


def test_parameters_an_empty_result_and_a_half_read_result(
    con: duckdb.DuckDBPyConnection,
) -> None:
    got = frames.frame(con, "SELECT i, i * ? AS twice FROM range(5) r(i) WHERE i >= ?", [2, 3])
    assert got.to_dict(as_series=False) == {"i": [3, 4], "twice": [6, 8]}
    empty = frames.frame(con, "SELECT 1 AS x, 'a' AS y WHERE false")
    assert empty.height == 0 and empty.schema == pl.Schema({"x": pl.Int32, "y": pl.String})
    con.execute("SELECT * FROM range(10)").fetchone()  # a caller's result left half read
    assert frames.frame(con, "SELECT 42 AS x")["x"].to_list() == [42]


def test_a_registered_frame_is_read_by_every_statement_of_a_transaction(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """The stage's commit reads its registered window several times (the id check, the core
    and raw inserts, the month counts): each scan is a new stream over the same frame."""
    rows = pl.DataFrame(
        {
            "id": [str(uuid.uuid4()) for _ in range(1000)],
            "amount": list(range(1000)),
            "concept": ["a long enough concept to be kept out of line"] * 999 + [None],
        }
    )
    frames.register(con, "src", rows)
    con.execute("CREATE TABLE core (id UUID, amount BIGINT, concept VARCHAR)")
    con.execute("BEGIN")
    assert con.execute("SELECT count(*) - count(DISTINCT id) FROM src").fetchall() == [(0,)]
    con.execute("INSERT INTO core SELECT id::UUID, amount, concept FROM src WHERE amount < 500")
    con.execute("INSERT INTO core SELECT id::UUID, amount, concept FROM src WHERE amount >= 500")
    assert con.execute("SELECT sum(amount), count(concept) FROM src").fetchall() == [(499500, 999)]
    con.execute("COMMIT")
    back = frames.frame(con, "SELECT id::VARCHAR AS id, amount, concept FROM core ORDER BY amount")
    assert_frame_equal(back, rows)
    frames.register(con, "src", rows.head(2))  # a name registered again is replaced
    assert con.execute("SELECT count(*) FROM src").fetchall() == [(2,)]


def test_a_frame_outlives_the_connection_it_was_read_from() -> None:
    con = duckdb.connect()
    got = frames.frame(con, "SELECT i, 'row ' || i AS label FROM range(100000) r(i)")
    con.close()
    assert got.height == 100_000 and got["label"][-1] == "row 99999"


def test_reading_and_registering_import_no_pyarrow() -> None:
    code = (
        "import sys, duckdb, polars as pl\n"
        "from centsync.warehouse import frames\n"
        "con = duckdb.connect()\n"
        "frames.register(con, 'src', pl.DataFrame({'a': [1, 2, 3]}))\n"
        "got = frames.frame(con, 'SELECT sum(a) AS s FROM src')\n"
        "assert got['s'].to_list() == [6]\n"
        "print('pyarrow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
