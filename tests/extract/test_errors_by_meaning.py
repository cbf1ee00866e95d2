"""Errors by meaning, whatever their code: unknown codes classed by status, every 429 a wait
(but a spent provider quota on POST /v1/sync), and how long a 429 asks to wait from whichever
header it sends. Against the real sandbox where it can say it (its fault injection and, once
merged, its dialects: tests/extract/test_dialects.py)."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from centsync.extract import (
    GatewayTimeout,
    IdempotencyConflict,
    InsufficientScope,
    InternalError,
    InvalidRequest,
    KeyExpired,
    NotFound,
    ProviderQuotaExhausted,
    RateLimited,
    ServiceUnavailable,
    Unauthenticated,
    UnknownClientError,
    UnknownServerError,
)
from centsync.extract._errors import error_class
from centsync.extract._pacing import allowance_wait, reset_wait, retry_after
from centsync.extract._requests import error_fields

from .conftest import AsgiEnv, run


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (401, "invalid_api_key", Unauthenticated),
        (401, None, Unauthenticated),
        (403, "forbidden", InsufficientScope),
        (404, "resource_missing", NotFound),
        (400, "validation_failed", InvalidRequest),
        (422, "unprocessable_entity", InvalidRequest),
        (422, None, InvalidRequest),
        (409, "conflict", IdempotencyConflict),
        (500, "oops", InternalError),
        (503, "maintenance", ServiceUnavailable),
        (504, None, GatewayTimeout),
        (418, "teapot", UnknownClientError),
        (599, "meltdown", UnknownServerError),
        # known codes keep their classes, whatever the status
        (401, "key_expired", KeyExpired),
        (400, "not_found", NotFound),
    ],
)
def test_unknown_codes_are_classed_by_status_and_known_ones_keep_their_class(
    status: int, code: str | None, expected: type
) -> None:
    assert error_class(status, code, method="GET", path="/v1/settings") is expected


@pytest.mark.parametrize("code", ["rate_limited", "too_many_requests", "quota", None])
@pytest.mark.parametrize(
    ("method", "path"), [("GET", "/v1/transactions"), ("POST", "/v1/transactions")]
)
def test_every_429_off_the_sync_trigger_is_a_wait(code: str | None, method: str, path: str) -> None:
    assert error_class(429, code, method=method, path=path) is RateLimited
    assert RateLimited.retryable


def test_only_a_spent_provider_quota_on_post_sync_is_a_refusal() -> None:
    code = "provider_quota_exhausted"
    assert error_class(429, code, method="POST", path="/v1/sync") is ProviderQuotaExhausted
    assert error_class(429, "too_many_requests", method="POST", path="/v1/sync") is RateLimited
    # the same code on a read: a wait, not a refusal
    assert error_class(429, code, method="GET", path="/v1/sync/status") is RateLimited
    assert not ProviderQuotaExhausted.retryable


def test_error_bodies_are_read_in_the_documented_envelope_and_plainer_ones() -> None:
    assert error_fields(b'{"error": {"code": "x", "message": "m"}}') == ("x", "m", None)
    assert error_fields(b'{"error": "too_many", "message": "slow down"}')[:2] == (
        "too_many",
        "slow down",
    )
    assert error_fields(b'{"code": "y", "message": "n"}')[:2] == ("y", "n")
    assert error_fields(b"<html>busy</html>") == (None, None, None)
    assert error_fields(b'{"error": {"code": 42}}')[0] is None


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after(httpx.Headers({"Retry-After": "7"})) == 7.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28.0 <= retry_after(httpx.Headers({"Retry-After": when})) <= 31.0  # type: ignore[operator]
    assert retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


def test_a_reset_header_is_epoch_or_seconds_told_apart_by_magnitude() -> None:
    now = time.time()
    assert reset_wait(httpx.Headers({"X-RateLimit-Reset": "12"})) == 12.0
    epoch = reset_wait(httpx.Headers({"X-RateLimit-Reset": str(int(now) + 20)}))
    assert epoch is not None and 18.0 <= epoch <= 21.0
    millis = reset_wait(httpx.Headers({"RateLimit-Reset": str(int((now + 20) * 1000))}))
    assert millis is not None and 18.0 <= millis <= 21.0
    # per window: the soonest
    both = httpx.Headers({"X-RateLimit-Reset-Minute": "9", "X-RateLimit-Reset-Hour": "900"})
    assert reset_wait(both) == 9.0
    # an epoch on the service's clock (its Date header), far from this machine's
    service_now = now - 5 * 365 * 86400
    skewed = httpx.Headers(
        {
            "Date": email.utils.formatdate(service_now, usegmt=True),
            "X-RateLimit-Reset": str(int(service_now) + 40),
        }
    )
    wait = reset_wait(skewed)
    assert wait is not None and 38.0 <= wait <= 42.0
    assert reset_wait(httpx.Headers({"X-RateLimit-Reset": "never"})) is None
    assert reset_wait(httpx.Headers({"X-RateLimit-Remaining": "0"})) is None


def test_the_allowance_says_wait_for_the_spent_window_only() -> None:
    assert allowance_wait(5, 100) is None
    minute = allowance_wait(0, 100)
    assert minute is not None and 0 < minute <= 60.1
    hour = allowance_wait(3, 0)
    assert hour is not None and 0 < hour <= 3600.1


# CI runs it (make test-slow): it waits out real Retry-After seconds (tests/extract/test_faults.py
# keeps one 429 burst in make test)
@pytest.mark.slow
def test_a_429_burst_is_waited_out_with_its_retry_after(asgi_env: AsgiEnv) -> None:
    """The contract's own 429 (rate_limited, Retry-After: 1): held and waited, then answered."""

    async def go() -> None:
        async with asgi_env.client(max_attempts=2) as c:
            await c.me()
            await asgi_env.admin().faults(rate_limit_burst=3)
            started = time.monotonic()
            settings = await c.settings()
            elapsed = time.monotonic() - started
            stats = c.stats.snapshot()["GET /v1/settings"]
        assert settings.timezone and stats["rate_limited"] == 3 and elapsed >= 2.8

    run(go())
