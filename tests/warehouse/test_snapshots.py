"""Snapshots replace the current tables and append one history row per refresh; aggregates land."""

from __future__ import annotations

import random

import polars as pl

from centsync.warehouse import Warehouse

from .builders import accounts, uid, with_raw


def _connections(n: int = 2) -> pl.DataFrame:
    rng = random.Random(3)
    return with_raw(
        pl.DataFrame(
            {
                "id": [uid(rng) for _ in range(n)],
                "provider": ["bankfeed_eu"] * n,
                "institution": ["Bank"] * n,
                "status": ["active"] * n,
                "last_synced_at": ["2024-01-01T00:00:00.000Z"] * n,
                "account_ids": [[uid(rng)] for _ in range(n)],
            }
        )
    )


def test_accounts_snapshots_append_history_and_net_worth_per_refresh(wh: Warehouse) -> None:
    first = accounts(3, balances=[1_000, -300, 5_000])
    r1 = wh.snapshot_accounts(first)
    assert (r1.landed, r1.inserted) == (3, 3)
    wh.start_refresh(refresh_id="r2")
    second = first.with_columns(pl.Series("balance", [1_500, -300, 5_000]))
    r2 = wh.snapshot_accounts(second)
    assert (r2.inserted, r2.updated, r2.deleted) == (0, 1, 0)
    assert wh.con.execute("SELECT count(*) FROM core.accounts").fetchone() == (3,)
    assert wh.con.execute("SELECT count(*) FROM history.accounts").fetchone() == (6,)
    nw = wh.query(
        "SELECT refresh_id, assets, liabilities, net_worth FROM history.net_worth ORDER BY 1"
    )
    assert nw.rows() == [("r1", 6_000, 300, 5_700), ("r2", 6_500, 300, 6_200)]


def test_snapshotting_twice_in_one_refresh_keeps_one_history_row(wh: Warehouse) -> None:
    wh.snapshot_accounts(accounts(2))
    wh.snapshot_accounts(accounts(2))
    assert wh.con.execute("SELECT count(*) FROM history.accounts").fetchone() == (2,)
    assert wh.con.execute("SELECT count(*) FROM history.net_worth").fetchone() == (1,)


def test_a_vanished_account_leaves_core_but_stays_in_history(wh: Warehouse) -> None:
    frame = accounts(3)
    wh.snapshot_accounts(frame)
    wh.start_refresh(refresh_id="r2")
    result = wh.snapshot_accounts(frame.head(2))
    assert result.deleted == 1
    assert wh.con.execute("SELECT count(*) FROM core.accounts").fetchone() == (2,)
    assert wh.con.execute("SELECT count(*) FROM raw.accounts").fetchone() == (2,)
    assert wh.con.execute("SELECT count(DISTINCT id) FROM history.accounts").fetchone() == (3,)


def test_accounts_without_optional_fields_land(wh: Warehouse) -> None:
    frame = accounts(2).drop("connection_id", "institution", "updated_at")
    assert wh.snapshot_accounts(frame).landed == 2


def test_connections_and_sync_status_snapshot(wh: Warehouse) -> None:
    conns = _connections()
    assert wh.snapshot_connections(conns).landed == 2
    ids = wh.con.execute("SELECT account_ids FROM core.connections").fetchall()
    assert all(len(r[0]) == 1 for r in ids)
    status = with_raw(
        pl.DataFrame(
            {
                "connection_id": conns.get_column("id"),
                "provider": ["bankfeed_eu", "openbank_uk"],
                "status": ["idle", "syncing"],
                "last_synced_at": ["2024-01-01T00:00:00.000Z", None],
                "next_sync_at": ["2024-01-01T06:00:00.000Z", None],
            }
        )
    )
    assert wh.snapshot_sync_status(status).landed == 2
    assert wh.con.execute("SELECT count(*) FROM history.sync_status").fetchone() == (2,)
    assert wh.con.execute("SELECT count(*) FROM history.connections").fetchone() == (2,)


