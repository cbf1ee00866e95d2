"""Month replace and full replace: atomic, raw kept in step, rejections stored, state recorded."""

from __future__ import annotations

import datetime as dt
from functools import partial

import polars as pl
import pytest

from centsync.warehouse import MonthBoundsError, Warehouse

from .builders import transactions, with_raw


def _core(wh: Warehouse) -> pl.DataFrame:
    return wh.query(
        "SELECT id::VARCHAR AS id, amount, booked_at, concept FROM core.transactions ORDER BY id"
    )


def _ids(wh: Warehouse, table: str) -> set[str]:
    return {r[0] for r in wh.con.execute(f"SELECT id::VARCHAR FROM {table}").fetchall()}


def test_replace_months_lands_rows_and_raw_with_unknown_fields(wh: Warehouse) -> None:
    frame = transactions(40, months=["2024-01", "2024-02"])
    result = wh.replace_months(["2024-01", "2024-02"], frame)
    assert (result.landed, result.inserted, result.rejected) == (40, 40, 0)
    assert _ids(wh, "core.transactions") == set(frame.get_column("id"))
    assert _ids(wh, "raw.transactions") == set(frame.get_column("id"))
    kept = wh.con.execute("SELECT raw->>'unknown_field' FROM raw.transactions LIMIT 1").fetchone()
    assert kept == ("kept",)
    month = wh.con.execute("SELECT DISTINCT month FROM core.transactions ORDER BY 1").fetchall()
    assert [m[0] for m in month] == [dt.date(2024, 1, 1), dt.date(2024, 2, 1)]


def test_a_month_replace_propagates_edits_and_deletions_and_leaves_other_months(
    wh: Warehouse,
) -> None:
    jan = transactions(10, months=["2024-01"], seed=1)
    feb = transactions(10, months=["2024-02"], seed=2)
    wh.replace_months(["2024-01"], jan)
    wh.replace_months(["2024-02"], feb)
    edited = jan.slice(0, 7).with_columns(
        pl.when(pl.int_range(7) == 0).then(pl.lit(-1)).otherwise(pl.col("amount")).alias("amount")
    )
    result = wh.replace_months(["2024-01"], edited, reason="fingerprint mismatch")
    assert (result.inserted, result.updated, result.deleted) == (0, 1, 3)
    assert result.changed == 4
    assert _ids(wh, "core.transactions") == set(edited.get_column("id")) | set(feb.get_column("id"))
    assert _ids(wh, "raw.transactions") == _ids(wh, "core.transactions")
    amount = wh.con.execute(
        "SELECT amount FROM core.transactions WHERE id = ?", [edited.get_column("id")[0]]
    ).fetchone()
    assert amount == (-1,)


def test_an_empty_frame_empties_the_month(wh: Warehouse) -> None:
    jan = transactions(5, months=["2024-01"])
    wh.replace_months(["2024-01"], jan)
    result = wh.replace_months(["2024-01"], jan.clear())
    assert result.deleted == 5
    assert wh.con.execute("SELECT count(*) FROM core.transactions").fetchone() == (0,)
    assert wh.con.execute("SELECT count(*) FROM raw.transactions").fetchone() == (0,)


def test_rows_outside_the_months_are_an_error_and_nothing_changes(wh: Warehouse) -> None:
    wh.replace_months(["2024-01"], transactions(5, months=["2024-01"]))
    before = _core(wh)
    stray = pl.concat(
        [transactions(3, months=["2024-01"], seed=9), transactions(2, months=["2024-03"], seed=10)]
    )
    with pytest.raises(MonthBoundsError, match="2024-03"):
        wh.replace_months(["2024-01"], stray)
    assert _core(wh).equals(before)


def test_a_row_that_moved_month_is_moved_not_duplicated(wh: Warehouse) -> None:
    jan = transactions(3, months=["2024-01"])
    wh.replace_months(["2024-01"], jan)
    moved = jan.slice(0, 1).with_columns(pl.lit(dt.date(2024, 2, 1)).alias("booked_at"))
    result = wh.replace_months(["2024-02"], moved)
    assert result.moved_from == ["2024-01"]
    assert result.updated == 1
    assert wh.con.execute("SELECT count(*) FROM core.transactions").fetchone() == (3,)
    assert wh.months_present() == ["2024-01", "2024-02"]


