"""Writers against the real sandbox: typed results, idempotent resends, permanent errors."""

from __future__ import annotations

import orjson
import pytest

from centsync.extract import (
    IdempotencyKeyReused,
    InsufficientScope,
    InvalidRequest,
    KeyExpired,
    ProviderQuotaExhausted,
    Unauthenticated,
)

from .conftest import AsgiEnv, run


async def _account(asgi_env: AsgiEnv) -> str:
    state = await asgi_env.admin().state()
    return next(a["id"] for a in state["accounts"] if a["type"] == "depository")


def test_create_returns_the_typed_transaction(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        account = await _account(asgi_env)
        async with asgi_env.client() as c:
            tx = await c.create_transaction(
                account_id=account,
                amount=-1250,
                concept="Cash: market",
                booked_at="2025-05-02",
                notes="eggs",
                idempotency_key="inbox:file1:row1",
            )
        assert tx.amount == -1250 and tx.type == "expense" and tx.notes == "eggs"
        assert not tx.replayed
        state = await asgi_env.admin().state()
        assert tx.id in {t["id"] for t in state["transactions"]}

    run(go())


def test_same_idempotency_key_replays_instead_of_creating(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        account = await _account(asgi_env)
        body = dict(account_id=account, amount=-300, concept="Bus", booked_at="2025-05-03")
        async with asgi_env.client() as c:
            first = await c.create_transaction(**body, idempotency_key="evt-42")
            second = await c.create_transaction(**body, idempotency_key="evt-42")
            with pytest.raises(IdempotencyKeyReused) as err:
                await c.create_transaction(**{**body, "amount": -301}, idempotency_key="evt-42")
        assert second.replayed and second.id == first.id
        assert err.value.permanent and not err.value.retryable
        state = await asgi_env.admin().state()
        assert sum(t["concept"] == "Bus" for t in state["transactions"]) == 1

    run(go())


def test_dropped_connections_resend_with_the_same_key_and_create_once(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        account = await _account(asgi_env)
        admin = asgi_env.admin()
        await admin.faults(drop_rate=0.5, error_rate=0.2, error_statuses=[500])
        async with asgi_env.client(max_attempts=20) as c:
            for i in range(20):
                await c.create_transaction(
                    account_id=account,
                    amount=-(100 + i),
                    concept=f"Outbox row {i}",
                    booked_at="2025-06-01",
                    idempotency_key=f"outbox:{i}",
                )
            stats = c.stats.snapshot()["POST /v1/transactions"]
        await admin.clear_faults()
        state = await admin.state()
        created = [t for t in state["transactions"] if t["concept"].startswith("Outbox row")]
        assert len(created) == 20  # each exactly once, though many answers were lost
        assert stats["retries"] > 0 and stats["transport_errors"] > 0

    run(go())


def test_read_only_key_gets_insufficient_scope_once_with_advice(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        account = await _account(asgi_env)
        async with asgi_env.client(asgi_env.keys["read_only"]) as c:
            with pytest.raises(InsufficientScope) as err:
                await c.create_transaction(
                    account_id=account,
                    amount=-1,
                    concept="x",
                    booked_at="2025-01-01",
                    idempotency_key="k1",
                )
            stats = c.stats.snapshot()["POST /v1/transactions"]
        assert stats["requests"] == 1 and stats["retries"] == 0  # permanent: never retried
        text = str(err.value)
        assert "insufficient_scope" in text and "read and write key" in text
        assert "POST /v1/transactions" in text and err.value.request_id

    run(go())


def test_expired_and_unknown_keys_are_permanent(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client(asgi_env.keys["expired"], pacing=False) as c:
            with pytest.raises(KeyExpired):
                await c.settings()
        async with asgi_env.client("pfd_live_" + "x" * 40, pacing=False) as c:
            with pytest.raises(Unauthenticated):
                await c.settings()
            assert c.stats.total().retries == 0

    run(go())


def test_patch_and_assign_return_updated_transactions(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        state = await asgi_env.admin().state()
        expense = next(
            t
            for t in state["transactions"]
            if t["type"] == "expense" and t["expense_goal_id"] is None
        )
        goal = state["expenses"][0]["id"]
        async with asgi_env.client() as c:
            patched = await c.update_transaction(expense["id"], concept="Renamed", notes="n")
            assigned = await c.assign_expense(expense["id"], goal)
            cleared = await c.assign_expense(expense["id"], None)
            with pytest.raises(InvalidRequest) as err:
                await c.update_transaction(expense["id"], expense_goal_id=goal)
        assert patched.concept == "Renamed" and patched.notes == "n"
        assert assigned.expense_goal_id == goal and cleared.expense_goal_id is None
        assert "expense" in err.value.message

    run(go())


def test_sync_is_queued_and_a_spent_quota_is_not_retried(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            providers = (await c.connections())["provider"].unique().to_list()
            first = await c.trigger_sync(providers[0])
            assert first.status == "queued" and first.providers == (providers[0],)
            with pytest.raises(ProviderQuotaExhausted) as err:
                for _ in range(10):
                    await c.trigger_sync(providers[0])
            stats = c.stats.snapshot()["POST /v1/sync"]
        assert not err.value.retryable
        assert stats["retries"] == 0
        assert orjson.loads(first.raw)["sync_id"] == first.sync_id

    run(go())


def test_amount_must_be_integer_cents(asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        async with asgi_env.client() as c:
            with pytest.raises(TypeError):
                await c.create_transaction(
                    account_id="a",
                    amount=12.5,
                    concept="x",
                    booked_at="2025-01-01",  # type: ignore[arg-type]
                    idempotency_key="k",
                )

    run(go())
