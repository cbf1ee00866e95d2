"""A big ledger's marts and checks run on a scan of its Parquet copy on Polars' streaming
engine (memory bounded by row groups, issue 46): the same marts, checks and verdict as the
frame a household's run on, row for row."""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from centsync.pipelines import reconcile as pipeline
from centsync.pipelines.refresh.steps import Refresher
from centsync.transform import analyst_marts as analyst_rules
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


def _reconciled_again(warehouse: Path) -> None:
    """A reconciliation of `warehouse` (offline) agrees and writes every mart as it was."""
    names = (*mart_rules.MART_NAMES, *analyst_store.ANALYST_TABLES)
    con = duckdb.connect(str(warehouse))
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
    _reconciled_again(http_env.warehouse)


def test_a_refresh_copies_a_big_ledger_while_it_lands_the_accounts(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The refresh starts the marts' copy once its ledger is final, on a thread of its own, and
    lands the accounts and the service's aggregates meanwhile; the marts are those a
    reconciliation of the published warehouse makes."""
    monkeypatch.setattr(store, "SCAN_ROWS", 10)  # this household counts as big
    events: list[tuple[str, str, bool]] = []
    asked = threading.Event()
    write, after = store._write_copy, Refresher._after_ledger

    def copy(con: duckdb.DuckDBPyConnection, path: Path) -> None:
        # the refresh's copy waits here until the accounts are being asked for: made in line,
        # before or after them, it would wait in vain
        events.append(("copy", threading.current_thread().name, asked.wait(timeout=20)))
        write(con, path)

    def after_ledger(self: Refresher, today: dt.date) -> None:
        events.append(("accounts", threading.current_thread().name, True))
        asked.set()
        after(self, today)

    monkeypatch.setattr(store, "_write_copy", copy)
    monkeypatch.setattr(Refresher, "_after_ledger", after_ledger)
    summary = http_env.refresh()
    assert summary["verdict"] == "agree"
    main = threading.main_thread().name
    assert sorted(events) == [("accounts", main, True), ("copy", "centsync-ledger-copy", True)]
    _reconciled_again(http_env.warehouse)  # its copy made in line
    assert events[2:] == [("copy", main, True)]


def test_no_mart_depends_on_the_ledgers_row_order(http_env: HttpEnv) -> None:
    """The ledger's rows are in the order its windows landed, which differs from one warehouse
    to the next (and a scan of its copy may read its row groups in any order): every mart, the
    service's and the analysts', is the same, row for row, from the ledger shuffled."""
    http_env.refresh()
    con = duckdb.connect(str(http_env.warehouse))
    try:
        frame = store.transactions(con)
        ledger = analyst_store.ledger(con)
        accounts = analyst_store.accounts(con)
        rid = store.latest_refresh(con)
        assert rid is not None
        today = pipeline.service_today(store.server_aggregates(con, rid))
        as_read = _marts(con, frame, "in-memory")
        as_built = analyst_rules.build(
            analyst_rules.LedgerFrames(ledger.lazy(), accounts.lazy(), today)
        )
        assert as_built["recurring_transactions"].height and as_built["transfer_pairs"].height
        for seed in (1, 2, 3):
            shuffled = _marts(con, frame.sample(fraction=1.0, shuffle=True, seed=seed), "streaming")
            for name in mart_rules.MART_NAMES:
                assert_frame_equal(shuffled[name], as_read[name], check_row_order=True)
            rows = ledger.sample(fraction=1.0, shuffle=True, seed=seed).lazy()
            built = analyst_rules.build(analyst_rules.LedgerFrames(rows, accounts.lazy(), today))
            for name, mart in built.items():
                assert_frame_equal(mart, as_built[name], check_row_order=True)
    finally:
        con.close()


def test_a_refresh_stopped_while_the_copy_runs_leaves_nothing_behind(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C while the accounts are landed and the copy is being made: the copy is stopped
    (DuckDB's interrupt), its folder removed, the refresh exits as interrupted, and the next
    one agrees."""
    write = store._write_copy
    http_env.refresh()
    monkeypatch.setattr(store, "SCAN_ROWS", 10)  # this household counts as big
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    started = threading.Event()
    stops: list[BaseException] = []
    after = Refresher._after_ledger

    def copy(con: duckdb.DuckDBPyConnection, path: Path) -> None:
        # a copy that would take minutes: only DuckDB's interrupt ends it
        started.set()
        try:
            con.execute("SELECT sum(i) FROM range(1_000_000_000_000) t(i)").fetchall()
        except BaseException as exc:
            stops.append(exc)
            raise

    def stopped(self: Refresher, today: dt.date) -> None:
        assert started.wait(timeout=20)  # the copy has begun
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_write_copy", copy)
    monkeypatch.setattr(Refresher, "_after_ledger", stopped)
    code, _ = http_env.cli("refresh", "--json")
    assert code == 130
    assert len(stops) == 1 and "interrupt" in repr(stops[0]).lower()
    assert [t.name for t in threading.enumerate() if t.name == "centsync-ledger-copy"] == []
    assert list(temp.iterdir()) == []
    monkeypatch.setattr(Refresher, "_after_ledger", after)
    monkeypatch.setattr(store, "_write_copy", write)
    assert http_env.refresh()["verdict"] == "agree"
    assert list(temp.iterdir()) == []
