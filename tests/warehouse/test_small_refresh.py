"""What a small refresh saves on DuckDB's fixed costs, and that it changes no result: the
optimiser off, the answers' loads in one transaction, frames registered once per level."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pytest

from centsync.warehouse import Warehouse
from centsync.warehouse.session import KEEP_REGISTERED_ROWS

from .builders import accounts, transactions


def _setting(wh: Warehouse, name: str) -> object:
    return wh.con.execute(f"SELECT current_setting('{name}')").fetchall()[0][0]


def test_a_small_refresh_runs_without_the_optimiser_and_a_big_one_with_it(wh: Warehouse) -> None:
    wh.refresh_settings(single_thread=True)
    assert (_setting(wh, "enable_optimizer"), _setting(wh, "threads")) == (False, 1)
    wh.refresh_settings(single_thread=False)
    assert _setting(wh, "enable_optimizer") is True
    assert (
        _setting(wh, "threads")
        == duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0]
    )


@pytest.fixture(params=[True, False], ids=["small (optimiser off)", "big (optimiser on)"])
def sized(request: pytest.FixtureRequest, wh: Warehouse) -> Warehouse:
    wh.refresh_settings(single_thread=request.param)
    return wh


def test_the_ledger_counts_and_moves_are_the_same_either_way(sized: Warehouse) -> None:
    wh = sized
    jan = transactions(10, months=["2024-01"], seed=1)
    assert wh.replace_months(["2024-01"], jan).inserted == 10
    edited = jan.slice(0, 7).with_columns(
        pl.when(pl.int_range(7) == 0).then(pl.lit(-1)).otherwise(pl.col("amount")).alias("amount")
    )
    again = wh.replace_months(["2024-01"], edited)
    assert (again.inserted, again.updated, again.deleted) == (0, 1, 3)
    moved = edited.slice(1, 1).with_columns(pl.lit(dt.date(2024, 2, 1)).alias("booked_at"))
    result = wh.replace_months(["2024-02"], moved)
    assert (result.moved_from, result.inserted, result.updated) == (["2024-01"], 0, 1)
    assert wh.con.execute("SELECT count(*) FROM core.transactions").fetchall() == [(7,)]


def test_the_snapshot_counts_are_the_same_either_way(sized: Warehouse) -> None:
    wh = sized
    first = accounts(3, balances=[1_000, -300, 5_000])
    assert wh.snapshot_accounts(first).inserted == 3
    wh.start_refresh(refresh_id="r2")
    second = first.head(2).with_columns(pl.Series("balance", [1_500, -300]))
    second = pl.concat([second, accounts(1, seed=99)])
    result = wh.snapshot_accounts(second)
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)


def test_loads_together_land_in_one_commit_or_not_at_all(wh: Warehouse) -> None:
    with pytest.raises(RuntimeError, match="stop"), wh.together():
        wh.snapshot_accounts(accounts(3))
        wh.load_net_worth({"currency": "EUR", "assets": 1, "liabilities": 0, "total": 1})
        raise RuntimeError("stop")
    assert wh.con.execute("SELECT count(*) FROM core.accounts").fetchall() == [(0,)]
    assert wh.con.execute("SELECT count(*) FROM server.net_worth").fetchall() == [(0,)]
    with wh.together():
        wh.snapshot_accounts(accounts(3))
        with wh.together():  # a nested one joins the outer
            wh.load_net_worth({"currency": "EUR", "assets": 1, "liabilities": 0, "total": 1})
    assert wh.con.execute("SELECT count(*) FROM core.accounts").fetchall() == [(3,)]
    assert wh.con.execute("SELECT count(*) FROM server.net_worth").fetchall() == [(1,)]
    wh.snapshot_accounts(accounts(2))  # and on its own again: its own transaction
    assert wh.con.execute("SELECT count(*) FROM core.accounts").fetchall() == [(2,)]


def _rows(wh: Warehouse, name: str) -> int:
    return int(wh.con.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])


def test_a_frame_registered_after_another_at_its_level_replaces_it(wh: Warehouse) -> None:
    small = pl.DataFrame({"a": [1, 2, 3]})
    with wh._registered(small) as outer, wh._registered(small.head(1)) as inner:
        assert outer != inner  # nested frames each keep their own name
        assert (_rows(wh, outer), _rows(wh, inner)) == (3, 1)
    with wh._registered(small.head(2)) as again:
        assert again == outer and _rows(wh, again) == 2  # the same level, the new frame
    big = pl.DataFrame({"a": range(KEEP_REGISTERED_ROWS + 1)})
    with wh._registered(big) as name:
        assert _rows(wh, name) == KEEP_REGISTERED_ROWS + 1
    with pytest.raises(duckdb.CatalogException):  # a big frame is let go at once
        _rows(wh, name)
