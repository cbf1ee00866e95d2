"""The shared lake: owners published from several processes at once lose no commit, a
re-publish replaces only its own owner's rows, and the household view nets transfers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import duckdb
import pytest

from centsync.warehouse.lake import lake_tables, open_lake, publish

OWNERS = [f"o{i}" for i in range(6)]


def _warehouse(path: Path, owner: int, rows: int) -> Path:
    """A small warehouse-shaped file: core.transactions, core.categories, one mart."""
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA core; CREATE SCHEMA marts; CREATE SCHEMA ops")
    con.execute(
        "CREATE TABLE core.transactions AS SELECT uuid() AS id, uuid() AS account_id, "
        f"(range * 100 + {owner}) * -1 AS amount, DATE '2026-01-01' + (range % 60)::INT AS booked_at, "
        "date_trunc('month', DATE '2026-01-01' + (range % 60)::INT)::DATE AS month, "
        "'expense' AS type, NULL::UUID AS category_id, now() AS updated_at "
        f"FROM range({rows})"
    )
    con.execute("CREATE TABLE core.categories (id UUID, name VARCHAR)")
    con.execute(
        "CREATE TABLE marts.net_worth_daily AS SELECT DATE '2026-03-01' AS date, "
        f"{owner * 1000}::BIGINT AS net_worth_cents"
    )
    con.execute("CREATE TABLE ops.meta AS SELECT 1 AS never_published")
    con.close()
    return path


def _publish(args: tuple[str, str, str]) -> int:
    warehouse, lake, owner = args
    return publish(Path(warehouse), Path(lake), owner).retries


def test_concurrent_publishers_lose_no_commit_and_replace_only_their_own(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    files = {o: _warehouse(tmp_path / f"{o}.duckdb", i, 50 + i) for i, o in enumerate(OWNERS)}
    jobs = [(str(files[o]), str(lake), o) for o in OWNERS]
    # threads: delta-rs commits outside the GIL, each writer racing for the next log version
    # exactly as processes do (bench/owners.py publishes from one process per owner)
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(_publish, jobs))
        list(pool.map(_publish, jobs))  # again: each owner's rows replaced, not doubled
    assert [(s, t) for s, t, _ in lake_tables(lake)] == [
        ("core", "categories"),
        ("core", "transactions"),
        ("marts", "net_worth_daily"),
    ]  # ops.* stays in the owner's warehouse
    con = open_lake(lake)
    counts = con.execute(
        "SELECT owner, count(*), sum(amount) FROM core.transactions GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert counts == [
        (o, 50 + i, -sum(r * 100 + i for r in range(50 + i))) for i, o in enumerate(OWNERS)
    ]
    # one owner's warehouse changes: its re-publish replaces its rows, nobody else's
    con.close()
    _warehouse(tmp_path / "o2b.duckdb", 2, 7)
    publish(tmp_path / "o2b.duckdb", lake, "o2")
    con = open_lake(lake)
    after = dict(con.execute("SELECT owner, count(*) FROM core.transactions GROUP BY 1").fetchall())
    assert after == {o: (7 if o == "o2" else 50 + i) for i, o in enumerate(OWNERS)}
    assert con.execute("SELECT * FROM household.net_worth_daily").fetchall() == [
        (date(2026, 3, 1), 15_000, 6)
    ]


def test_transfers_between_owners_net_out_and_own_transfers_do_not_pair(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    legs = {
        # a and b: a pays b 500 (expense / income); a also moves 900 between its own accounts,
        # and b happens to have a +900 income the same day: not a transfer between them
        "a": [(-500, "expense"), (-900, "transfer"), (900, "transfer"), (-70, "expense")],
        "b": [(500, "income"), (900, "income"), (70, "expense")],
    }
    for owner, rows in legs.items():
        path = tmp_path / f"{owner}.duckdb"
        con = duckdb.connect(str(path))
        con.execute("CREATE SCHEMA core; CREATE SCHEMA marts")
        con.execute(
            "CREATE TABLE core.transactions (id VARCHAR, account_id VARCHAR, amount BIGINT, "
            "booked_at DATE, month DATE, type VARCHAR, category_id VARCHAR)"
        )
        for i, (amount, kind) in enumerate(rows):
            con.execute(
                "INSERT INTO core.transactions VALUES (?, 'acc', ?, DATE '2026-02-03', "
                "DATE '2026-02-01', ?, NULL)",
                [f"{owner}{i}", amount, kind],
            )
        con.execute("CREATE TABLE core.categories (id VARCHAR, name VARCHAR)")
        con.execute("CREATE TABLE marts.net_worth_daily (date DATE, net_worth_cents BIGINT)")
        con.close()
        publish(path, lake, owner)
    con = open_lake(lake)
    between = con.execute(
        "SELECT owner, amount FROM household.transactions WHERE between_owners ORDER BY 1"
    ).fetchall()
    assert between == [("a", -500), ("b", 500)]
    flow = con.execute(
        "SELECT income_cents, spending_cents, between_owners_cents FROM household.cash_flow_by_month"
    ).fetchall()
    # income: b's 900 only; spending: a's -70 and b's refund +70; 500 moved between them
    assert flow == [(900, 0, -500)]
    # the household can be narrowed to some owners
    only_a = open_lake(lake, household=["a"])
    assert only_a.execute(
        "SELECT count(*) FILTER (between_owners) FROM household.transactions"
    ).fetchone() == (0,)


def test_an_empty_lake_and_a_bad_owner_name_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="refresh --all"):
        open_lake(tmp_path / "none")
    with pytest.raises(ValueError, match="not a plain name"):
        publish(tmp_path / "x.duckdb", tmp_path / "lake", "o'wner")
