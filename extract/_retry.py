"""Which failures are retried, and how long to wait (tenacity's random exponential, capped)."""

from __future__ import annotations

import random

import aiohttp
import httpx
from tenacity import (
    RetryCallState,
    wait_random_exponential,
)
from tenacity.wait import wait_base

# aiohttp errors the transport's own map does not translate to httpx ones count as well
_TRANSPORT_ERRORS = (httpx.TransportError, aiohttp.ClientError, ConnectionError, TimeoutError)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


class _Wait(wait_base):
    """Exponential backoff with full jitter, or the server's ``Retry-After`` when it sent one."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._backoff = wait_random_exponential(multiplier=initial, max=maximum)

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            # a little jitter so concurrent waiters do not return in one burst
            return float(retry_after) + random.uniform(0.0, 0.25)
        return float(self._backoff(retry_state))
