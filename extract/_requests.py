"""The request path: construction, pacing, one attempt, retries, error mapping, accounting."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self, TypeVar

import httpx
import orjson
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_any,
)
from tenacity.stop import stop_base

from ._errors import (
    ApiError,
    ConfigurationError,
    ExtractError,
    RateLimited,
    ServiceUnavailable,
    ServiceUnreachable,
    TransportFailure,
    error_class,
)
from ._models import (
    Me,
)
from ._pacing import Allowance, Pacer, has_rate_limit_headers
from ._retry import _TRANSPORT_ERRORS, _Wait
from ._runtime import PARSE_NICE, background_priority
from ._stats import RequestStats, endpoint_name
from ._transport import (
    _FAST_URL,
    _BearerAuth,
    _encoded,
    _json,
    _NoCookies,
    _query,
    _Secret,
    check_base_url,
    network_transport,
    unreachable_reason,
)

log = logging.getLogger("centsync.extract")
T = TypeVar("T")

# List requests in flight per window being read (``read_transactions``).
REQUESTS_PER_WINDOW = 2


# Attempts for a request that cannot connect at all (refused, unknown host, TLS).
UNREACHABLE_ATTEMPTS = 3


class _UnreachableThrice(stop_base):
    """Stop after three attempts that could not connect at all (about a second in all)."""

    def __call__(self, retry_state: RetryCallState) -> bool:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome else None
        return (
            isinstance(exc, ServiceUnreachable)
            and retry_state.attempt_number >= UNREACHABLE_ATTEMPTS
        )


# How long one call may wait for a rate limit to clear (429 ``Retry-After``, a spent allowance)
# before it gives up: ``CENTSYNC_MAX_WAIT`` seconds, default 10 minutes.
MAX_WAIT_ENV = "CENTSYNC_MAX_WAIT"
DEFAULT_MAX_WAIT = 600.0


def _max_wait_from_env() -> float:
    raw = os.environ.get(MAX_WAIT_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_WAIT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also refuses nan
        raise ConfigurationError(
            f"{MAX_WAIT_ENV}={raw!r} is not a number of seconds: set it to e.g. 600, or unset it"
        )
    return value


def _rate_limited(exc: BaseException | None) -> bool:
    """A 429 ``rate_limited`` that says how long to wait: waited out against a time budget."""
    return isinstance(exc, RateLimited) and exc.retry_after is not None


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
        if _rate_limited(exc):
            return retry_state.idle_for + retry_state.upcoming_sleep > self.budget
        self.failures += 1
        return self.failures >= self.attempts


def _past_budget(exc: BaseException, waited: float, budget: float) -> BaseException:
    """``exc`` (a 429 the call will not wait out) saying how long it waited and when to retry."""
    if isinstance(exc, RateLimited) and exc.retry_after is not None:
        when = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=exc.retry_after)
        exc.args = (
            f"{exc}. Waited {waited:.0f} s; the service asks for {exc.retry_after:.0f} s more, "
            f"past the {budget:g} s wait budget ({MAX_WAIT_ENV}): run again after "
            f"{when:%H:%M:%S} UTC",
        )
    return exc


class RequestCore:
    """The client's transport core: what every reader and writer sends its requests through."""

    if TYPE_CHECKING:  # defined by AsyncApiClient (_client.py)

        async def _fetch_me(self) -> tuple[Me, httpx.Headers]: ...

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        max_attempts: int = 8,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        max_wait: float | None = None,
        pacing: bool = True,
        concurrency: int = 2,
        max_window_rows: int = 100_000,
        max_rereads: int = 4,
        parse_nice: int = PARSE_NICE,
    ) -> None:
        if not api_key or not api_key.strip():
            raise ConfigurationError("no API key given (set CENTSYNC_API_KEY)")
        inner = transport if http_client is None else getattr(http_client, "_transport", None)
        self.base_url = check_base_url(base_url, inner)
        self._key = _Secret(api_key)
        self._auth = _BearerAuth(api_key)
        self._owns_http = http_client is None
        self._prefix = str(self.base_url).rstrip("/")
        # each window: its page requests plus the summary fetched alongside
        limits = httpx.Limits(max_connections=max(4, concurrency * (REQUESTS_PER_WINDOW + 1)))
        self._http = http_client or httpx.AsyncClient(
            base_url=self._prefix,
            transport=transport or network_transport(limits, tls=self.base_url.scheme == "https"),
            timeout=timeout,
            limits=limits,
        )
        # Requests go straight to the transport the client would pick for the base URL (with
        # the client's default headers, timeouts and the key): httpx's per-request client layer
        # (URL merging, auth and redirect flows, hooks) was about 18 % of the event loop's time
        # in a 1,000,000-row read (py-spy).
        # A caller's own client keeps the whole client path (its hooks, auth and mounts).
        self._direct: httpx.AsyncBaseTransport | None = None
        if self._owns_http:
            self._http._cookies = _NoCookies()  # no public switch for this in httpx 0.28
            self._direct = self._http._transport_for_url(httpx.URL(self._prefix + "/"))
            # lower-case names, so a call's own header replaces the default of the same name
            self._default_headers = {k.lower(): v for k, v in self._http.headers.items()}
            self._timeouts = self._http.timeout.as_dict()
            self._paths: dict[str, Any] = {}
            self._headers: dict[tuple[tuple[str, str], ...], httpx.Headers] = {}
        self.max_attempts = max_attempts
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_wait = _max_wait_from_env() if max_wait is None else max_wait
        self.concurrency = concurrency
        self.max_window_rows = max_window_rows
        self.max_rereads = max_rereads
        self.parse_nice = parse_nice
        self._parse_pool: ThreadPoolExecutor | None = None
        self.stats = RequestStats()
        self.pacer = Pacer(enabled=pacing)
        self._pacer_lock = asyncio.Lock()
        self._me: Me | None = None
        self._last_total: int | None = None

    @classmethod
    def from_env(cls, **options: Any) -> Self:
        """A client from ``CENTSYNC_API_BASE_URL`` and ``CENTSYNC_API_KEY``."""
        base_url = os.environ.get("CENTSYNC_API_BASE_URL")
        key = os.environ.get("CENTSYNC_API_KEY", "")
        if not base_url:
            raise ConfigurationError("CENTSYNC_API_BASE_URL is not set")
        return cls(base_url, key, **options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={str(self.base_url)!r}, key=<hidden>)"

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._parse_pool is not None:
            self._parse_pool.shutdown(wait=False)
            self._parse_pool = None
        if self._owns_http:
            await self._http.aclose()

    async def _in_parse_pool(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in the client's parsing threads (see ``parse_nice``)."""
        if self._parse_pool is None:
            level = 0
            if self.parse_nice > 0 and hasattr(os, "getpriority"):
                # relative to this thread, which runs the event loop
                level = os.getpriority(os.PRIO_PROCESS, 0) + self.parse_nice
            self._parse_pool = ThreadPoolExecutor(
                max_workers=max(2, 2 * self.concurrency),
                thread_name_prefix="centsync-parse",
                initializer=background_priority,
                initargs=(level,),
            )
        return await asyncio.get_running_loop().run_in_executor(self._parse_pool, fn, *args)

    # ------------------------------------------------------------------ transport core

    def _redact(self, text: str) -> str:
        key = self._key.reveal()
        return text.replace(key, "[redacted]") if key in text else text

    async def _ensure_pacer(self) -> None:
        if not self.pacer.enabled or self.pacer.configured:
            return
        async with self._pacer_lock:
            if not self.pacer.configured:
                # /v1/me itself goes out unpaced: it is what tells the pace
                me, headers = await self._fetch_me()
                self.pacer.configure(
                    Allowance(
                        me.minute_limit, me.hour_limit, me.minute_remaining, me.hour_remaining
                    ),
                    headers=has_rate_limit_headers(headers),
                )
                log.debug("%s", self.pacer.describe())

    async def _send_once(
        self,
        method: str,
        path: str,
        endpoint: str,
        params: Mapping[str, str] | None,
        content: bytes | None,
        headers: Mapping[str, str],
        paced: bool,
    ) -> httpx.Response:
        if paced:
            left = self.pacer.hold_left()
            if left > self.max_wait:
                # a spent hourly allowance: waiting past the budget would look like a hang
                raise _past_budget(
                    RateLimited(
                        status=429,
                        code="rate_limited",
                        message=f"not sent: {self.pacer.hold_reason}",
                        method=method,
                        path=path,
                        retry_after=left,
                    ),
                    0.0,
                    self.max_wait,
                )
            waited = await self.pacer.acquire()
        else:
            waited = self.pacer.acquire_unpaced()
        self.stats.add(endpoint, requests=1, pacing_wait_s=waited)
        started = time.monotonic()
        response: httpx.Response | None = None
        query = _query(params) if params else None
        try:
            if self._direct is not None:
                response = await self._send_direct(method, path, query, content, headers)
            else:
                # one absolute URL string: httpx merges and re-encodes ``params`` at twice the
                # cost
                url = self._prefix + path + ("" if query is None else "?" + query)
                response = await self._http.request(
                    method, url, content=content, headers=headers, auth=self._auth
                )
        except _TRANSPORT_ERRORS as exc:
            self.stats.add(endpoint, errors=1, transport_errors=1)
            log.info("%s %s: transport error %s", method, path, type(exc).__name__)
            reason = unreachable_reason(exc)
            if reason is not None:
                raise ServiceUnreachable(method, path, exc, reason) from None
            raise TransportFailure(method, path, exc) from None
        finally:
            self.pacer.release(None if response is None else response.headers)
        self.stats.add(endpoint, bytes=len(response.content))
        log.debug(
            "%s %s -> %d (%.0f ms, %d bytes)",
            method,
            path,
            response.status_code,
            (time.monotonic() - started) * 1000,
            len(response.content),
        )
        if response.status_code >= 400:
            error = self._error(response, method, path)
            self.stats.add(endpoint, errors=1)
            if response.status_code == 429:
                self.stats.add(endpoint, rate_limited=1)
                if isinstance(error, RateLimited) and error.retry_after is not None:
                    self.pacer.hold(error.retry_after, reason="429 rate_limited, Retry-After")
            raise error
        return response

    def _url(self, path: str, query: str | None) -> httpx.URL:
        """The base URL plus ``path`` and an already encoded ``query``.

        httpx 0.28 validates a URL string character by character in Python: 16 % of the event
        loop's time in a bulk read. Each path is parsed by httpx once; a request's URL is that
        parse with its query set (our own encoding, which httpx would keep as it is).
        """
        if _FAST_URL:
            ref = self._paths.get(path)
            if ref is None:
                if len(self._paths) >= 256:
                    self._paths.clear()
                ref = self._paths[path] = httpx.URL(self._prefix + path)._uri_reference
            if ref.query is None:
                url = httpx.URL.__new__(httpx.URL)
                url._uri_reference = ref._replace(query=query)
                return url
        return httpx.URL(self._prefix + path + ("" if query is None else "?" + query))

    def _request_headers(self, headers: Mapping[str, str]) -> httpx.Headers:
        """The client's defaults, the call's headers and the key, as httpx headers (built once
        per distinct set: a bulk read sends the same ones thousands of times)."""
        key = tuple(headers.items())
        built = self._headers.get(key)
        if built is None:
            built = httpx.Headers(
                self._auth.headers(
                    {**self._default_headers, **{k.lower(): v for k, v in headers.items()}}
                )
            )
            if "idempotency-key" not in built:  # one per write: not worth keeping
                if len(self._headers) >= 64:
                    self._headers.clear()
                self._headers[key] = built
        return built

    async def _send_direct(
        self,
        method: str,
        path: str,
        query: str | None,
        content: bytes | None,
        headers: Mapping[str, str],
    ) -> httpx.Response:
        """What ``AsyncClient.send`` does for one request without redirects or auth flows."""
        assert self._direct is not None
        request = httpx.Request(
            method,
            self._url(path, query),
            headers=self._request_headers(headers),  # copied by the request
            content=content,
            extensions={"timeout": self._timeouts},
        )
        response = await self._direct.handle_async_request(request)
        response.request = request
        stream = response.stream
        if isinstance(stream, httpx.AsyncByteStream) and not _encoded(response.headers):
            # The body as the transport yields it. httpx's decoding layers, a no-op for an
            # unencoded body, cost about a tenth of a request's instructions (callgrind);
            # ``_content`` is where ``aread`` keeps what it read (httpx 0.28, pinned).
            try:
                response._content = b"".join([chunk async for chunk in stream])
            finally:
                response.is_closed = True
                await stream.aclose()
            return response
        try:
            await response.aread()  # httpx decodes the body
        except BaseException:
            await response.aclose()
            raise
        return response

    def _error(self, response: httpx.Response, method: str, path: str) -> ApiError:
        code = message = None
        details: list[dict[str, Any]] | None = None
        try:
            body = orjson.loads(response.content)
            err = body.get("error") if isinstance(body, dict) else None
            if isinstance(err, dict):
                code = err.get("code")
                message = err.get("message")
                raw_details = err.get("details")
                if isinstance(raw_details, list):
                    details = [d for d in raw_details if isinstance(d, dict)]
        except orjson.JSONDecodeError:
            pass
        retry_after: float | None = None
        header = response.headers.get("retry-after")
        if header is not None:
            try:
                retry_after = max(0.0, float(header))
            except ValueError:
                retry_after = None
        cls = error_class(response.status_code, code if isinstance(code, str) else None)
        return cls(
            status=response.status_code,
            code=code if isinstance(code, str) else cls.code or f"http_{response.status_code}",
            message=self._redact(str(message)) if message else response.reason_phrase,
            method=method,
            path=path,
            request_id=response.headers.get("x-request-id"),
            details=details,
            retry_after=retry_after,
        )

    def _should_retry(self, exc: BaseException, *, unknown_outcome_ok: bool = True) -> bool:
        if not isinstance(exc, ExtractError) or not exc.retryable:
            return False
        if not unknown_outcome_ok and not isinstance(exc, (RateLimited, ServiceUnavailable)):
            # the server may have acted on it: only an explicit "not now" is safe to resend
            return False
        if _rate_limited(exc):
            # a wait longer than the whole budget (a spent hourly allowance) is not waited at all
            return float(exc.retry_after) <= self.max_wait  # type: ignore[attr-defined]
        return True

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str | None] | None = None,
        json: Any = None,
        idempotency_key: str | None = None,
        paced: bool = True,
        retry_unknown_outcome: bool = True,
    ) -> httpx.Response:
        """One logical call: paced, retried on transient failures, error-mapped.

        Every attempt of a call resends the same body and the same ``Idempotency-Key``. With
        ``retry_unknown_outcome=False`` (a non-idempotent write without a key) a dropped
        connection or a 5xx is not resent; only 429 ``rate_limited`` and 503 are.
        """
        if paced:
            await self._ensure_pacer()
        endpoint = endpoint_name(method, path)
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        headers: dict[str, str] = {"Accept": "application/json"}
        content = None
        if json is not None:
            content = orjson.dumps(json)
            headers["Content-Type"] = "application/json"
        if idempotency_key is not None:
            headers["Idempotency-Key"] = idempotency_key

        def before_sleep(state: RetryCallState) -> None:
            self.stats.add(endpoint, retries=1)
            exc = state.outcome.exception() if state.outcome else None
            wait = state.next_action.sleep if state.next_action else 0.0
            if _rate_limited(exc):
                # waiting as the service asks is shown, with what is left of the budget
                log.warning(
                    "rate limited on %s %s: waiting %.1f s as the service asks (%.0f s of the "
                    "%.0f s wait budget used)",
                    method,
                    path,
                    wait,
                    state.idle_for - wait,
                    self.max_wait,
                )
                return
            level = logging.WARNING if wait >= 10 else logging.INFO
            log.log(level, "retrying in %.2f s after: %s", wait, exc)

        # The first attempt goes out directly: most calls succeed at once, and setting up the
        # retry machinery was about 10 % of the event loop's time in a bulk read. A failure is
        # handed to tenacity as its first attempt's outcome, so backoff, stop and logging are
        # unchanged.
        try:
            return await self._send_once(method, path, endpoint, clean, content, headers, paced)
        except ExtractError as exc:
            if self.max_attempts <= 1 or not self._should_retry(
                exc, unknown_outcome_ok=retry_unknown_outcome
            ):
                raise _past_budget(exc, 0.0, self.max_wait)  # noqa: B904 (the same exception)
            first_failure: ExtractError | None = exc
        retrying = AsyncRetrying(
            stop=stop_any(_StopPastBudget(self.max_attempts, self.max_wait), _UnreachableThrice()),
            wait=_Wait(self.backoff_initial, self.backoff_max),
            retry=retry_if_exception(
                lambda exc: self._should_retry(exc, unknown_outcome_ok=retry_unknown_outcome)
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
                    response = await self._send_once(
                        method, path, endpoint, clean, content, headers, paced
                    )
        except RateLimited as exc:
            waited = retrying.statistics.get("idle_for", 0.0)
            raise _past_budget(exc, waited, self.max_wait) from None
        return response

    async def _get_json(
        self, path: str, params: Mapping[str, str | None] | None = None
    ) -> tuple[Any, str]:
        response = await self.request("GET", path, params=params)
        return _json(response), response.text
