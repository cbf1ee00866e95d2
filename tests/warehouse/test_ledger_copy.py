"""A big ledger's Parquet copy for the marts, made on a thread of its own while the refresh goes
on (`marts.ledger_copy`, issue 46): the same rows as the copy made in line, the connection's
settings as they were once it is taken, and nothing left behind when the refresh fails."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from centsync.warehouse import Warehouse, marts

from .builders import transactions

SETTINGS = "SELECT current_setting('threads'), current_setting('memory_limit')"
ORDER = ["booked_at", "account_id", "amount", "concept"]


@pytest.fixture
def big(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A warehouse of 3,000 rows that counts as a big ledger."""
    wh.replace_months(["2024-01", "2024-02"], transactions(3_000, months=["2024-01", "2024-02"]))
    monkeypatch.setattr(marts, "SCAN_ROWS", 10)
    wh.con.execute("SET threads = 3; SET memory_limit = '160MB'")
    return wh


def _spied(monkeypatch: pytest.MonkeyPatch, *, fail: bool = False) -> list[str]:
    """The threads `marts._write_copy` runs on (raising DuckDB's I/O error with `fail`)."""
    names: list[str] = []
    write = marts._write_copy

    def spy(con: duckdb.DuckDBPyConnection, path: Path) -> None:
        names.append(threading.current_thread().name)
        if fail:
            raise duckdb.IOException("No space left on device")
        write(con, path)

    monkeypatch.setattr(marts, "_write_copy", spy)
    return names


def test_the_copy_is_made_on_its_own_thread_with_the_ledgers_rows(
    big: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = _spied(monkeypatch)
    before = big.con.execute(SETTINGS).fetchall()
    whole = marts.transactions(big.con)
    with marts.ledger_copy(big.con) as copy:
        assert copy is not None
        # meanwhile the refresh writes its other tables through its own connection
        big.set_meta("ledger.copy.test", "landed beside the copy")
        scan = copy.scan()
        assert big.con.execute(SETTINGS).fetchall() == before  # set back once taken
        assert_frame_equal(scan.collect().sort(ORDER), whole.sort(ORDER))
        folder = copy.folder
        assert (folder / marts.SCAN_FILE).exists()
        analyst = marts.analyst_scan(folder)
        assert analyst is not None and analyst.select(pl.len()).collect().item() == 3_000
    assert names == ["centsync-ledger-copy"]
    assert not folder.exists()
    assert big.get_meta("ledger.copy.test") == "landed beside the copy"
    big.con.execute("RESET threads; RESET memory_limit")


def test_a_copy_that_fails_raises_where_it_is_taken(
    big: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    _spied(monkeypatch, fail=True)
    before = big.con.execute(SETTINGS).fetchall()
    with marts.ledger_copy(big.con) as copy:
        assert copy is not None
        with pytest.raises(duckdb.IOException, match="No space left"):
            copy.scan()
        assert big.con.execute(SETTINGS).fetchall() == before
    assert not copy.folder.exists()
    big.con.execute("RESET threads; RESET memory_limit")


def test_a_refresh_that_fails_meanwhile_leaves_no_copy_thread_or_setting(
    big: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = big.con.execute(SETTINGS).fetchall()
    copies: list[marts.LedgerCopy | None] = []
    with (
        pytest.raises(RuntimeError, match="the service went away"),
        marts.ledger_copy(big.con) as c,
    ):
        copies.append(c)
        raise RuntimeError("the service went away")
    (copy,) = copies
    assert copy is not None
    assert not copy.folder.exists()
    alive = [t.name for t in threading.enumerate() if t.name == "centsync-ledger-copy"]
    assert alive == []
    assert big.con.execute(SETTINGS).fetchall() == before
    # the connection goes on working
    assert big.con.execute("SELECT count(*) FROM core.transactions").fetchall() == [(3_000,)]
    big.con.execute("RESET threads; RESET memory_limit")


def test_a_household_ledger_gets_no_copy(wh: Warehouse) -> None:
    wh.replace_months(["2024-01"], transactions(300))
    with marts.ledger_copy(wh.con) as copy:
        assert copy is None
