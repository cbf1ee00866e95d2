"""Errors by meaning and write answers of any shape, against every dialect of the real sandbox
(in process): whatever a dialect calls its errors, however it says to wait, whatever its
create, edit and assign answers look like, the client knows what happened, posts once and
finds what it wrote; either sort direction of the list reads the same rows."""

from __future__ import annotations

import time
from typing import Any

import httpx
import polars as pl
import pytest

from centsync.extract import (
    InsufficientScope,
    InvalidRequest,
    KeyExpired,
    NotFound,
    ProviderQuotaExhausted,
    Unauthenticated,
)
from centsync.sandbox.dialect import Dialect
from centsync.sandbox.dialects import DIALECTS

from .conftest import AsgiEnv, run, small_sandbox

DOCUMENTED = ["id", "account_id", "concept", "amount", "booked_at", "type"]
NULLABLE = ["category_id", "expense_goal_id"]
MISSING = "00000000-0000-4000-8000-000000000000"


@pytest.fixture(params=sorted(DIALECTS))
def dialect_env(request: pytest.FixtureRequest) -> AsgiEnv:
    """A small sandbox (1,000 transactions, no rate limit) speaking one dialect."""
    return AsgiEnv(small_sandbox(1000, dialect=request.param))


async def _raw(
    asgi_env: AsgiEnv, method: str, path: str, key: str, body: Any = None
) -> httpx.Response:
    """One request as the dialect answers it (to check what the test stands on)."""
    async with httpx.AsyncClient(transport=asgi_env.transport, base_url="http://sandbox.test") as h:
        return await h.request(method, path, json=body, headers={"Authorization": f"Bearer {key}"})


def test_errors_are_classed_by_meaning_in_every_dialect(dialect_env: AsgiEnv) -> None:
    asgi_env = dialect_env

    async def go() -> None:
        admin = asgi_env.admin()
        expired = asgi_env.keys["expired"]
        async with asgi_env.client() as c:
            with pytest.raises(NotFound):
                await c.request("GET", f"/v1/transactions/{MISSING}")
            with pytest.raises(InvalidRequest) as bad:
                await c.request("GET", "/v1/transactions", params={"from": "2025-02-30"})
            assert bad.value.permanent and bad.value.status == 400
        async with asgi_env.client(asgi_env.keys["read_only"]) as c:
            with pytest.raises(InsufficientScope):
                await c.request("PATCH", f"/v1/transactions/{MISSING}", json={"concept": "x"})
        async with asgi_env.client("pfd_live_" + "Z" * 40) as c:
            with pytest.raises(Unauthenticated) as refused:
                await c.me()
        async with asgi_env.client(expired) as c:
            with pytest.raises((KeyExpired, Unauthenticated)) as old:
                await c.me()
        # the key, both: permanent, never retried
        assert refused.value.permanent and old.value.permanent
        assert not refused.value.retryable and not old.value.retryable
        # what the dialect calls them: not necessarily the contract's codes
        answer = await _raw(
            asgi_env, "GET", f"/v1/transactions/{MISSING}", asgi_env.keys["read_write"]
        )
        assert answer.status_code == 404
        await admin.clear_faults()

    run(go())


def test_a_429_burst_is_waited_out_in_every_dialect(dialect_env: AsgiEnv) -> None:
    """However the dialect says to wait (Retry-After, X-RateLimit-Reset as an instant or in
    seconds, nothing at all) and whatever it calls the code, a 429 on a read is a wait."""
    asgi_env = dialect_env

    async def go() -> None:
        admin = asgi_env.admin()
        async with asgi_env.client(max_attempts=2, max_wait=30) as c:
            await c.me()
            await admin.faults(rate_limit_burst=3)
            started = time.monotonic()
            accounts = await c.accounts()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()
        assert accounts.height > 0
        limited = sum(s["rate_limited"] for s in stats.values())
        assert limited == 3 and elapsed < 15
        # the dialect's 429 really is one this test means: not the contract's when it differs
        await admin.faults(rate_limit_burst=1)
        answer = await _raw(asgi_env, "GET", "/v1/accounts", asgi_env.keys["read_only"])
        assert answer.status_code == 429
        if DIALECTS[asgi_env.sb.dialect].wait != "retry_after":
            assert "retry-after" not in answer.headers

    run(go())