def test_settings_snapshot_reports_a_timezone_change(wh: Warehouse) -> None:
    first = wh.snapshot_settings(
        {"timezone": "Europe/Madrid", "currency": "EUR", "locale": "es-ES"}
    )
    assert (first.previous_timezone, first.timezone, first.timezone_changed) == (
        None,
        "Europe/Madrid",
        False,
    )
    again = wh.snapshot_settings({"timezone": "Europe/Madrid", "currency": "EUR"})
    assert not again.timezone_changed
    changed = wh.snapshot_settings({"timezone": "America/New_York", "currency": "EUR", "extra": 1})
    assert changed.timezone_changed
    assert wh.get_meta("timezone") == "America/New_York"
    assert wh.con.execute("SELECT raw->>'extra' FROM raw.settings").fetchone() == ("1",)


def test_unchanged_settings_are_not_rewritten_but_each_refresh_has_its_history_row(
    wh: Warehouse,
) -> None:
    settings = {"timezone": "Europe/Madrid", "currency": "EUR", "locale": "es-ES"}
    wh.snapshot_settings(settings)
    wh.refresh_id = "r2"
    wh.snapshot_settings(settings)
    stored = "SELECT (SELECT refresh_id FROM core.settings), (SELECT refresh_id FROM raw.settings)"
    assert wh.con.execute(stored).fetchone() == ("r1", "r1")  # the refresh that wrote them
    history = wh.con.execute("SELECT refresh_id, timezone FROM history.settings ORDER BY 1")
    assert history.fetchall() == [("r1", "Europe/Madrid"), ("r2", "Europe/Madrid")]
    wh.refresh_id = "r3"
    wh.snapshot_settings({**settings, "week_start": "monday"})  # a change: written again
    assert wh.con.execute(stored).fetchone() == ("r3", "r3")
    assert wh.con.execute("SELECT week_start FROM core.settings").fetchone() == ("monday",)
    assert wh.get_meta("timezone") == "Europe/Madrid"


def test_an_invalid_timezone_is_rejected_and_the_last_one_kept(wh: Warehouse) -> None:
    wh.snapshot_settings({"timezone": "Europe/Madrid", "currency": "EUR"})
    bad = wh.snapshot_settings({"timezone": "Mars/Olympus", "currency": "EUR"})
    assert bad.rejected == 1
    assert bad.timezone is None
    assert wh.get_meta("timezone") == "Europe/Madrid"
    assert "not an IANA timezone" in wh.rejected_rows().get_column("reason")[0]


def test_server_aggregates_land_stamped_with_the_refresh(wh: Warehouse) -> None:
    wh.load_transactions_summaries(
        [
            {
                "scope": "year",
                "from": "2024-01-01",
                "to": "2024-12-31",
                "count": 3,
                "income": 10,
                "expense": -7,
                "transfer": 0,
                "net": 3,
            },
            {
                "scope": "all",
                "count": 5,
                "income": 10,
                "expense": -9,
                "transfer": 1,
                "net": 2,
                "params": {"account_id": "x"},
            },
        ]
    )
    cat = "3fa85f64-5717-4562-b3fc-2c963f66afa6"
    wh.load_spending(
        {
            "from": "2024-01-01",
            "to": "2024-01-31",
            "group_by": "category",
            "currency": "EUR",
            "total": -30,
            "data": [
                {"key": cat, "label": "Groceries", "amount": -20, "count": 2},
                {"key": None, "label": "Uncategorized", "amount": -10, "count": 1},
            ],
        }
    )
    wh.load_spending(
        [
            {
                "from": "2024-01-01",
                "to": "2024-01-31",
                "group_by": "merchant",
                "currency": "EUR",
                "total": 0,
                "data": [],
            }
        ]
    )
    wh.load_accounts_summary(
        {
            "currency": "EUR",
            "assets": 100,
            "liabilities": 40,
            "net_worth": 60,
            "count": 2,
            "by_type": {"depository": 100, "credit": -40},
        }
    )
    wh.load_net_worth(
        {
            "currency": "EUR",
            "assets": 100,
            "liabilities": 40,
            "total": 60,
            "as_of": "2024-01-31T10:00:00.000Z",
        }
    )
    assert wh.query(
        "SELECT scope, count, net FROM server.transactions_summary ORDER BY scope"
    ).rows() == [("all", 5, 2), ("year", 3, 3)]
    assert wh.query(
        "SELECT group_by, total, row_count FROM server.spending_totals ORDER BY 1"
    ).rows() == [("category", -30, 2), ("merchant", 0, 0)]
    assert wh.query("SELECT id::VARCHAR, name FROM core.categories").rows() == [(cat, "Groceries")]
    assert wh.query(
        "SELECT type, balance FROM server.accounts_summary_by_type ORDER BY 1"
    ).rows() == [("credit", -40), ("depository", 100)]
    assert wh.query("SELECT total, refresh_id FROM server.net_worth").rows() == [(60, "r1")]


