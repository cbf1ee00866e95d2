"""A window staged batch by batch replaces its months exactly as one replace_months would."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pytest

from centsync.warehouse import MonthBoundsError, Warehouse

from .builders import transactions

MONTHS = ["2024-01", "2024-02", "2024-03"]


def _state(wh: Warehouse) -> pl.DataFrame:
    return wh.query(
        "SELECT c.*, r.raw::VARCHAR AS raw FROM core.transactions c "
        "JOIN raw.transactions r USING (id) ORDER BY id"
    ).drop("refresh_id")


def _batches(frame: pl.DataFrame, size: int) -> list[pl.DataFrame]:
    return [frame.slice(i, size) for i in range(0, frame.height, size)]


def test_staged_batches_equal_one_replace(wh: Warehouse) -> None:
    old = transactions(120, months=MONTHS, seed=1)
    new = pl.concat([old.slice(0, 80), transactions(30, months=MONTHS, seed=2)])
    wh.replace_months(MONTHS, old)
    with wh.stage_transactions() as stage:
        for part in _batches(new, 17):
            stage.add(part)
        assert stage.booked_range() == (new["booked_at"].min(), new["booked_at"].max())
        staged = stage.commit(MONTHS, reason="stream")
    streamed = _state(wh)

    wh.replace_months(MONTHS, old)
    whole = wh.replace_months(MONTHS, new, reason="stream")
    assert _state(wh).equals(streamed)
    assert (staged.landed, staged.inserted, staged.updated, staged.deleted) == (
        whole.landed,
        whole.inserted,
        whole.updated,
        whole.deleted,
    )
    assert (staged.inserted, staged.deleted) == (30, 40)


def test_reset_drops_staged_rows_and_their_rejections(wh: Warehouse) -> None:
    wh.replace_months(MONTHS, transactions(50, months=MONTHS, seed=1))
    bad = transactions(5, months=MONTHS, seed=3).with_columns(pl.lit("refund").alias("type"))
    good = transactions(20, months=MONTHS, seed=4)
    with wh.stage_transactions() as stage:
        stage.add(bad)  # a voided pass: rows and rejections are both dropped
        stage.add(transactions(40, months=MONTHS, seed=5))
        stage.reset()
        stage.add(good)
        stage.add(bad.head(2))
        result = stage.commit(MONTHS)
    assert (result.landed, result.rejected) == (20, 2)
    assert set(wh.query("SELECT id::VARCHAR AS id FROM core.transactions")["id"]) == set(good["id"])
    assert wh.rejected_rows().height == 2


def test_rows_outside_the_months_change_nothing(wh: Warehouse) -> None:
    before = transactions(30, months=MONTHS, seed=1)
    wh.replace_months(MONTHS, before)
    with wh.stage_transactions() as stage:
        stage.add(transactions(10, months=["2024-01", "2024-04"], seed=2))
        with pytest.raises(MonthBoundsError, match="2024-04"):
            stage.commit(MONTHS)
    assert set(wh.query("SELECT id::VARCHAR AS id FROM core.transactions")["id"]) == set(
        before["id"]
    )


def test_a_failed_commit_leaves_the_months_whole(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = transactions(30, months=MONTHS, seed=1)
    wh.replace_months(MONTHS, before)

    def broken(src: str, refresh_id: str) -> None:
        raise duckdb.IOException("disk full (simulated)")

    with wh.stage_transactions() as stage:
        stage.add(transactions(25, months=MONTHS, seed=2))
        monkeypatch.setattr(wh, "_insert_core_transactions", broken)
        with pytest.raises(duckdb.IOException):
            stage.commit(MONTHS)
    assert set(wh.query("SELECT id::VARCHAR AS id FROM core.transactions")["id"]) == set(
        before["id"]
    )
    assert wh.query("SELECT count(*) AS n FROM raw.transactions")["n"][0] == 30


def test_an_empty_window_empties_its_months(wh: Warehouse) -> None:
    wh.replace_months(MONTHS, transactions(30, months=MONTHS, seed=1))
    with wh.stage_transactions() as stage:
        stage.add(transactions(0, months=MONTHS))
        result = stage.commit(["2024-02"])
    assert result.deleted > 0
    months = wh.query("SELECT DISTINCT month::VARCHAR AS m FROM core.transactions ORDER BY 1")
    assert months["m"].to_list() == ["2024-01-01", "2024-03-01"]


def test_a_row_moved_from_another_month_is_moved(wh: Warehouse) -> None:
    april = transactions(5, months=["2024-04"], seed=7)
    wh.replace_months(["2024-04"], april)
    moved = april.head(1).with_columns(pl.lit(dt.date(2024, 2, 10)).alias("booked_at"))
    with wh.stage_transactions() as stage:
        stage.add(transactions(10, months=MONTHS, seed=8))
        stage.add(moved)
        result = stage.commit(MONTHS)
    assert result.moved_from == ["2024-04"]
    assert (result.inserted, result.updated, result.deleted) == (10, 1, 0)
    moved_id = moved["id"][0]
    rows = wh.con.execute(
        "SELECT booked_at FROM core.transactions WHERE id = ?::UUID", [moved_id]
    ).fetchall()
    assert rows == [(dt.date(2024, 2, 10),)]
    raws = wh.con.execute(
        "SELECT count(*) FROM raw.transactions WHERE id = ?::UUID", [moved_id]
    ).fetchall()
    assert raws == [(1,)]


def test_a_staged_row_with_malformed_raw_json_is_rejected_at_commit(wh: Warehouse) -> None:
    frame = transactions(12, months=["2024-01"])
    raws = frame.get_column("raw").to_list()
    raws[7] = '{"id": broken}'
    raws[9] = '{"concept": "\\ud800"}'  # a lone surrogate: Polars reads it, DuckDB's JSON refuses
    frame = frame.with_columns(pl.Series("raw", raws))
    with wh.stage_transactions() as stage:
        for part in _batches(frame, 5):
            stage.add(part)
        result = stage.commit(["2024-01"], reason="stream")
    assert (result.landed, result.rejected) == (10, 2)
    assert set(wh.rejected_rows().get_column("reason")) == {"raw: not valid JSON"}
    ids = set(_state(wh).get_column("id").cast(pl.String))
    assert ids == set(frame.get_column("id")) - {frame["id"][7], frame["id"][9]}
