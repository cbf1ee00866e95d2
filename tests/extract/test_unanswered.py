"""A service that does not answer as a service: one that accepts the connection and never
answers (each try named with its wait, given up after three), and one that redirects to
another host (named with where it points, not "body is not JSON"). Real loopback sockets."""

from __future__ import annotations

import logging
import time

import pytest

from centsync.extract import AsyncApiClient, Redirected, ServiceSilent
from helpers import redirecting, silent

from .conftest import run

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("transport", ["aiohttp", "httpcore"])
def test_a_silent_service_is_named_at_each_try_and_given_up(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> BaseException:
        with silent() as url:
            async with AsyncApiClient(
                url, "pfd_live_k", timeout=0.3, http_transport=transport, backoff_initial=0.01
            ) as c:
                with pytest.raises(ServiceSilent) as e:
                    await c.me()
                return e.value

    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="centsync.extract"):
        error = run(go())
    assert time.monotonic() - started < 5  # three tries of 0.3 s, not eight with backoff
    assert str(error) == "GET /v1/me: connected, but no answer within 0.3 s, 3 times (0.9 s in all)"
    tries = [r.getMessage() for r in caplog.records if "no answer within 0.3 s" in r.getMessage()]
    assert [t.split("(")[1].split(")")[0] for t in tries] == [
        "attempt 1 of at most 3",
        "attempt 2 of at most 3",
    ]


def test_a_redirect_is_named_with_where_it_points() -> None:
    async def go() -> BaseException:
        with redirecting(308, "https://api.other.example/base", "sig=abc") as url:
            async with AsyncApiClient(url, "pfd_live_k") as c:
                with pytest.raises(Redirected) as e:
                    await c.me()
                return e.value

    error = run(go())
    assert str(error) == (
        "GET /v1/me: redirected (308) to https://api.other.example/base/v1/me "
        "(if that is your service: CENTSYNC_API_BASE_URL=https://api.other.example/base)"
    )
    assert "sig=abc" not in str(error) and error.outcome.name == "USAGE"
