"""The request path: construction, pacing, one attempt, retries, error mapping, accounting."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import httpx
import orjson
from tenacity import RetryCallState

from ._errors import (
    ApiError,
    ConfigurationError,
    ExtractError,
    RateLimited,
    Redirected,
    ServiceSilent,
    ServiceUnreachable,
    TransportFailure,
    classed_by_status,
    error_class,
)
from ._models import Me
from ._pacing import (
    Allowance,
    HoldPastBudget,
    Pacer,
    allowance_wait,
    has_rate_limit_headers,
    reset_wait,
)
from ._pacing import retry_after as parse_retry_after
from ._retry import (
    _TRANSPORT_ERRORS,
    DEFAULT_MAX_WAIT,
    UNREACHABLE_ATTEMPTS,
    RetryPolicy,
    past_budget,
    rate_limited,
)
from ._runtime import PARSE_NICE, background_priority
from ._stats import RequestStats, endpoint_name
from ._transport import (
    DirectSender,
    _BearerAuth,
    _json,
    _query,
    _Secret,
    check_base_url,
    client_transport,
    network_transport,
    unreachable_reason,
)

log = logging.getLogger("centsync.extract")
T = TypeVar("T")

# List requests in flight per window being read (``read_transactions``).
REQUESTS_PER_WINDOW = 2


class ClientSettings(Protocol):
    """What a client takes from the application's settings (pipelines' ``Settings`` has it)."""

    @property
    def api_base_url(self) -> str: ...
    @property
    def api_key(self) -> str: ...
    @property
    def max_wait(self) -> float: ...
    @property
    def http_transport(self) -> str: ...


def settings_options(settings: ClientSettings) -> dict[str, Any]:
    """The constructor's options a settings object decides (the URL and key aside)."""
    options = {"max_wait": settings.max_wait, "http_transport": settings.http_transport}
    timeout = getattr(settings, "http_timeout", None)  # optional: a settings object may not say
    return options | ({"timeout": timeout} if timeout else {})


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
        http_transport: str = "aiohttp",
        timeout: float = 30.0,
        max_attempts: int = 8,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        max_wait: float = DEFAULT_MAX_WAIT,
        pacing: bool = True,
        concurrency: int = 2,
        max_window_rows: int = 100_000,
        max_rereads: int = 4,
        parse_nice: int = PARSE_NICE,
    ) -> None:
        if not api_key or not api_key.strip():
            raise ConfigurationError("no API key given (set CENTSYNC_API_KEY)")
        inner = transport if http_client is None else client_transport(http_client)
        self.base_url = check_base_url(base_url, inner)
        self._key = _Secret(api_key)
        self._auth = _BearerAuth(api_key)
        self._owns_http = http_client is None
        self._prefix = str(self.base_url).rstrip("/")
        # each window: its page requests plus the summary fetched alongside
        limits = httpx.Limits(max_connections=max(4, concurrency * (REQUESTS_PER_WINDOW + 1)))
        tls = self.base_url.scheme == "https"
        self._http = http_client or httpx.AsyncClient(
            base_url=self._prefix,
            transport=transport or network_transport(limits, tls=tls, kind=http_transport),
            timeout=timeout,
            limits=limits,
        )
        # A caller's own client keeps the whole client path (its hooks, auth and mounts).
        self._direct = (
            DirectSender(self._http, self._prefix, self._auth) if self._owns_http else None
        )
        self.retry_policy = RetryPolicy(max_attempts, backoff_initial, backoff_max, max_wait)
        self.concurrency = concurrency
        self.max_window_rows = max_window_rows
        self.max_rereads = max_rereads
        self.parse_nice = parse_nice
        self._parse_pool: ThreadPoolExecutor | None = None
        self.stats = RequestStats()
        self.pacer = Pacer(enabled=pacing)
        self._pacer_lock = asyncio.Lock()
        self._me: Me | None = None
        # the latest /v1/me asked after a 429 without a wait (monotonic time, its answer)
        self._allowance_asked = -math.inf
        self._allowance_told: float | None = None
        self._last_total: int | None = None
        # the service's clock less this machine's, from the latest answer's `Date` header
        self.service_offset: dt.timedelta | None = None

    @property
    def max_attempts(self) -> int:
        """Attempts per call before a transient failure is given up (the retry policy's)."""
        return self.retry_policy.max_attempts

    @property
    def max_wait(self) -> float:
        """Seconds a call may wait out rate limits before it gives up (the retry policy's)."""
        return self.retry_policy.max_wait

    @classmethod
    def from_settings(cls, settings: ClientSettings, **options: Any) -> Self:
        """A client for the settings' base URL and key, wait budget and transport."""
        if not settings.api_base_url:
            raise ConfigurationError("no API base URL given (set CENTSYNC_API_BASE_URL)")
        return cls(
            settings.api_base_url,
            settings.api_key,
            **{**settings_options(settings), **options},
        )

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

    def _note_service_time(self, header: str | None) -> None:
        """Keep the service's clock offset from an answer's `Date` (kept as is when absent or
        unreadable): what expires on the service (idempotency keys) expires on its clock."""
        if not header:
            return
        try:
            told = parsedate_to_datetime(header)
        except (TypeError, ValueError, IndexError):
            return
        if told.tzinfo is None:
            return  # RFC 9110 dates are GMT; a naive one is not a Date header we can trust
        self.service_offset = told - dt.datetime.now(dt.UTC)

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
            # a spent hourly allowance: waiting past the budget would look like a hang (also
            # for a request already waiting when the hold began)
            try:
                if self.pacer.hold_left() > self.max_wait:
                    raise HoldPastBudget(self.pacer.hold_left(), self.pacer.hold_reason)
                waited = await self.pacer.acquire(self.max_wait)
            except HoldPastBudget as held:
                raise past_budget(
                    RateLimited(
                        status=429,
                        code="rate_limited",
                        message=f"not sent: {held.reason}",
                        method=method,
                        path=path,
                        retry_after=held.left,
                    ),
                    0.0,
                    self.max_wait,
                ) from None
        else:
            waited = self.pacer.acquire_unpaced()
        self.stats.add(endpoint, requests=1, pacing_wait_s=waited)
        started = time.monotonic()
        response: httpx.Response | None = None
        query = _query(params) if params else None
        try:
            if self._direct is not None:
                response = await self._direct.send(method, path, query, content, headers)
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
            raise transport_failure(method, path, exc, self._http.timeout.read) from None
        finally:
            self.pacer.release(None if response is None else response.headers)
        self._note_service_time(response.headers.get("date"))
        self.stats.add(endpoint, bytes=len(response.content))
        log.debug(
            "%s %s -> %d (%.0f ms, %d bytes)",
            method,
            path,
            response.status_code,
            (time.monotonic() - started) * 1000,
            len(response.content),
        )
        if 300 <= response.status_code < 400:
            raise redirected(response, method, path)
        if response.status_code >= 400:
            error = self._error(response, method, path)
            self.stats.add(endpoint, errors=1)
            if response.status_code == 429:
                self.stats.add(endpoint, rate_limited=1)
            if isinstance(error, RateLimited):
                how = "its Retry-After or rate-limit reset"
                if error.retry_after is None:
                    error.retry_after = await self._allowance_wait(path)
                    how = "the allowance /v1/me reports spent"
                if error.retry_after is not None:
                    self.pacer.hold(error.retry_after, reason=f"429 {error.error_code}, {how}")
            raise error
        return response

    def _error(self, response: httpx.Response, method: str, path: str) -> ApiError:
        """The answer's error, classed by meaning (``error_class``): its code when known, else
        its status; any 429 but a spent provider quota is a wait."""
        code, message, details = error_fields(response.content)
        retry_after = wait_hint(response.headers) if response.status_code == 429 else None
        if retry_after is None:
            retry_after = parse_retry_after(response.headers)
        cls = error_class(response.status_code, code, method=method, path=path)
        if classed_by_status(response.status_code, code):
            log.info(
                "%s %s -> %d %s: a code centsync does not know, taken as %s",
                method,
                path,
                response.status_code,
                code or "(none)",
                cls.__name__,
            )
        return cls(
            status=response.status_code,
            code=code or cls.code or f"http_{response.status_code}",
            message=self._redact(str(message)) if message else response.reason_phrase,
            method=method,
            path=path,
            request_id=response.headers.get("x-request-id"),
            details=details,
            retry_after=retry_after,
        )

    async def _allowance_wait(self, path: str) -> float | None:
        """After a 429 that says nothing of how long to wait: what ``/v1/me`` reports left of
        the allowance (one unretried request; at most one a second however many requests met
        the 429). None: it reports room, or cannot be read (backoff decides)."""
        if path == "/v1/me":
            return None  # it is what was refused
        now = time.monotonic()
        if now - self._allowance_asked < 1.0:
            return self._allowance_told
        self._allowance_asked, self._allowance_told = now, None
        try:
            response = await self._send_once(
                "GET", "/v1/me", "GET /v1/me", None, None, {"Accept": "application/json"}, False
            )
            me = Me.parse(_json(response), response.text)
        except (ExtractError, KeyError, TypeError, AttributeError):
            return None
        self._allowance_told = allowance_wait(me.minute_remaining, me.hour_remaining)
        return self._allowance_told

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
            if rate_limited(exc):
                # waiting as the service asks is shown, with what is left of the budget
                log.warning(
                    "rate limited on %s %s: waiting %.1f s %s (%.0f s of the "
                    "%.0f s wait budget used)",
                    method,
                    path,
                    wait,
                    "as the service asks" if exc.retry_after is not None else "(backoff)",  # type: ignore[union-attr]
                    state.idle_for - wait,
                    self.max_wait,
                )
                return
            if isinstance(exc, ServiceSilent):  # what it waits for, and for how long
                log.warning(
                    "%s (attempt %d of at most %d); trying again in %.1f s",
                    exc, state.attempt_number, UNREACHABLE_ATTEMPTS, wait,
                )  # fmt: skip
                return
            level = logging.WARNING if wait >= 10 else logging.INFO
            log.log(level, "retrying in %.2f s after: %s", wait, exc)

        return await self.retry_policy.call(
            lambda: self._send_once(method, path, endpoint, clean, content, headers, paced),
            unknown_outcome_ok=retry_unknown_outcome,
            before_sleep=before_sleep,
        )

    async def _get_json(
        self, path: str, params: Mapping[str, str | None] | None = None
    ) -> tuple[Any, str]:
        response = await self.request("GET", path, params=params)
        return _json(response), response.text