def test_a_bad_aggregate_row_is_rejected_not_landed(wh: Warehouse) -> None:
    result = wh.load_transactions_summaries(
        [{"scope": "year", "count": -1, "income": 1.5, "expense": 0, "transfer": 0, "net": 0}]
    )
    assert (result.landed, result.rejected) == (0, 1)
    assert wh.con.execute("SELECT count(*) FROM server.transactions_summary").fetchone() == (0,)
    assert wh.rejected_rows().get_column("entity").to_list() == ["server.transactions_summary"]


def test_the_counts_from_the_replaced_rows_are_a_full_joins() -> None:
    # the snapshot's counts come from the rows its DELETE and INSERT return; the same as a
    # FULL JOIN on the key, null keys (match nothing), twice-seen keys, nulls and lists aside
    import duckdb

    from centsync.warehouse.snapshots import diff_counts

    rng = random.Random(11)
    keys = [None, 1, 2, 3, 4, 5]
    values = [None, 0, 1]
    lists = [None, [1], [1, 2]]
    con = duckdb.connect()
    for _ in range(200):
        old = [
            (rng.choice(keys), rng.choice(values), rng.choice(lists))
            for _ in range(rng.randint(0, 5))
        ]
        new = [
            (rng.choice(keys), rng.choice(values), rng.choice(lists))
            for _ in range(rng.randint(0, 5))
        ]
        for name, rows in (("o", old), ("n", new)):
            con.execute(f"CREATE OR REPLACE TABLE {name} (k INT, a INT, l INT[])")
            if rows:
                con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)", rows)
        want = con.execute(
            """
            SELECT count(*) FILTER (WHERE o._old IS NULL),
                   count(*) FILTER (WHERE n._new AND o._old
                                    AND (n.a IS DISTINCT FROM o.a OR n.l IS DISTINCT FROM o.l)),
                   count(*) FILTER (WHERE n._new IS NULL)
            FROM (SELECT *, true AS _new FROM n) n
            FULL JOIN (SELECT *, true AS _old FROM o) o ON o.k = n.k
            """
        ).fetchall()[0]
        got_old = con.execute("SELECT k, a, l FROM o").fetchall()
        got_new = con.execute("SELECT k, a, l FROM n").fetchall()
        assert diff_counts(got_new, got_old) == want, (old, new)


def test_the_services_totals_loaded_twice_in_one_refresh_keep_the_second(wh: Warehouse) -> None:
    # the first load of a refresh has nothing to take out (no DELETE); a second replaces it
    for assets, by_type in ((100, {"depository": 100}), (250, {"depository": 200, "loan": 50})):
        body = {"currency": "EUR", "assets": assets, "liabilities": 0, "count": 2}
        wh.load_accounts_summary({**body, "net_worth": assets, "by_type": by_type})
        wh.load_net_worth({**body, "total": assets, "as_of": "2024-01-31T10:00:00.000Z"})
    assert wh.query("SELECT refresh_id, assets FROM server.accounts_summary").rows() == [
        ("r1", 250)
    ]
    assert wh.query(
        "SELECT type, balance FROM server.accounts_summary_by_type ORDER BY 1"
    ).rows() == [
        ("depository", 200),
        ("loan", 50),
    ]
    assert wh.query("SELECT refresh_id, total FROM server.net_worth").rows() == [("r1", 250)]
    wh.start_refresh(refresh_id="r2")  # the next refresh's rows are its own
    wh.load_net_worth({"currency": "EUR", "assets": 7, "liabilities": 0, "total": 7})
    assert wh.query("SELECT refresh_id, total FROM server.net_worth ORDER BY 1").rows() == [
        ("r1", 250),
        ("r2", 7),
    ]
