"""Pacing within the key's allowance: buckets from /v1/me, corrected by the headers."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from centsync.extract import Allowance, Pacer, RateLimited
from centsync.extract._pacing import safe_bucket

from .conftest import AsgiEnv, run


def test_safe_bucket_never_admits_more_than_the_limit_in_any_period() -> None:
    limit, period = 10, 0.5

    async def go() -> list[float]:
        bucket = safe_bucket(limit, period)
        loop = asyncio.get_running_loop()
        stamps: list[float] = []
        end = loop.time() + 3 * period
        while loop.time() < end:
            await bucket.acquire()
            stamps.append(loop.time())
        return stamps

    stamps = run(go())
    worst = max(sum(1 for t in stamps if s <= t < s + period) for s in stamps)
    assert worst <= limit
    assert len(stamps) >= 2 * (limit - 2)  # and still close to the allowance


def test_pacer_holds_when_headers_say_the_window_is_spent() -> None:
    async def go() -> None:
        pacer = Pacer()
        pacer.configure(Allowance(30, 1000, 29, 999), headers=True)
        await pacer.acquire()
        await pacer.acquire()
        # one request still in flight and the server says one is left: hold
        pacer.release(
            {
                "x-ratelimit-remaining-minute": "1",
                "x-ratelimit-limit-minute": "30",
                "x-ratelimit-remaining-hour": "900",
                "x-ratelimit-limit-hour": "1000",
            }
        )
        assert pacer.holds == 1

    run(go())


def test_pacer_goes_blind_without_headers() -> None:
    async def go() -> None:
        pacer = Pacer()
        pacer.configure(Allowance(30, 1000, 29, 999), headers=True)
        await pacer.acquire()
        pacer.release({})
        assert not pacer.headers_seen
        assert "blind" in pacer.describe()

    run(go())


def test_client_paces_blind_when_the_server_omits_headers(limited_asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        admin = limited_asgi_env.admin()
        key = await admin.new_key(scopes=["data.read"], minute_limit=1200, hour_limit=100_000)
        await admin.faults(omit_rate_limit_headers=True)
        async with limited_asgi_env.client(key) as c:
            started = time.monotonic()
            await asyncio.gather(*(c.settings() for _ in range(160)))
            elapsed = time.monotonic() - started
            assert not c.pacer.headers_seen
            assert c.stats.total().rate_limited == 0
        # blind, the safe bucket: a burst of 120 (what /v1/me reported left of the minute allows
        # it: a documented count), then its steady rate, (1200 - 120 - 1) a minute
        assert elapsed >= 39 * 60 / 1079 * 0.9

    run(go())


def _windows_needed(requests: int, remaining: int, limit: int) -> int:
    return max(0, math.ceil((requests - remaining) / limit))


@pytest.mark.slow
def test_minute_limit_30_with_100_requests_no_429_and_close_to_the_limit(
    limited_asgi_env: AsgiEnv,
) -> None:
    async def go() -> None:
        admin = limited_asgi_env.admin()
        key = await admin.new_key(scopes=["data.read"], minute_limit=30, hour_limit=10_000)
        async with limited_asgi_env.client(key) as c:
            me = await c.me()
            started = time.monotonic()
            first_boundary = 60 - (time.time() % 60)
            await asyncio.gather(*(c.settings() for _ in range(100)))
            elapsed = time.monotonic() - started
            stats = c.stats.total()
        assert stats.rate_limited == 0
        assert me.minute_remaining is not None
        extra = _windows_needed(100, me.minute_remaining, 30)
        floor = first_boundary + (extra - 1) * 60 if extra else 0.0
        assert elapsed >= floor - 1
        assert elapsed <= floor + 15, (elapsed, floor)

    run(go())


@pytest.mark.slow
def test_minute_limit_30_blind_no_429(limited_asgi_env: AsgiEnv) -> None:
    async def go() -> None:
        admin = limited_asgi_env.admin()
        key = await admin.new_key(scopes=["data.read"], minute_limit=30, hour_limit=10_000)
        await admin.faults(omit_rate_limit_headers=True)
        async with limited_asgi_env.client(key) as c:
            await asyncio.gather(*(c.settings() for _ in range(40)))
            assert c.stats.total().rate_limited == 0

    run(go())


def test_headers_appearing_after_a_blind_start_do_not_stall_requests() -> None:
    async def go() -> None:
        pacer = Pacer()
        pacer.configure(Allowance(1000, 100_000, 999, 99_999), headers=False)
        await pacer.acquire()
        pacer.release(
            {
                "x-ratelimit-limit-minute": "1000",
                "x-ratelimit-remaining-minute": "990",
                "x-ratelimit-limit-hour": "100000",
                "x-ratelimit-remaining-hour": "99990",
            }
        )
        assert pacer.headers_seen
        for _ in range(50):  # the server says 990 are left: no wait at all
            await asyncio.wait_for(pacer.acquire(), timeout=1)

    run(go())


def test_a_spent_hourly_allowance_stops_at_once_saying_when_to_run_again(
    limited_asgi_env: AsgiEnv,
) -> None:
    """Past the wait budget (CENTSYNC_MAX_WAIT) the client does not sit out the hour: it stops
    at once, with the time to run again."""
    if 3600 - time.time() % 3600 < 30:
        pytest.skip("too close to the hour: the allowance would come back within the budget")

    async def go() -> None:
        admin = limited_asgi_env.admin()
        key = await admin.new_key(scopes=["data.read"], minute_limit=1200, hour_limit=5)
        async with limited_asgi_env.client(key, max_wait=20) as c:
            for _ in range(4):  # /v1/me (the pace) and four more: the hour's five are spent
                await c.settings()
            started = time.monotonic()
            with pytest.raises(RateLimited) as err:
                await c.settings()
            elapsed = time.monotonic() - started
        assert elapsed < 2.0  # not a wait for the next hour
        assert "run again after" in str(err.value) and "CENTSYNC_MAX_WAIT" in str(err.value)

    run(go())


def test_the_bucket_s_level_can_be_set_and_a_waiter_goes_at_once() -> None:
    """The pacer mirrors the server's count into its aiolimiter buckets (`set_level`, the one
    adapter of aiolimiter's internals): lowering the level lets a waiting request go without
    waiting for the bucket to drain."""
    from aiolimiter import AsyncLimiter

    from centsync.extract._pacing import set_level

    # what set_level relies on in aiolimiter 1.3 (pinned): these internals exist
    assert callable(AsyncLimiter._leak) and callable(AsyncLimiter._wake_next)

    async def go() -> float:
        bucket = AsyncLimiter(2, 60.0)  # drains one request per 30 s
        await bucket.acquire()
        await bucket.acquire()
        assert bucket._level == pytest.approx(2.0, abs=0.01)
        loop = asyncio.get_running_loop()
        started = loop.time()
        waiter = asyncio.create_task(bucket.acquire())
        await asyncio.sleep(0.05)
        assert not waiter.done()
        set_level(bucket, 0.0)
        await waiter
        assert bucket._level == pytest.approx(1.0, abs=0.01)
        return loop.time() - started

    assert run(go()) < 1.0


def test_a_request_already_waiting_never_sleeps_a_new_hold_past_its_budget() -> None:
    """Issue 25: a 1,118 s hold that began while a request waited was slept out whole."""
    from centsync.extract._pacing import HoldPastBudget

    async def go() -> tuple[float, HoldPastBudget | None]:
        pacer = Pacer()
        pacer.configure(Allowance(60, 1000, 59, 999), headers=True)
        pacer.hold(0.2, reason="minute allowance used up")
        started = time.monotonic()
        waiting = asyncio.create_task(pacer.acquire(max_wait=1.0))
        await asyncio.sleep(0.05)
        pacer.hold(1118, reason="hour allowance used up")  # begins while the request waits
        try:
            await waiting
        except HoldPastBudget as held:
            return time.monotonic() - started, held
        return time.monotonic() - started, None

    took, held = run(go())
    assert held is not None and held.left > 1000 and "hour allowance" in held.reason
    assert took < 1.0  # gave up when it woke, within its budget, not after 1,118 s


def test_a_hold_within_the_budget_is_waited_out() -> None:
    async def go() -> float:
        pacer = Pacer()
        pacer.configure(Allowance(60, 1000, 59, 999), headers=True)
        pacer.hold(0.2, reason="minute allowance used up")
        return await pacer.acquire(max_wait=1.0)

    assert 0.15 <= run(go()) < 1.0