def transport_failure(
    method: str, path: str, exc: BaseException, read_timeout: float | None
) -> TransportFailure:
    """A transport error by what happened: no connection at all, a connection that was never
    answered within the timeout, or one dropped (the request may have arrived)."""
    reason = unreachable_reason(exc)
    if reason is not None:
        return ServiceUnreachable(method, path, exc, reason)
    if isinstance(exc, httpx.ReadTimeout):  # connected; the answer never came
        return ServiceSilent(method, path, exc, read_timeout or 0.0)
    return TransportFailure(method, path, exc)


def redirected(response: httpx.Response, method: str, path: str) -> Redirected:
    """A 3xx, named with where it points (scheme, host and path only: a query may hold a
    token) and the base URL to set when it is the same API elsewhere."""
    raw = response.headers.get("location", "")
    try:
        there = response.request.url.join(raw) if raw else None
    except httpx.InvalidURL:
        there = None
    if there is None:
        return Redirected(method, path, response.status_code, "", "")
    origin = f"{there.scheme}://{there.host}" + (f":{there.port}" if there.port else "")
    shown = origin + there.path
    tail = response.request.url.path
    base = origin + there.path[: -len(tail)] if tail and there.path.endswith(tail) else ""
    return Redirected(method, path, response.status_code, shown, base)


def wait_hint(headers: httpx.Headers) -> float | None:
    """How long a 429 asks to wait: its `Retry-After`, else its rate-limit reset (None: neither)."""
    hint = parse_retry_after(headers)
    return hint if hint is not None else reset_wait(headers)


def error_fields(content: bytes) -> tuple[str | None, str | None, list[dict[str, Any]] | None]:
    """(code, message, details) of an error body: the documented ``{"error": {"code",
    "message"}}``, else what an error body plainly says (``{"error": "code"}``, a top-level
    ``code``/``message``); Nones when it says nothing (the status alone then classes it)."""
    try:
        body = orjson.loads(content)
    except orjson.JSONDecodeError:
        return None, None, None
    if not isinstance(body, dict):
        return None, None, None
    err = body.get("error")
    if isinstance(err, str):
        err = {"code": err, "message": body.get("message") or body.get("error_description")}
    if not isinstance(err, dict):
        err = body
    code, message, raw_details = err.get("code"), err.get("message"), err.get("details")
    details = (
        [d for d in raw_details if isinstance(d, dict)] if isinstance(raw_details, list) else None
    )
    return (
        code if isinstance(code, str) and code else None,
        message if isinstance(message, str) else None,
        details,
    )
