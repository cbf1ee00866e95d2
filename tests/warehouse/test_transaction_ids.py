"""core.transactions has no key index (migration 015): its ids stay unique by the loads' check."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest

from centsync.warehouse import Warehouse, migrate

from .builders import at_version, transactions

MONTHS = ["2024-01", "2024-02", "2024-03"]


def _rows(wh: Warehouse) -> list[tuple[object, ...]]:
    return wh.con.execute(
        "SELECT c.id, c.amount, c.booked_at, r.raw::VARCHAR FROM core.transactions c "
        "JOIN raw.transactions r USING (id) ORDER BY c.id"
    ).fetchall()


def test_an_id_staged_twice_is_refused_and_nothing_changes(wh: Warehouse) -> None:
    wh.replace_months(MONTHS, transactions(40, months=MONTHS, seed=1))
    before = _rows(wh)
    new = transactions(30, months=MONTHS, seed=2)
    with wh.stage_transactions() as stage:
        stage.add(new.slice(0, 20))
        stage.add(new.slice(10, 20))  # ten rows again, in another batch (validation is per batch)
        with pytest.raises(duckdb.ConstraintException, match="10 id"):
            stage.commit(MONTHS, reason="stream")
    assert _rows(wh) == before


def test_a_row_moved_between_months_is_moved_not_doubled(wh: Warehouse) -> None:
    old = transactions(60, months=MONTHS, seed=3)
    wh.replace_months(MONTHS, old)
    moved = old.filter(pl.col("booked_at").dt.month() == 1).head(3)
    moved = moved.with_columns(pl.col("booked_at").dt.offset_by("2mo"))
    march = old.filter(pl.col("booked_at").dt.month() == 3)
    result = wh.replace_months(["2024-03"], pl.concat([march, moved]))
    assert result.moved_from == ["2024-01"]
    total, distinct = wh.con.execute(
        "SELECT count(*), count(DISTINCT id) FROM core.transactions"
    ).fetchall()[0]
    assert total == distinct == 60
    raw_total, raw_distinct = wh.con.execute(
        "SELECT count(*), count(DISTINCT id) FROM raw.transactions"
    ).fetchall()[0]
    assert raw_total == raw_distinct == 60


def test_015_rebuilds_the_ledger_without_its_key_keeping_rows_order_and_views(
    db_path: Path,
) -> None:
    con = duckdb.connect(str(db_path))
    try:
        # a warehouse as version 14 left it, with a ledger
        at_version(con, 14)
        frame = transactions(500, months=MONTHS, seed=4).sort("booked_at", descending=True)
        con.register("f", frame)
        con.execute(
            "INSERT INTO core.transactions SELECT id::UUID, account_id::UUID, concept, amount, "
            "booked_at, date_trunc('month', booked_at)::DATE, type, category_id::UUID, "
            "expense_goal_id::UUID, created_at, updated_at, 'r1' FROM f"
        )
        before = con.execute("SELECT * FROM core.transactions").fetchall()  # as stored
        comments = con.execute(
            "SELECT column_name, comment FROM duckdb_columns() "
            "WHERE schema_name = 'core' AND table_name = 'transactions' AND column_name <> 'id'"
        ).fetchall()
        assert migrate(con)[0] == 15
        assert con.execute("SELECT * FROM core.transactions").fetchall() == before
        kinds = con.execute(
            "SELECT constraint_type FROM duckdb_constraints() "
            "WHERE schema_name = 'core' AND table_name = 'transactions'"
        ).fetchall()
        assert ("PRIMARY KEY",) not in kinds and len(kinds) == 8  # every NOT NULL kept
        assert (
            con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE schema_name = 'core' "
                "AND table_name = 'transactions' AND column_name <> 'id'"
            ).fetchall()
            == comments
        )
        # the views over the ledger read the new table
        for view in ("core.transaction_notes", "history.transaction_timeline"):
            con.execute(f"SELECT count(*) FROM {view}").fetchall()
        assert (
            con.execute(
                "SELECT sum(transactions) FROM marts.spending_without_transfers"
            ).fetchall()[0][0]
            == frame.filter(pl.col("type") == "expense").height
        )
    finally:
        con.close()
    with Warehouse.open(db_path) as wh:  # and a load checks its ids
        wh.start_refresh(mode="full", refresh_id="r2")
        wh.replace_months(MONTHS, frame)
        assert wh.con.execute("SELECT count(DISTINCT id) FROM core.transactions").fetchall() == [
            (500,)
        ]