def test_a_failure_mid_load_leaves_the_previous_state_whole(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    wh.replace_months(["2024-01"], transactions(20, months=["2024-01"], seed=1))
    before_core = _core(wh)
    before_raw = _ids(wh, "raw.transactions")
    before_state = wh.month_state()

    def boom(src: str, refresh_id: str) -> None:
        raise RuntimeError("disk full, say")

    # The delete has already run when the core insert fails: the rollback must undo it.
    monkeypatch.setattr(wh, "_insert_core_transactions", boom)
    with pytest.raises(RuntimeError, match="disk full"):
        wh.replace_months(["2024-01"], transactions(20, months=["2024-01"], seed=2))
    assert _core(wh).equals(before_core)
    assert _ids(wh, "raw.transactions") == before_raw
    assert wh.month_state().equals(before_state)


def test_rejected_rows_are_stored_with_reasons_and_the_rest_lands(wh: Warehouse) -> None:
    frame = transactions(10, months=["2024-01"])
    frame = with_raw(
        frame.with_columns(
            pl.when(pl.int_range(10) < 2)
            .then(pl.lit("refund"))
            .otherwise(pl.col("type"))
            .alias("type")
        )
    )
    result = wh.replace_months(["2024-01"], frame)
    assert (result.landed, result.rejected) == (8, 2)
    rejected = wh.rejected_rows("r1")
    assert rejected.height == 2
    assert set(rejected.get_column("entity")) == {"transactions"}
    assert all("type: not expense/income/transfer" in r for r in rejected.get_column("reason"))
    record = wh.con.execute("SELECT record->>'type' FROM raw.rejected_rows LIMIT 1").fetchone()
    assert record == ("refund",)


def test_malformed_raw_json_is_rejected_not_fatal(wh: Warehouse) -> None:
    frame = transactions(3, months=["2024-01"])
    raws = frame.get_column("raw").to_list()
    raws[0] = '{"id": broken}'
    frame = frame.with_columns(pl.Series("raw", raws))
    result = wh.replace_months(["2024-01"], frame)
    assert (result.landed, result.rejected) == (2, 1)
    assert wh.rejected_rows().get_column("reason")[0] == "raw: not valid JSON"


def test_replace_all_replaces_the_whole_ledger(wh: Warehouse) -> None:
    wh.replace_months(["2023-12"], transactions(5, months=["2023-12"], seed=3))
    full = transactions(30, months=["2024-01", "2024-02"], seed=4)
    result = wh.replace_all_transactions(full)
    assert (result.inserted, result.deleted) == (30, 5)
    assert wh.months_present() == ["2024-01", "2024-02"]
    assert _ids(wh, "raw.transactions") == set(full.get_column("id"))
    state = wh.month_state()
    assert state.filter(pl.col("month") == "2023-12").get_column("read_rows").to_list() == [0]


def test_month_reads_and_state_record_what_was_read_and_why(wh: Warehouse) -> None:
    wh.set_meta("timezone", "Europe/Madrid")
    wh.replace_months(
        ["2024-01", "2024-02"], transactions(10, months=["2024-01"]), reason="hot window"
    )
    state = wh.month_state()
    assert state.get_column("month").to_list() == ["2024-01", "2024-02"]
    assert state.get_column("read_rows").to_list() == [10, 0]
    assert set(state.get_column("read_reason")) == {"hot window"}
    assert set(state.get_column("read_timezone")) == {"Europe/Madrid"}
    reads = wh.query("SELECT * FROM ops.month_reads")
    assert reads.height == 2
    assert wh.stats.months_reread[0] == {"month": "2024-01", "reason": "hot window"}


def test_a_batch_packs_months_and_the_later_read_of_a_month_wins(wh: Warehouse) -> None:
    jan = transactions(10, months=["2024-01"], seed=21)
    feb = transactions(10, months=["2024-02"], seed=22)
    jan_again = transactions(4, months=["2024-01"], seed=23)
    with wh.batched(rows=1_000) as batch:
        batch.add(["2024-01"], jan, reason="first sync")
        batch.add(["2024-02"], feb, reason="first sync")
        assert wh.months_present() == []  # nothing written until the batch fills or closes
        batch.add(["2024-01"], jan_again, reason="hot window")
    assert _ids(wh, "core.transactions") == set(jan_again.get_column("id")) | set(
        feb.get_column("id")
    )
    assert [r.landed for r in batch.results] == [20, 4]
    state = wh.month_state().select("month", "read_reason").rows()
    assert state == [("2024-01", "hot window"), ("2024-02", "first sync")]


def test_a_batch_is_not_written_when_the_block_fails(wh: Warehouse) -> None:
    with pytest.raises(RuntimeError), wh.batched() as batch:
        batch.add(["2024-01"], transactions(5))
        raise RuntimeError("stop")
    assert wh.months_present() == []


def test_a_month_the_server_no_longer_has_is_emptied_by_a_bare_empty_frame(wh: Warehouse) -> None:
    wh.replace_months(["2024-01"], transactions(4, months=["2024-01"]))
    result = wh.replace_months(["2024-01"], pl.DataFrame())
    assert (result.landed, result.deleted) == (0, 4)
    assert wh.months_present() == []


def _refresh_ids(wh: Warehouse, table: str) -> dict[str, str]:
    rows = wh.con.execute(f"SELECT id::VARCHAR, refresh_id FROM {table}").fetchall()
    return dict(rows)


@pytest.mark.parametrize("whole", [False, True], ids=["months", "whole ledger"])
def test_a_replace_rewrites_only_what_changed_and_repairs_a_damaged_copy(
    wh: Warehouse, whole: bool
) -> None:
    jan = with_raw(transactions(12, months=["2024-01"], seed=5))
    wh.replace_months(["2024-01"], jan)
    ids = jan.get_column("id").to_list()
    # damage: a row gone from core only, a payload gone from raw only, a raw row of an id the
    # service no longer has (its core row gone too)
    wh.con.execute("DELETE FROM core.transactions WHERE id = ?", [ids[0]])
    wh.con.execute("DELETE FROM raw.transactions WHERE id = ?", [ids[1]])
    wh.con.execute("DELETE FROM core.transactions WHERE id = ?", [ids[2]])
    # the service's changes: an amount (row 3), a field core does not keep (row 4), row 2 gone
    raws = jan.get_column("raw").to_list()
    raws[4] = raws[4].replace('"kept"', '"changed"')
    later = (
        jan.with_columns(
            pl.when(pl.col("id") == ids[3]).then(-7).otherwise(pl.col("amount")).alias("amount")
        )
        .with_columns(pl.Series("raw", raws, dtype=pl.String))
        .filter(pl.col("id") != ids[2])
    )
    later = later.with_columns(  # row 3's payload says what its amount now is
        pl.when(pl.col("id") == ids[3])
        .then(pl.col("raw").str.replace(r'"amount":-?\d+', '"amount":-7'))
        .otherwise(pl.col("raw"))
        .alias("raw")
    )
    wh.refresh_id = "r2"
    replace = wh.replace_all_transactions if whole else partial(wh.replace_months, ["2024-01"])
    result = replace(later)
    # the copy is exact again: core and raw hold the service's rows, each once
    assert _ids(wh, "core.transactions") == set(later.get_column("id"))
    assert wh.con.execute(
        "SELECT count(*), count(DISTINCT id) FROM raw.transactions"
    ).fetchone() == (
        11,
        11,
    )
    assert _ids(wh, "raw.transactions") == set(later.get_column("id"))
    payload = wh.con.execute(
        "SELECT raw->>'unknown_field' FROM raw.transactions WHERE id = ?", [ids[4]]
    ).fetchone()
    assert payload == ("changed",)
    amount = wh.con.execute("SELECT amount FROM core.transactions WHERE id = ?", [ids[3]])
    assert amount.fetchone() == (-7,)
    # only the rows that changed (or were damaged) were written by the later refresh
    rewritten = {ids[0], ids[1], ids[3], ids[4]}
    for table in ("core.transactions", "raw.transactions"):
        written = _refresh_ids(wh, table)
        assert {i for i, r in written.items() if r == "r2"} == rewritten, table
        assert {i for i, r in written.items() if r == "r1"} == set(ids) - rewritten - {ids[2]}
    # counts: row 0 is new to core, row 3 differs in a compared column (row 4's payload only
    # and row 1's missing payload are rewritten without counting as updates), row 2 was gone
    # from core already
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 0)