async def _state(asgi_env: AsgiEnv) -> dict[str, Any]:
    return await asgi_env.admin().state()


def test_write_back_in_every_dialect_posts_once_and_finds_what_it_wrote(
    dialect_env: AsgiEnv,
) -> None:
    asgi_env = dialect_env

    async def go() -> None:
        state = await _state(asgi_env)
        account = next(a["id"] for a in state["accounts"] if a["type"] == "depository")
        goal = state["expenses"][0]["id"]
        body = dict(account_id=account, amount=-777, concept="Dialect cash", booked_at="2025-06-03")
        async with asgi_env.client() as c:
            first = await c.create_transaction(**body, idempotency_key="dialect:1")
            again = await c.create_transaction(**body, idempotency_key="dialect:1")
            edited = await c.update_transaction(first.id, concept="Dialect cash 2")
            assigned = await c.assign_expense(first.id, goal)
        after = await _state(asgi_env)
        mine = [t for t in after["transactions"] if t["concept"].startswith("Dialect cash")]
        assert len(mine) == 1 and mine[0]["id"] == first.id == again.id == edited.id
        assert first.amount == -777 and first.status in (200, 201, 202)
        assert edited.concept == "Dialect cash 2" and assigned.expense_goal_id == goal
        assert mine[0]["expense_goal_id"] == goal

    run(go())


