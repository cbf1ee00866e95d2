"""Pacing: per-minute and per-hour token buckets shared by every request of a client.

Each bucket is an ``aiolimiter.AsyncLimiter`` sized so that no interval of the bucket's period
(60 s or 3600 s, sliding, so whatever the server's window alignment) admits more than the
allowance: a small burst ``b`` and a steady rate of ``(limit - b - 1)`` per period. On top of
that the ``X-RateLimit-Remaining-*`` headers, when the server sends them, say how much of the
server's current window is left (other clients of the same key spend it too): when it is used
up the pacer holds every request until the window turns. A 429's ``Retry-After`` holds every
request the same way. Without headers, the buckets alone keep the client under the limit.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

from aiolimiter import AsyncLimiter

log = logging.getLogger("centsync.extract")


@dataclass(frozen=True)
class Allowance:
    """A key's allowance and what is left of it, as ``/v1/me`` or the headers report it."""

    minute_limit: int
    hour_limit: int
    minute_remaining: int | None = None
    hour_remaining: int | None = None


def _bucket(limit: int, period: float) -> AsyncLimiter:
    burst = max(1, limit // 10)
    steady = max(limit - burst - 1, 1)
    # capacity ``burst`` draining at ``steady / period``: any ``period`` admits <= burst + steady
    return AsyncLimiter(burst, period * burst / steady)


def _next_boundary(period: int) -> float:
    """Seconds until the next fixed UTC window of ``period`` seconds starts (contract 3)."""
    now = time.time()
    return period - (now % period)


class Pacer:
    """Admits requests within a key's allowance; one per client, shared by all its tasks."""

    def __init__(self, allowance: Allowance | None = None, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.allowance: Allowance | None = None
        self._minute: AsyncLimiter | None = None
        self._hour: AsyncLimiter | None = None
        self._hold_until = 0.0  # loop time before which nothing is sent
        self._in_flight = 0
        self._pending_fill: list[tuple[AsyncLimiter, float]] = []
        self.waited_s = 0.0
        if allowance is not None:
            self.configure(allowance)

    @property
    def configured(self) -> bool:
        return self.allowance is not None

    def configure(self, allowance: Allowance) -> None:
        """Size the buckets for an allowance (from ``/v1/me`` or changed limit headers)."""
        old = self.allowance
        self.allowance = allowance
        if old is None or old.minute_limit != allowance.minute_limit:
            self._minute = _bucket(allowance.minute_limit, 60)
            self._prefill(self._minute, allowance.minute_limit, allowance.minute_remaining)
        if old is None or old.hour_limit != allowance.hour_limit:
            self._hour = _bucket(allowance.hour_limit, 3600)
            self._prefill(self._hour, allowance.hour_limit, allowance.hour_remaining)
        # the window may already be spent by other clients of the key
        if allowance.minute_remaining is not None and allowance.minute_remaining <= 0:
            self.hold(_next_boundary(60) + 0.05, reason="minute allowance used up")
        if allowance.hour_remaining is not None and allowance.hour_remaining <= 0:
            self.hold(_next_boundary(3600) + 0.05, reason="hour allowance used up")

    def _prefill(self, bucket: AsyncLimiter, limit: int, remaining: int | None) -> None:
        if remaining is None:
            return
        used = max(0, limit - remaining)
        # allowance already spent (by this /v1/me call or other clients) counts against the burst
        self._pending_fill.append((bucket, float(min(used, bucket.max_rate))))

    def hold(self, seconds: float, *, reason: str) -> None:
        """Send nothing for ``seconds`` (a ``Retry-After``, a spent window)."""
        if seconds <= 0:
            return
        until = time.monotonic() + seconds
        if until > self._hold_until + 0.001:
            log.warning("pacing: holding requests for %.1f s (%s)", seconds, reason)
            self._hold_until = until

    async def acquire(self) -> float:
        """Wait for a slot; returns the seconds waited."""
        if not self.enabled:
            self._in_flight += 1
            return 0.0
        start = time.monotonic()
        while self._pending_fill:
            bucket, amount = self._pending_fill.pop()
            await bucket.acquire(amount)
        while True:
            delay = self._hold_until - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            if self._hour is not None:
                await self._hour.acquire()
            if self._minute is not None:
                await self._minute.acquire()
            if self._hold_until <= time.monotonic():
                break
        self._in_flight += 1
        waited = time.monotonic() - start
        self.waited_s += waited
        return waited

    def acquire_unpaced(self) -> float:
        """Count a request that goes out without waiting (the ``/v1/me`` that sets the pace)."""
        self._in_flight += 1
        return 0.0

    def release(self, headers: Mapping[str, str] | None) -> None:
        """A response (or failure) came back; learn from its rate-limit headers if any."""
        self._in_flight = max(0, self._in_flight - 1)
        if not self.enabled or headers is None:
            return
        minute = _int(headers.get("x-ratelimit-remaining-minute"))
        hour = _int(headers.get("x-ratelimit-remaining-hour"))
        minute_limit = _int(headers.get("x-ratelimit-limit-minute"))
        hour_limit = _int(headers.get("x-ratelimit-limit-hour"))
        if (
            minute_limit
            and hour_limit
            and self.allowance is not None
            and (minute_limit, hour_limit)
            != (self.allowance.minute_limit, self.allowance.hour_limit)
        ):
            self.configure(Allowance(minute_limit, hour_limit))
        # requests already sent will spend what is left: keep one spare
        if minute is not None and minute <= self._in_flight:
            self.hold(_next_boundary(60) + 0.05, reason="minute allowance used up")
        if hour is not None and hour <= self._in_flight:
            self.hold(_next_boundary(3600) + 0.05, reason="hour allowance used up")

    def describe(self) -> str:
        if not self.enabled or self.allowance is None:
            return "pacing off"
        a = self.allowance
        return f"pacing at {a.minute_limit}/min, {a.hour_limit}/h"


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) else None
