"""Which failures are retried, how long to wait, when to give up: the request's retry policy."""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import aiohttp
import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_any,
    wait_random_exponential,
)
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from ._errors import (
    ExtractError,
    RateLimited,
    ServiceSilent,
    ServiceUnavailable,
    ServiceUnreachable,
)

T = TypeVar("T")

# aiohttp errors the transport's own map does not translate to httpx ones count as well
_TRANSPORT_ERRORS = (httpx.TransportError, aiohttp.ClientError, ConnectionError, TimeoutError)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})

# Attempts for a request that cannot connect at all (refused, unknown host, TLS).
UNREACHABLE_ATTEMPTS = 3

# How long one call may wait for a rate limit to clear (429 ``Retry-After``, a spent allowance)
# before it gives up, in seconds: the edge passes ``CENTSYNC_MAX_WAIT`` (default 10 minutes).
MAX_WAIT_ENV = "CENTSYNC_MAX_WAIT"
DEFAULT_MAX_WAIT = 600.0


class _Wait(wait_base):
    """Exponential backoff with full jitter, or the server's wait when it sent one (a 429's or
    503's ``Retry-After``, a 429's rate-limit reset or the spent window ``/v1/me`` reports)."""

    def __init__(self, initial: float, maximum: float) -> None:
        self._backoff = wait_random_exponential(multiplier=initial, max=maximum)

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            # a little jitter so concurrent waiters do not return in one burst
            return float(retry_after) + random.uniform(0.0, 0.25)
        return float(self._backoff(retry_state))


class _UnreachableThrice(stop_base):
    """Stop after three attempts that could not connect at all (about a second in all), or
    that connected and got no answer within the timeout (three timeouts, then a message)."""

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome else None
        return (
            isinstance(exc, (ServiceUnreachable, ServiceSilent))
            and retry_state.attempt_number >= UNREACHABLE_ATTEMPTS
        )


def rate_limited(exc: BaseException | None) -> bool:
    """A 429 (any code but a spent provider quota): waited out against a time budget, for as
    long as the service says or, when it says nothing, with backoff."""
    return isinstance(exc, RateLimited)


class _StopPastBudget(stop_base):
    """When a call gives up: after ``attempts`` failures the service did not ask us to wait
    out (errors, dropped connections: exponential backoff), or when waiting as a 429 asks
    would take the call past ``budget`` seconds of waiting. A burst of 429s is not a count."""

    def __init__(self, attempts: int, budget: float) -> None:
        self.attempts, self.budget = attempts, budget
        self.failures = 0

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome else None
        if rate_limited(exc):
            return retry_state.idle_for + retry_state.upcoming_sleep > self.budget
        self.failures += 1
        return self.failures >= self.attempts


def past_budget(exc: BaseException, waited: float, budget: float) -> BaseException:
    """``exc`` (a 429 the call will not wait out) saying how long it waited and when to retry."""
    if (
        isinstance(exc, RateLimited)
        and exc.retry_after is not None
        and "wait budget" not in str(exc)  # said once, however many layers pass it on
    ):
        when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=exc.retry_after)
        exc.args = (
            f"{exc}. Waited {waited:.0f} s; the service asks for {exc.retry_after:.0f} s more, "
            f"past the {budget:g} s wait budget ({MAX_WAIT_ENV}): run again after "
            f"{when:%H:%M:%S} UTC",
        )
    elif isinstance(exc, RateLimited) and "wait budget" not in str(exc):
        exc.args = (
            f"{exc}. Waited {waited:.0f} s with backoff (the service said nothing of how long to "
            f"wait) and reached the {budget:g} s wait budget ({MAX_WAIT_ENV}): run again later",
        )
    return exc


@dataclass(frozen=True)
class RetryPolicy:
    """How a call is retried: attempts, backoff, and the budget for waiting out rate limits."""

    max_attempts: int = 8
    backoff_initial: float = 0.2
    backoff_max: float = 30.0
    max_wait: float = DEFAULT_MAX_WAIT

    def should_retry(self, exc: BaseException, *, unknown_outcome_ok: bool = True) -> bool:
        """Whether a failed attempt may be sent again."""
        if not isinstance(exc, ExtractError) or not exc.retryable:
            return False
        if not unknown_outcome_ok and not isinstance(exc, (RateLimited, ServiceUnavailable)):
            # the server may have acted on it: only an explicit "not now" is safe to resend
            return False
        if isinstance(exc, RateLimited) and exc.retry_after is not None:
            # a wait longer than the whole budget (a spent hourly allowance) is not waited at all
            return float(exc.retry_after) <= self.max_wait
        return True

    async def call(
        self,
        send: Callable[[], Awaitable[T]],
        *,
        unknown_outcome_ok: bool,
        before_sleep: Callable[[RetryCallState], None],
    ) -> T:
        """``send()`` until it succeeds, retrying as this policy says."""
        # The first attempt goes out directly: most calls succeed at once, and setting up the
        # retry machinery was about 10 % of the event loop's time in a bulk read. A failure is
        # handed to tenacity as its first attempt's outcome, so backoff, stop and logging are
        # unchanged.
        try:
            return await send()
        except ExtractError as exc:
            if self.max_attempts <= 1 or not self.should_retry(
                exc, unknown_outcome_ok=unknown_outcome_ok
            ):
                raise past_budget(exc, 0.0, self.max_wait)  # noqa: B904 (the same exception)
            first_failure: ExtractError | None = exc
        retrying = AsyncRetrying(
            stop=stop_any(_StopPastBudget(self.max_attempts, self.max_wait), _UnreachableThrice()),
            wait=_Wait(self.backoff_initial, self.backoff_max),
            retry=retry_if_exception(
                lambda exc: self.should_retry(exc, unknown_outcome_ok=unknown_outcome_ok)
            ),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    if first_failure is not None:
                        failure, first_failure = first_failure, None
                        raise failure
                    result = await send()
        except RateLimited as exc:
            waited = retrying.statistics.get("idle_for", 0.0)
            raise past_budget(exc, waited, self.max_wait) from None
        except ServiceSilent as exc:  # how long it waited in all, said once
            tries = retrying.statistics.get("attempt_number", 1)
            exc.args = (f"{exc.args[0]}, {tries} times ({tries * exc.seconds:g} s in all)",)
            raise
        return result
