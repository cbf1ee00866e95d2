"""A big ledger's marts and checks run on a scan of its Parquet copy on Polars' streaming
engine (memory bounded by row groups, issue 46): the same marts, checks and verdict as the
frame a household's run on, row for row."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from centsync.pipelines import reconcile as pipeline
from centsync.transform import marts as mart_rules
from centsync.warehouse import analyst_marts as analyst_store
from centsync.warehouse import marts as store

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _marts(con: duckdb.DuckDBPyConnection, tx: pipeline.Ledger, engine: str) -> dict:
    rid = store.latest_refresh(con)
    assert rid is not None
    core = mart_rules.CoreFrames(
        transactions=tx.lazy(),
        accounts=store.accounts(con).lazy(),
        categories=store.categories(con).lazy(),
        net_worth_history=store.net_worth_history(con).lazy(),
        today=pipeline.service_today(store.server_aggregates(con, rid)),
    )
    return mart_rules.build(core, engine=engine)  # type: ignore[arg-type]


def test_the_scan_gives_the_frames_marts_and_checks(http_env: HttpEnv, tmp_path: Path) -> None:
    http_env.refresh()
    con = duckdb.connect(str(http_env.warehouse))
    try:
        frame = store.transactions(con)
        scan = store.transactions_scan(con, tmp_path)
        order = ["booked_at", "account_id", "amount", "concept"]
        assert_frame_equal(scan.collect().sort(order), frame.sort(order))
        small, big = _marts(con, frame, "in-memory"), _marts(con, scan, "streaming")
        for name in mart_rules.MART_NAMES:
            assert_frame_equal(big[name], small[name], check_row_order=True)
        rid = store.latest_refresh(con)
        assert rid is not None
        aggregates = store.server_aggregates(con, rid)
        checks = ["check", "scope", "from_date"]
        by_frame = pipeline.compare(con, aggregates, frame).sort(checks)
        by_scan = pipeline.compare(con, aggregates, scan).sort(checks)
        assert_frame_equal(by_scan, by_frame)
        assert by_frame.height > 50
    finally:
        con.close()


def test_a_reconciliation_over_the_scan_agrees(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()
    monkeypatch.setattr(store, "SCAN_ROWS", 10)  # this household counts as big

    def whole(con: duckdb.DuckDBPyConnection) -> pl.DataFrame:
        raise AssertionError("a big ledger was read whole")

    monkeypatch.setattr(store, "transactions", whole)
    monkeypatch.setattr(analyst_store, "ledger", whole)  # the analysts' marts scan it too
    names = (*mart_rules.MART_NAMES, *analyst_store.ANALYST_TABLES)
    con = duckdb.connect(str(http_env.warehouse))
    try:
        before = {n: con.sql(f"SELECT * FROM marts.{n}").pl() for n in names}
        assert before["recurring_transactions"].height and before["transfer_pairs"].height
        outcome = pipeline.reconcile(con, source="offline")
        assert outcome.verdict == "agree"
        for name in names:
            after = con.sql(f"SELECT * FROM marts.{name}").pl()
            assert_frame_equal(after, before[name], check_row_order=False)
    finally:
        con.close()
