"""Pacing: per-minute and per-hour token buckets shared by every request of a client.

The allowance comes from ``GET /v1/me``. Two regimes, chosen by whether the server sends the
``X-RateLimit-*`` headers (``/v1/me``'s own answer tells):

* **Headers present.** Buckets of the full allowance (``AsyncLimiter(limit, period)``); each
  answer's ``Remaining`` count resets the bucket's fill to the server's count (plus requests
  in flight), so a turned window empties it; when what is left of the server's current window
  is no more than the requests still in flight, every request is held until the window turns
  (contract 3: fixed UTC minute and hour). A client alone on its key thus gets the whole
  allowance of each window and never a 429.
* **Headers absent.** The client cannot see the server's window, so the buckets alone must
  keep it under the limit whatever the window alignment: a small burst ``b`` and a steady rate
  of ``limit - b - 1`` per period, so no interval of one period admits more than ``limit``.

A 429 holds every request the same way (the server knows best): for as long as its
``Retry-After`` says, else its ``X-RateLimit-Reset`` (``retry_after``, ``reset_wait``), else until
the window ``/v1/me`` reports spent turns (``allowance_wait``); with none of them, backoff.
Rate-limit headers under other names, or none, leave pacing blind but working.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from aiolimiter import AsyncLimiter

log = logging.getLogger("centsync.extract")

_HEADERS = (
    "x-ratelimit-limit-minute",
    "x-ratelimit-remaining-minute",
    "x-ratelimit-limit-hour",
    "x-ratelimit-remaining-hour",
)


@dataclass(frozen=True)
class Allowance:
    """A key's allowance and what is left of it, as ``/v1/me`` or the headers report it."""

    minute_limit: int
    hour_limit: int
    minute_remaining: int | None = None
    hour_remaining: int | None = None


def full_bucket(limit: int, period: float) -> AsyncLimiter:
    """The allowance as one leaky bucket: bursts up to ``limit``, refills over ``period``."""
    return AsyncLimiter(max(limit, 1), period)


