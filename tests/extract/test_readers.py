"""Every reader against the real sandbox, in-process: typed frames and results equal its state."""

from __future__ import annotations

import datetime as dt

import orjson
import polars as pl
import pytest

from centsync.extract import (
    ACCOUNT_SCHEMA,
    CONNECTION_SCHEMA,
    SYNC_STATUS_SCHEMA,
    TRANSACTION_SCHEMA,
    NotFound,
)

from .conftest import BASE, FAST, AsgiEnv, comparable, run, state_frame


def test_me_reports_owner_scopes_and_allowance(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            me = await c.me()
            assert me.scopes == ("data.read", "data.write")
            assert me.can_write
            assert me.minute_limit > 0 and me.hour_limit > 0
            assert me.key_expires_at is not None and me.key_expires_at.tzinfo is not None
            assert orjson.loads(me.raw)["account_id"] == me.account_id

    run(go())


def test_settings_give_timezone_and_currency(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        admin = asgi_env.admin()
        state = await admin.state()
        async with asgi_env.client() as c:
            settings = await c.settings()
        assert settings.timezone == state["settings"]["timezone"]
        assert settings.currency == state["settings"]["currency"]

    run(go())


def test_accounts_frame_is_typed_and_equals_server_state(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        async with asgi_env.client() as c:
            accounts = await c.accounts()
        assert dict(accounts.schema) == ACCOUNT_SCHEMA
        assert accounts["id"].to_list() == [a["id"] for a in state["accounts"]]
        assert accounts["balance"].to_list() == [a["balance"] for a in state["accounts"]]
        assert [orjson.loads(r) for r in accounts["raw"]] == state["accounts"]

    run(go())


def test_connections_and_sync_status_frames(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        async with asgi_env.client() as c:
            connections = await c.connections()
            status = await c.sync_status()
        assert dict(connections.schema) == CONNECTION_SCHEMA
        assert dict(status.schema) == SYNC_STATUS_SCHEMA
        assert connections["account_ids"].to_list() == [
            c["account_ids"] for c in state["connections"]
        ]
        # providers are read from the server, never assumed
        assert set(status["provider"]) == {c["provider"] for c in state["connections"]}
        assert status["last_synced_at"].dtype == pl.Datetime("ms", "UTC")

    run(go())


def test_aggregates_are_typed_integer_cents(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        async with asgi_env.client() as c:
            summary = await c.accounts_summary()
            worth = await c.net_worth()
            totals = await c.transactions_summary()
        balances = [a["balance"] for a in state["accounts"]]
        assert summary.assets == sum(b for b in balances if b >= 0)
        assert summary.liabilities == -sum(b for b in balances if b < 0)
        assert worth.total == summary.net_worth == summary.assets - summary.liabilities
        assert totals.count == len(state["transactions"])
        assert totals.net == sum(t["amount"] for t in state["transactions"])
        assert all(isinstance(v, int) for v in summary.by_type.values())

    run(go())


@pytest.mark.parametrize("group_by", ["category", "merchant", "month"])
def test_spending_rows_sum_to_total(asgi_env: AsgiEnv, group_by: str) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            spending = await c.spending("2025-01-01", "2025-12-31", group_by=group_by)
        assert spending.group_by == group_by
        assert spending.from_ == dt.date(2025, 1, 1)
        assert spending.rows.columns == ["key", "label", "amount", "count"]
        assert spending.rows["amount"].dtype == pl.Int64
        assert spending.rows["amount"].sum() == spending.total

    run(go())


def test_read_all_transactions_equals_server_state(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        async with asgi_env.client() as c:
            frame, reports = await c.read_all_transactions()
        assert dict(frame.schema) == TRANSACTION_SCHEMA
        assert comparable(frame).equals(state_frame(state))
        assert all(r.verified and r.rereads == 0 for r in reports)
        assert sum(r.rows for r in reports) == len(state["transactions"])

    run(go())


def test_raw_column_is_each_record_as_sent(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        async with asgi_env.client() as c:
            frame, _ = await c.read_all_transactions()
        by_id = {t["id"]: t for t in state["transactions"]}
        for raw in frame["raw"].head(50):
            record = orjson.loads(raw)
            expected = {k: v for k, v in by_id[record["id"]].items() if k != "notes"}
            assert record == expected  # list records omit notes, keep every other field

    run(go())


def test_transactions_without_extra_fields_still_read(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        await asgi_env.admin().faults(drop_extra_fields=True)
        async with asgi_env.client() as c:
            frame, _ = await c.read_all_transactions()
        assert frame.height == 3000
        assert frame["created_at"].null_count() == frame.height
        assert "created_at" not in orjson.loads(frame["raw"][0])

    run(go())


def test_filters_reach_the_server(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            expenses = [
                b.frame
                async for b in c.read_transactions([("2025-01-01", "2025-06-30")], type="expense")
            ]
            summary = await c.transactions_summary("2025-01-01", "2025-06-30", type="expense")
        frame = pl.concat(expenses)
        assert set(frame["type"]) == {"expense"}
        assert frame.height == summary.count
        assert frame["booked_at"].min() >= dt.date(2025, 1, 1)  # type: ignore[operator]

    run(go())


def test_unknown_filter_is_refused_before_any_request(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            with pytest.raises(TypeError):
                await c.transactions_summary(colour="red")
            assert c.stats.total().requests == 0

    run(go())


def test_single_transaction_includes_notes(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        first = state["transactions"][0]
        async with asgi_env.client() as c:
            tx = await c.transaction(first["id"])
            with pytest.raises(NotFound) as err:
                await c.transaction("00000000-0000-4000-8000-000000000000")
        assert tx.id == first["id"] and tx.amount == first["amount"]
        assert "notes" in orjson.loads(tx.raw)
        assert tx.to_frame()["id"][0] == tx.id
        assert err.value.status == 404 and err.value.request_id

    run(go())


def test_windows_are_read_in_order_with_reports(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            windows = [("2025-03-01", "2025-03-31"), ("2025-02-01", "2025-02-28")]
            batches = [b async for b in c.read_transactions(windows)]
        assert [b.window for b in batches] == [
            (dt.date(2025, 3, 1), dt.date(2025, 3, 31)),
            (dt.date(2025, 2, 1), dt.date(2025, 2, 28)),
        ]
        for b in batches:
            r = b.report
            assert r.rows == r.total == b.frame.height
            assert r.requests == r.pages + 1  # pages plus the summary that verifies them
            assert r.verified

    run(go())


def test_large_window_is_split_to_bound_memory(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client(max_window_rows=500) as c:
            batches = [b async for b in c.read_transactions([("2024-01-01", "2026-12-31")])]
            summary = await c.transactions_summary("2024-01-01", "2026-12-31")
        assert len(batches) > 2
        assert all(b.frame.height <= 500 for b in batches)
        assert sum(b.frame.height for b in batches) == summary.count
        assert all(b.report.split_from is not None for b in batches)

    run(go())


def test_request_accounting_counts_every_endpoint(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            await c.accounts()
            await c.read_all_transactions()
            stats = c.stats.snapshot()
            frame = c.stats.as_frame()
        assert stats["GET /v1/accounts"]["requests"] == 1
        assert stats["GET /v1/transactions"]["requests"] >= 15
        assert stats["GET /v1/transactions"]["bytes"] > 0
        assert frame.height == len(stats)

    run(go())


def test_a_key_close_to_expiry_is_warned_about(
    asgi_env: AsgiEnv, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        key = await asgi_env.admin().new_key(scopes=["data.read"], expires_in_days=10)
        async with asgi_env.client(key) as c:
            me = await c.me()
        assert me.key_expires_at is not None

    with caplog.at_level("WARNING", logger="centsync.extract"):
        run(go())
    assert any("expires on" in r.getMessage() for r in caplog.records)


def test_created_at_order_reads_the_same_rows(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            windows = [("2025-01-01", "2025-12-31")]
            by_booked = [b async for b in c.read_transactions(windows)]
            by_created = [b async for b in c.read_transactions(windows, sort="created_at")]
        assert set(by_booked[0].frame["id"]) == set(by_created[0].frame["id"])
        assert by_created[0].report.verified

    run(go())


def test_blocking_facade_stops_cleanly_when_the_caller_breaks(asgi_env: AsgiEnv) -> None:
    from centsync.extract import ApiClient

    with ApiClient(
        "http://sandbox.test", asgi_env.keys["read_only"], transport=asgi_env.transport
    ) as c:
        months = [("2025-03-01", "2025-03-31"), ("2025-02-01", "2025-02-28")]
        for batch in c.read_transactions(months):
            assert batch.frame.height > 0
            break
        assert c.settings().timezone  # the client is still usable afterwards


def test_gather_answers_in_order_in_one_round_and_raises_a_failure_as_itself(
    asgi_env: AsgiEnv,
) -> None:
    """The blocking client's `gather` (the refresh's fingerprints and after-ledger requests):
    every call's answer in the calls' order, the same requests as one by one, and a failing
    call's own error (not an exception group) for the refresh's error messages."""
    from centsync.extract import ApiClient, NotFound

    with ApiClient(
        BASE, asgi_env.keys["read_only"], transport=asgi_env.transport, **FAST
    ) as client:
        one_by_one = [
            client.transactions_summary("2025-01-01", "2025-12-31").count,
            client.spending("2025-01-01", "2025-12-31", group_by="merchant").total,
            client.settings().timezone,
        ]
        before = client.stats.total().requests
        got = client.gather(
            lambda c: c.transactions_summary("2025-01-01", "2025-12-31"),
            lambda c: c.spending("2025-01-01", "2025-12-31", group_by="merchant"),
            lambda c: c.settings(),
        )
        assert [got[0].count, got[1].total, got[2].timezone] == one_by_one
        assert client.stats.total().requests - before == 3
        with pytest.raises(NotFound):
            client.gather(
                lambda c: c.settings(),
                lambda c: c.transaction("00000000-0000-4000-8000-000000000000"),
            )
