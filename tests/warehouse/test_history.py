"""history.transaction_versions from the month replace itself (fast: no service, no HTTP).

A first load writes no version; a re-read that changes one row, deletes one and adds one writes
exactly those (and the replaced versions, once), and the as-of macros give each state back.
The whole story over a sandbox: tests/pipelines/test_history.py.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from centsync.warehouse import Warehouse, history, ledger

from .builders import transactions, with_raw

T1 = dt.datetime(2026, 11, 1, 12, tzinfo=dt.UTC)


def _load(wh: Warehouse, rid: str, frame: pl.DataFrame, seen: dt.datetime) -> None:
    wh.start_refresh(refresh_id=rid)
    wh.note_service_clock(seen)  # as a refresh does
    wh.replace_months(["2026-10"], frame)
    wh.finish_refresh()


def _versions(wh: Warehouse) -> list[tuple[object, ...]]:
    return wh.con.execute("SELECT count(*) FROM history.transaction_versions").fetchall()


def _totals(wh: Warehouse, source: str) -> list[tuple[object, ...]]:
    """(rows, sum of amounts) of a ledger: a table or an as-of macro's call."""
    return wh.con.execute(f"SELECT count(*), sum(amount) FROM {source}").fetchall()


def test_versions_are_the_changes_and_as_of_gives_each_state_back(db_path: Path) -> None:
    first = transactions(4, months=["2026-10"])
    ids = first.get_column("id").to_list()
    amounts = first.get_column("amount").to_list()
    edited = first.filter(pl.col("id") != ids[1]).with_columns(
        amount=pl.when(pl.col("id") == ids[0]).then(-5750).otherwise(pl.col("amount"))
    )
    added = transactions(1, months=["2026-10"], seed=2)
    second = with_raw(pl.concat([edited, added], how="vertical_relaxed"))
    wh = Warehouse.open(db_path)
    try:
        _load(wh, "r1", first, T1)
        assert _versions(wh) == [(0,)]
        _load(wh, "r2", second, T1 + dt.timedelta(days=1))
        got = wh.con.execute(
            "SELECT id::VARCHAR, valid_from_refresh, kind, changed_fields, amount, valid_to_refresh "
            "FROM history.transaction_versions"
        ).fetchall()
        new = added.item(0, "id")
        assert sorted(got) == sorted(
            [
                (ids[0], "r1", "first seen", None, amounts[0], "r2"),
                (ids[1], "r1", "first seen", None, amounts[1], "r2"),
                (ids[0], "r2", "changed", ["amount"], -5750, None),
                (ids[1], "r2", "deleted", None, amounts[1], None),
                (new, "r2", "added", None, added.item(0, "amount"), None),
            ]
        )
        sums = [
            _totals(wh, f)[0]
            for f in (
                "history.ledger_as_of_refresh(1)",
                "history.ledger_as_of_refresh(2)",
                f"history.ledger_as_of('{T1 + dt.timedelta(hours=1)}')",
                f"history.ledger_as_of('{T1 + dt.timedelta(days=2)}')",
                "core.transactions",
            )
        ]
        assert sums[0] == sums[2] == (4, sum(amounts))
        assert sums[1] == sums[3] == sums[4] == (4, second.get_column("amount").sum())
        # nothing changed: a re-read writes no version
        _load(wh, "r3", second, T1 + dt.timedelta(days=2))
        assert _versions(wh) == [(5,)]
        # changed again, and the deleted row comes back: the open versions close at r4
        third = with_raw(
            pl.concat(
                [second, first.filter(pl.col("id") == ids[1])], how="vertical_relaxed"
            ).with_columns(
                amount=pl.when(pl.col("id") == ids[0]).then(-6000).otherwise(pl.col("amount"))
            )
        )
        _load(wh, "r4", third, T1 + dt.timedelta(days=3))
        got = wh.con.execute(
            "SELECT kind, valid_from_refresh, valid_to_refresh, amount "
            "FROM history.transaction_versions WHERE id IN (?, ?) AND valid_from_refresh <> 'r1' "
            "ORDER BY valid_from_refresh, kind",
            ids[:2],
        ).fetchall()
        assert got == [
            ("changed", "r2", "r4", -5750),
            ("deleted", "r2", "r4", amounts[1]),
            ("came back", "r4", None, amounts[1]),
            ("changed", "r4", None, -6000),
        ]
        then, now, core = (
            _totals(wh, f)
            for f in (
                "history.ledger_as_of_refresh(3)",
                "history.ledger_as_of_refresh(4)",
                "core.transactions",
            )
        )
        assert then == [(4, second.get_column("amount").sum())]
        assert now == core == [(5, third.get_column("amount").sum())]
        # a failed refresh is not "the last": changes by default are the last landed one's
        wh.start_refresh(refresh_id="r5")
        wh.finish_refresh("failed")
        assert history.before_last_no(wh.con) == 3
    finally:
        wh.close()


def _story(db_path: Path, *, noted: bool) -> tuple[list[tuple[object, ...]], ...]:
    """Three loads (a change, a delete, an addition, then the deleted row back); every
    version, clock and core row after them. `noted`: the session says its clock is noted
    (as a refresh's does: the replace then does not write it again)."""
    first = transactions(4, months=["2026-10"])
    ids = first.get_column("id").to_list()
    edited = first.filter(pl.col("id") != ids[1]).with_columns(
        amount=pl.when(pl.col("id") == ids[0]).then(-5750).otherwise(pl.col("amount"))
    )
    added = transactions(1, months=["2026-10"], seed=2)
    second = with_raw(pl.concat([edited, added], how="vertical_relaxed"))
    third = with_raw(
        pl.concat([second, first.filter(pl.col("id") == ids[1])], how="vertical_relaxed")
    )
    wh = Warehouse.open(db_path)
    try:
        for n, frame in enumerate((first, second, third), start=1):
            seen = T1 + dt.timedelta(days=n)
            wh.start_refresh(refresh_id=f"r{n}")
            if noted:  # as a refresh notes it
                wh.note_service_clock(seen)
            else:
                wh.service_now = seen
                history.note_clock(wh.con, f"r{n}", seen)
            wh.replace_months(["2026-10"], frame)
            wh.finish_refresh()
        return tuple(
            sorted(wh.con.execute(sql).fetchall(), key=repr)
            for sql in (
                "SELECT * FROM history.transaction_versions",
                "SELECT * FROM history.refresh_clock",
                "SELECT * FROM core.transactions",
            )
        )
    finally:
        wh.close()


def test_a_small_replace_typed_once_and_its_clock_noted_once_write_the_same_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a household's replace types its rows once into a temp table and takes the clock the
    # refresh noted; a big one reads a view and notes the clock itself: the same versions
    small = _story(tmp_path / "small.duckdb", noted=True)
    monkeypatch.setattr(ledger, "TYPED_ONCE_ROWS", 0)
    big = _story(tmp_path / "big.duckdb", noted=False)
    versions, clocks, core = small
    assert len(versions) == 6 and len(clocks) == 3 and len(core) == 5
    assert small == big