def safe_bucket(limit: int, period: float) -> AsyncLimiter:
    """A bucket no ``period``-long interval of which admits more than ``limit`` requests."""
    burst = max(1, limit // 10)
    steady = max(limit - burst - 1, 1)
    # capacity ``burst`` draining at ``steady / period``: any ``period`` admits <= burst + steady
    return AsyncLimiter(burst, period * burst / steady)


def _until_next_window(period: int) -> float:
    """Seconds until the next fixed UTC window of ``period`` seconds starts (contract 3)."""
    return period - (time.time() % period)


class HoldPastBudget(Exception):
    """A hold would keep a request waiting past its budget (`CENTSYNC_MAX_WAIT`)."""

    def __init__(self, left: float, reason: str) -> None:
        super().__init__(f"held {left:.0f} s more ({reason})")
        self.left, self.reason = left, reason


class Pacer:
    """Admits requests within a key's allowance; one per client, shared by all its tasks."""

    def __init__(self, *, enabled: bool = True) -> None:
        self.enabled = enabled
        self.allowance: Allowance | None = None
        self.headers_seen = True
        self._minute: AsyncLimiter | None = None
        self._hour: AsyncLimiter | None = None
        self._hold_until = 0.0  # time.monotonic() before which nothing is sent
        self.hold_reason = ""
        self._in_flight = 0
        self.waited_s = 0.0
        self.holds = 0

    @property
    def configured(self) -> bool:
        return self.allowance is not None

    def configure(self, allowance: Allowance, *, headers: bool = True) -> None:
        """Size the buckets for an allowance and a header regime."""
        self.allowance = allowance
        self.headers_seen = headers
        make = full_bucket if headers else safe_bucket
        self._minute = make(allowance.minute_limit, 60)
        self._hour = make(allowance.hour_limit, 3600)
        for bucket, limit, remaining in (
            (self._minute, allowance.minute_limit, allowance.minute_remaining),
            (self._hour, allowance.hour_limit, allowance.hour_remaining),
        ):
            if remaining is not None:
                # what /v1/me (or the headers) just reported spent of the current window: a
                # documented count, so a blind client too starts from it, not from the worst
                used = max(0, limit - remaining) + self._in_flight
            else:
                # blind and told nothing: assume the worst about what was spent before
                used = int(bucket.max_rate)
            set_level(bucket, float(min(used, bucket.max_rate)))
        if allowance.minute_remaining is not None and allowance.minute_remaining <= 0:
            self.hold(_until_next_window(60) + 0.05, reason="minute allowance used up")
        if allowance.hour_remaining is not None and allowance.hour_remaining <= 0:
            self.hold(_until_next_window(3600) + 0.05, reason="hour allowance used up")

    def hold(self, seconds: float, *, reason: str) -> None:
        """Send nothing for ``seconds`` (a ``Retry-After``, a spent window)."""
        if seconds <= 0:
            return
        until = time.monotonic() + seconds
        if until > self._hold_until + 0.001:
            self.holds += 1
            level = logging.WARNING if seconds >= 10 else logging.INFO
            log.log(level, "pacing: holding requests for %.1f s (%s)", seconds, reason)
            self._hold_until = until
            self.hold_reason = reason

    def hold_left(self) -> float:
        """Seconds before anything may be sent (0 when nothing holds)."""
        return max(0.0, self._hold_until - time.monotonic())

    async def acquire(self, max_wait: float = math.inf) -> float:
        """Wait for a slot; returns the seconds waited. A hold that would keep this request
        waiting past `max_wait` in all (one that began while it waited, too) raises
        `HoldPastBudget` at once instead of sleeping it out."""
        if not self.enabled:
            self._in_flight += 1
            return 0.0
        start = time.monotonic()
        while True:
            delay = self._hold_until - time.monotonic()
            if delay > 0:
                if time.monotonic() - start + delay > max_wait:
                    raise HoldPastBudget(delay, self.hold_reason)
                await asyncio.sleep(delay)
                continue
            if self._hour is not None:
                await self._hour.acquire()
            if self._minute is not None:
                await self._minute.acquire()
            # a hold that began while this task waited in a bucket still applies
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
        if not self.enabled or headers is None or self.allowance is None:
            return
        found = rate_limit_headers(headers)
        minute_limit, minute, hour_limit, hour = (_int(found.get(h)) for h in _HEADERS)
        if minute is None and hour is None:
            if self.headers_seen:
                log.info("no rate-limit headers: pacing blind, within the allowance of /v1/me")
                self.configure(
                    Allowance(self.allowance.minute_limit, self.allowance.hour_limit), headers=False
                )
            return
        if (
            minute_limit
            and hour_limit
            and (
                (minute_limit, hour_limit)
                != (self.allowance.minute_limit, self.allowance.hour_limit)
                or not self.headers_seen
            )
        ):
            self.configure(Allowance(minute_limit, hour_limit, minute, hour), headers=True)
        # the server's count is the truth: the buckets mirror it (a turned window empties them)
        if self.headers_seen:
            for bucket, remaining in ((self._minute, minute), (self._hour, hour)):
                if bucket is not None and remaining is not None:
                    used = bucket.max_rate - remaining + self._in_flight
                    set_level(bucket, max(0.0, min(float(bucket.max_rate), used)))
        # requests already sent will spend what is left of the window
        if minute is not None and minute <= self._in_flight:
            self.hold(_until_next_window(60) + 0.05, reason="minute allowance used up")
        if hour is not None and hour <= self._in_flight:
            self.hold(_until_next_window(3600) + 0.05, reason="hour allowance used up")

    def describe(self) -> str:
        if not self.enabled or self.allowance is None:
            return "pacing off"
        a = self.allowance
        mode = "corrected by rate-limit headers" if self.headers_seen else "blind (no headers)"
        return f"pacing at {a.minute_limit}/min, {a.hour_limit}/h, {mode}"


def set_level(bucket: AsyncLimiter, level: float) -> None:
    """Set a bucket's fill to the server's count, waking a waiter to re-check at once.

    The one reach into aiolimiter's internals (`_leak`, `_wake_next`, `_level`): its model is the
    right one, but 1.3 has no public setter for the level. The version is pinned and
    tests/extract/test_pacing.py pins what this relies on.
    """
    try:
        bucket._leak()
    except RuntimeError:  # no running loop yet: the level is all there is to set
        bucket._level = level
        return
    bucket._level = level
    bucket._wake_next()  # the first waiter goes now if the new level leaves it room


_HEADER_BYTES = frozenset(h.encode() for h in _HEADERS)


def rate_limit_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The rate-limit headers of a response, lower-cased, in one pass (an ``httpx.Headers``
    lookup scans every header, and ``release`` needs four)."""
    if hasattr(headers, "raw"):  # httpx.Headers: its raw bytes, without decoding them all
        return {
            k.decode(): v.decode("latin-1")
            for k, v in ((k.lower(), v) for k, v in headers.raw)
            if k in _HEADER_BYTES
        }
    return {k.lower(): v for k, v in headers.items() if k.lower() in _HEADERS}


def has_rate_limit_headers(headers: Mapping[str, str]) -> bool:
    return any(h in headers for h in _HEADERS)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) else None


# ---------------------------------------------------------------- how long a 429 asks to wait

# A reset time: `X-RateLimit-Reset`, `RateLimit-Reset`, `X-Rate-Limit-Reset`, per window
# (`X-RateLimit-Reset-Minute`) or as seconds (`X-RateLimit-Reset-After`): any of them.
_RESET_NAME = re.compile(r"^(x-)?rate-?limit-reset(-after)?(-[a-z]+)?$")
# Above this a reset value is an instant (epoch seconds; above _EPOCH_MS, milliseconds), below
# it seconds to wait: ~3 years of seconds, far past any window, far before any epoch of now.
_EPOCH_S, _EPOCH_MS = 1e8, 1e11
# A wait further away than this is not a rate-limit window (a clock or unit misread): ignored.
_MAX_HINT = 2 * 86400.0


def _seconds(value: str) -> float | None:
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _service_now(headers: Mapping[str, str]) -> float | None:
    """The answer's own time (its `Date` header), as epoch seconds; None when absent."""
    try:
        told = parsedate_to_datetime(headers.get("date") or "")
    except (TypeError, ValueError, IndexError):
        return None
    return None if told.tzinfo is None else told.timestamp()


def _until(instant: float, headers: Mapping[str, str]) -> float | None:
    """Seconds from now until ``instant`` (epoch seconds): on this machine's clock, or, when
    that gives no plausible wait, on the service's (its `Date` header)."""
    for now in (time.time(), _service_now(headers)):
        if now is not None and -5.0 <= instant - now <= _MAX_HINT:
            return max(0.0, instant - now)
    return None


def retry_after(headers: Mapping[str, str]) -> float | None:
    """`Retry-After` in seconds: delta-seconds or an HTTP date (RFC 9110); None when absent."""
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return _until(when.timestamp(), headers)


def reset_wait(headers: Mapping[str, str]) -> float | None:
    """Seconds until the rate limit resets, from any `*RateLimit-Reset*` header: an epoch
    instant (seconds or milliseconds) or seconds to wait, told apart by magnitude. With several
    (one per window), the soonest: a wait too short is met by another 429 and waited again, a
    wait too long could give up on a window that has already turned."""
    waits = []
    for name, value in headers.items():
        if not _RESET_NAME.match(name.lower()):
            continue
        number = _seconds(value)
        if number is None:
            continue
        if number >= _EPOCH_MS:
            wait = _until(number / 1000.0, headers)
        elif number >= _EPOCH_S:
            wait = _until(number, headers)
        else:
            wait = number if number <= _MAX_HINT else None
        if wait is not None:
            waits.append(wait)
    return min(waits) if waits else None


def allowance_wait(minute_remaining: int | None, hour_remaining: int | None) -> float | None:
    """How long `/v1/me`'s allowance says to wait: until the spent window turns (None: it
    reports room, so the 429 came from elsewhere and backoff decides)."""
    if hour_remaining is not None and hour_remaining <= 0:
        return _until_next_window(3600) + 0.05
    if minute_remaining is not None and minute_remaining <= 0:
        return _until_next_window(60) + 0.05
    return None