def _documented(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(DOCUMENTED + NULLABLE).with_columns(pl.col("booked_at").cast(pl.Utf8))


@pytest.mark.parametrize("name", [n for n in sorted(DIALECTS) if DIALECTS[n].ascending] or ["-"])
def test_an_ascending_list_reads_exactly_the_server_s_rows(name: str) -> None:
    """A dialect that lists oldest first: the window reader gets every row, each once."""
    assert name != "-", "no dialect lists oldest first: the test would prove nothing"
    asgi_env = AsgiEnv(small_sandbox(1000, dialect=name))

    async def go() -> None:
        raw = await _raw(asgi_env, "GET", "/v1/transactions?limit=5", asgi_env.keys["read_only"])
        dates = [r["booked_at"] for r in raw.json()["data"]]
        assert dates == sorted(dates) and dates[0] < dates[-1]  # really ascending
        async with asgi_env.client() as c:
            windows = [("2024-01-01", "2024-12-31"), ("2025-01-01", None), (None, "2023-12-31")]
            frames = [b.frame async for b in c.read_transactions(windows, verify=False)]
        state = await _state(asgi_env)
        got = _documented(pl.concat(frames)).sort("id")
        want = pl.DataFrame(
            [{k: t[k] for k in DOCUMENTED + NULLABLE} for t in state["transactions"]],
            schema=got.schema,
        ).sort("id")
        assert got.height == len(state["transactions"]) and got.equals(want)

    run(go())


@pytest.fixture
def silent_env(monkeypatch: pytest.MonkeyPatch) -> AsgiEnv:
    """A dialect (through the sandbox's own dialect layer) whose writes answer without the
    transaction: a create 202 `{"status": "accepted"}`, an edit 204 with no body, an
    assignment `{}`. The transaction must then be read back."""
    silent = Dialect(
        "silent",
        "Writes answer without their transaction.",
        shapes={
            "create": lambda b, ctx: {"status": "accepted"},
            "update": lambda b, ctx: {},
            "assign": lambda b, ctx: {},
        },
        statuses={"create": 202, "update": 204},
    )
    monkeypatch.setitem(DIALECTS, "silent", silent)
    return AsgiEnv(small_sandbox(1000, dialect="silent"))


def test_a_write_whose_answer_holds_no_transaction_is_read_back(silent_env: AsgiEnv) -> None:
    asgi_env = silent_env

    async def go() -> None:
        state = await _state(asgi_env)
        account = next(a["id"] for a in state["accounts"] if a["type"] == "depository")
        goal = state["expenses"][0]["id"]
        body = dict(account_id=account, amount=-450, concept="Silent cash", booked_at="2025-06-04")
        async with asgi_env.client() as c:
            first = await c.write("POST", "/v1/transactions", body, idempotency_key="silent:1")
            replay = await c.write("POST", "/v1/transactions", body, idempotency_key="silent:1")
            # the same purchase again under its own event: another transaction, and the one
            # already held by the first row is never taken for it
            second = await c.write(
                "POST", "/v1/transactions", body, idempotency_key="silent:2", claimed={first.id}
            )
            path = f"/v1/transactions/{first.id}"
            edited = await c.write("PATCH", path, {"notes": "n"}, idempotency_key="silent:3")
            assigned = await c.write(
                "POST", path + "/expense", {"expense_goal_id": goal}, idempotency_key="silent:4"
            )
        assert first.status == 202 and first.found.startswith("read back (GET /v1/transactions")
        assert first.answer == '{"status":"accepted"}'
        assert replay.id == first.id and second.id != first.id
        assert edited.status == 204 and edited.found == "read back (GET /v1/transactions/{id})"
        assert assigned.expense_goal_id == goal and assigned.id == first.id
        after = await _state(asgi_env)
        mine = sorted(t["id"] for t in after["transactions"] if t["concept"] == "Silent cash")
        assert mine == sorted([first.id, second.id])  # two events, two transactions, no more

    run(go())


def test_a_bank_sync_is_asked_for_and_a_spent_quota_refused_in_every_dialect(
    dialect_env: AsgiEnv,
) -> None:
    """`POST /v1/sync` answers in each dialect's way (a 204 with no body too); its documented
    429 `provider_quota_exhausted` is the one 429 that is not waited."""
    asgi_env = dialect_env

    async def go() -> None:
        provider = (await _state(asgi_env))["connections"][0]["provider"]
        async with asgi_env.client() as c:
            asked = await c.trigger_sync(provider)
            with pytest.raises(ProviderQuotaExhausted) as spent:
                for _ in range(10):
                    await c.trigger_sync(provider)
            stats = c.stats.snapshot()["POST /v1/sync"]
        assert asked.status and stats["retries"] == 0 and not spent.value.retryable

    run(go())


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_rate_limit_headers_named_otherwise_or_absent_leave_pacing_working(name: str) -> None:
    """With the rate limit on: the contract's four headers correct the pace; a dialect that
    names them otherwise (GitHub's, the IETF draft's) or sends none is paced blind, within
    /v1/me's allowance, and every request still goes through."""
    asgi_env = AsgiEnv(small_sandbox(300, dialect=name, rate_limit=True))

    async def go() -> None:
        async with asgi_env.client() as c:
            await c.me()
            for _ in range(5):
                assert (await c.accounts()).height > 0
            stats = c.stats.total()
            described = c.pacer.describe()
        contract_headers = DIALECTS[name].limit_headers == "contract"
        assert ("corrected by rate-limit headers" in described) == contract_headers, described
        assert stats.rate_limited == 0 and stats.errors == 0

    run(go())


WAITS = {d.wait: n for n, d in sorted(DIALECTS.items()) if d.wait != "retry_after"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WAITS.values()))
def test_a_spent_minute_is_waited_out_however_the_dialect_says_it(name: str) -> None:
    """A real 429 (another client spent the key's minute): an epoch `X-RateLimit-Reset`, one in
    seconds, or nothing at all (then `/v1/me` is asked, and is refused too while the minute is
    spent: backoff), and the call waits until the window turns, then goes through: never a
    refusal."""
    asgi_env = AsgiEnv(small_sandbox(300, dialect=name, rate_limit=True))

    async def go() -> None:
        key = await asgi_env.admin().new_key(scopes=["data.read"], minute_limit=6, hour_limit=1000)
        async with asgi_env.client(key, pacing=False) as other:
            for _ in range(6):
                try:
                    await other.request("GET", "/v1/accounts")
                except Exception:
                    break
        # the production backoff's pace (the fixtures' is hurried), so the waits that backoff
        # decides do not spend the hour: /v1/me is refused too while the minute is spent
        slow = {"backoff_initial": 0.5, "backoff_max": 8.0}
        async with asgi_env.client(key, pacing=False, max_attempts=2, max_wait=90, **slow) as c:
            started = time.monotonic()
            accounts = await c.accounts()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()
        assert accounts.height > 0 and stats["GET /v1/accounts"]["rate_limited"] >= 1
        assert elapsed <= 72
        if DIALECTS[name].wait == "none":
            assert stats["GET /v1/me"]["requests"] >= 1  # asked how the allowance stands

    run(go())
