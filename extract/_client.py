"""The async client: transport, auth, pacing, retries, errors, accounting, readers, writers."""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import logging
import os
import random
import sys
import time
from collections import deque
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import httpx
import orjson
import polars as pl
from httpx_aiohttp import AiohttpTransport
from httpx_aiohttp.transport import AiohttpResponseStream
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)
from tenacity.wait import wait_base

from ._errors import (
    ApiError,
    ConfigurationError,
    DriftError,
    ExtractError,
    RateLimited,
    ResponseFormatError,
    ServiceUnavailable,
    TransportFailure,
    error_class,
)
from ._frames import (
    ACCOUNT_WIRE,
    CONNECTION_WIRE,
    SYNC_STATUS_WIRE,
    TRANSACTION_WIRE,
    PageChunk,
    cut_page,
    frame_from_chunks,
)
from ._models import (
    AccountsSummary,
    Me,
    NetWorth,
    Settings,
    Spending,
    SyncRequest,
    Transaction,
    TransactionsSummary,
)
from ._pacing import Allowance, Pacer, has_rate_limit_headers
from ._paging import (
    PAGE_LIMIT,
    Tally,
    TransactionBatch,
    Window,
    WindowCheck,
    WindowDone,
    WindowEvent,
    WindowReport,
    WindowRows,
    WindowVoid,
    group_windows,
    month_windows,
    split_window,
)
from ._stats import RequestStats, endpoint_name

log = logging.getLogger("centsync.extract")
T = TypeVar("T")

LIST_FILTERS = frozenset({"type", "account_id", "category_id", "expense_goal_id", "search", "sort"})
KEY_EXPIRY_WARNING = dt.timedelta(days=30)
# Pages parsed together while a window is read: one NDJSON parse per batch, bodies then freed.
PARSE_BATCH_PAGES = 100
# List requests in flight per window being read (``read_transactions``).
REQUESTS_PER_WINDOW = 2
# Page requests started ahead of the page being awaited (the slots bound those in flight).
READ_AHEAD_PAGES = 16
# How much lower than the event loop's the CPU priority of the reader's parsing threads is
# (Linux nice, per thread; 0 keeps them equal). On a busy machine the scheduler shares the
# cores equally between runnable threads, and the event loop, which keeps the requests
# flowing, waited behind the parsing it had itself handed out: about 0.9 ms per wake-up in a
# 1,000,000-row read (perf sched). Parsing never waits for long: the loop sleeps on the
# network most of the time.
PARSE_NICE = 10
_IN_PROCESS = (httpx.ASGITransport, httpx.MockTransport, httpx.WSGITransport)
# aiohttp errors the transport's own map does not translate to httpx ones count as well
_TRANSPORT_ERRORS = (httpx.TransportError, aiohttp.ClientError, ConnectionError, TimeoutError)
_RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})


# httpx keeps a parsed URL as ``URL._uri_reference``, a NamedTuple (httpx 0.28, pinned); where
# that is not so, every URL is parsed from its string.
_FAST_URL = isinstance(getattr(httpx.URL("http://a/"), "_uri_reference", None), tuple)


@lru_cache(maxsize=4096)
def _query_pair(name: str, value: str) -> str:
    return quote(name, safe="") + "=" + quote(value, safe="")


def _query(params: Mapping[str, str]) -> str:
    """``params`` URL-encoded (what ``urlencode(params, quote_via=quote)`` gives, each
    name=value pair encoded once: windows repeat their dates, reads their page numbers)."""
    return "&".join([_query_pair(k, str(v)) for k, v in params.items()])


def _encoded(headers: httpx.Headers) -> bool:
    """Whether a response names a ``Content-Encoding`` (one pass over the raw headers)."""
    return any(k.lower() == b"content-encoding" for k, _ in headers.raw)


class _Secret:
    """A value that no repr, str or vars() dump shows."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<hidden>"

    __str__ = __repr__


class _NoCookies(httpx.Cookies):
    """The API authenticates by key, never by cookie: skip httpx's per-response cookie parsing
    (measured at about 6 % of a bulk read's CPU)."""

    def extract_cookies(self, response: httpx.Response) -> None:
        return None


class _BearerAuth(httpx.Auth):
    """Adds the key to each request; holds it where no repr or log line shows it."""

    __slots__ = ("_header",)

    def __init__(self, key: str) -> None:
        self._header = f"Bearer {key}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = self._header
        yield request

    def headers(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` plus the key's header (for requests sent below the client)."""
        return {**base, "authorization": self._header}

    def __repr__(self) -> str:
        return "_BearerAuth(<hidden>)"


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (Linux, macOS), else asyncio's own loop."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - Windows
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on the loop ``new_event_loop`` gives."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


# Polars' worker threads, which do the parsing the client's threads hand them (by name).
_POLARS_THREADS = ("polars-", "async-executor")


def background_priority(level: int) -> None:
    """Put the calling thread, and Polars' worker threads, at nice ``level`` at least.

    An executor initializer for the client's parsing threads. Linux keeps a nice value per
    thread, so this touches no thread but those; elsewhere, or where the system refuses,
    nothing changes. An unprivileged process cannot take a raised nice value back, so Polars'
    worker threads stay at ``level`` for the life of the process (``parse_nice=0`` leaves
    every thread as it is). Polars starts its threads on first use: those started later by a
    parsing thread inherit its level.
    """
    if level <= 0 or not sys.platform.startswith("linux"):
        return
    _at_least(0, level)
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue  # the thread has ended
        if name.startswith(_POLARS_THREADS):
            _at_least(int(tid), level)


def _at_least(tid: int, level: int) -> None:
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < level:
            os.setpriority(os.PRIO_PROCESS, tid, min(19, level))
    except OSError:
        pass


def network_transport(limits: httpx.Limits | None = None) -> httpx.AsyncBaseTransport:
    """The default network layer under ``httpx.AsyncClient``: aiohttp's C-accelerated HTTP/1.1
    (``httpx-aiohttp``). The client API stays httpx's; measured here it reads pages about twice
    as fast as httpx's own httpcore transport (docs/benchmarks.md). Set
    ``CENTSYNC_HTTP_TRANSPORT=httpcore`` to use httpx's own."""
    limits = limits or httpx.Limits(max_connections=8)
    choice = os.environ.get("CENTSYNC_HTTP_TRANSPORT", "aiohttp").strip().lower()
    if choice == "httpcore":
        return httpx.AsyncHTTPTransport(limits=limits)
    if choice != "aiohttp":
        raise ConfigurationError(
            f"CENTSYNC_HTTP_TRANSPORT={choice!r} is not known; use 'aiohttp' or 'httpcore'"
        )
    # httpx-aiohttp hands a body to httpx in 16 KiB pieces, each through a chain of async
    # generators; taking whatever has arrived, up to 1 MiB, at a time cut the instructions a
    # 67 KB page request costs the client by 15-19 % (callgrind, docs/benchmarks.md)
    AiohttpResponseStream.CHUNK_SIZE = max(AiohttpResponseStream.CHUNK_SIZE, 1 << 20)
    return AiohttpTransport(limits=limits)


def _is_loopback(host: str) -> bool:
    if host in {"localhost", "localhost.localdomain"} or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_base_url(base_url: str, transport: object | None) -> httpx.URL:
    """The base URL, refused when it would send the key in clear text over a network."""
    url = httpx.URL(base_url)
    if url.scheme == "https":
        return url
    if url.scheme != "http":
        raise ConfigurationError(f"base URL must be https:// (got scheme {url.scheme!r})")
    if _is_loopback(url.host) or isinstance(transport, _IN_PROCESS):
        return url
    raise ConfigurationError(
        f"base URL {url.scheme}://{url.host} is not loopback: use https:// so the key is "
        "never sent in clear text"
    )


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


def _date_param(value: dt.date | str | None) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _as_date(value: dt.date | str | None) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(value)


@dataclass(frozen=True)
class _WindowTooBig:
    """Internal event: the window holds more than the reader may hold at once."""

    halves: list[Window]
    total: int


class AsyncApiClient:
    """Async client of the Personal Finance Data API v1 (one per key and event loop).

    ``transport`` (or a ready ``http_client``) lets the same code run over loopback HTTP,
    in-process over ``httpx.ASGITransport``, or against the real service.
    """

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
        max_retry_after: float = 3700.0,
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
            transport=transport or network_transport(limits),
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
        self.max_retry_after = max_retry_after
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
    def from_env(cls, **options: Any) -> AsyncApiClient:
        """A client from ``CENTSYNC_API_BASE_URL`` and ``CENTSYNC_API_KEY``."""
        base_url = os.environ.get("CENTSYNC_API_BASE_URL")
        key = os.environ.get("CENTSYNC_API_KEY", "")
        if not base_url:
            raise ConfigurationError("CENTSYNC_API_BASE_URL is not set")
        return cls(base_url, key, **options)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={str(self.base_url)!r}, key=<hidden>)"

    async def __aenter__(self) -> AsyncApiClient:
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
        retry_after = getattr(exc, "retry_after", None)
        return retry_after is None or retry_after <= self.max_retry_after

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
                raise
            first_failure: ExtractError | None = exc
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=_Wait(self.backoff_initial, self.backoff_max),
            retry=retry_if_exception(
                lambda exc: self._should_retry(exc, unknown_outcome_ok=retry_unknown_outcome)
            ),
            before_sleep=before_sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                if first_failure is not None:
                    failure, first_failure = first_failure, None
                    raise failure
                response = await self._send_once(
                    method, path, endpoint, clean, content, headers, paced
                )
        return response

    async def _get_json(
        self, path: str, params: Mapping[str, str | None] | None = None
    ) -> tuple[Any, str]:
        response = await self.request("GET", path, params=params)
        return _json(response), response.text

    # ------------------------------------------------------------------ readers

    async def _fetch_me(self) -> tuple[Me, httpx.Headers]:
        response = await self.request("GET", "/v1/me", paced=False)
        me = self._me = Me.parse(_json(response), response.text)
        if me.key_expires_at is not None:
            left = me.key_expires_at - dt.datetime.now(dt.UTC)
            if left < KEY_EXPIRY_WARNING:
                log.warning(
                    "the API key expires on %s (in %d days): create a new key before then",
                    me.key_expires_at.date().isoformat(),
                    max(0, left.days),
                )
        return me, response.headers

    async def me(self) -> Me:
        """``GET /v1/me``: identity, scopes, key expiry and the current allowance."""
        if self.pacer.enabled and not self.pacer.configured:
            await self._ensure_pacer()  # fetches /v1/me once to set the pace
            if self._me is not None:
                return self._me
        return (await self._fetch_me())[0]

    async def settings(self) -> Settings:
        """``GET /v1/settings``: timezone (decides each booked_at), currency, locale."""
        return Settings.parse(*await self._get_json("/v1/settings"))

    async def accounts(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/accounts``: every visible account (the account schema)."""
        response = await self.request("GET", "/v1/accounts")
        return frame_from_chunks([cut_page(response.content)], ACCOUNT_WIRE, raw=raw)

    async def accounts_summary(self) -> AccountsSummary:
        """``GET /v1/accounts/summary``: assets, liabilities, net worth, per-type sums."""
        return AccountsSummary.parse(*await self._get_json("/v1/accounts/summary"))

    async def connections(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/connections``: bank connections (providers are read here, never assumed)."""
        response = await self.request("GET", "/v1/connections")
        return frame_from_chunks([cut_page(response.content)], CONNECTION_WIRE, raw=raw)

    async def sync_status(self, *, raw: bool = True) -> pl.DataFrame:
        """``GET /v1/sync/status``: last and next sync per connection."""
        response = await self.request("GET", "/v1/sync/status")
        return frame_from_chunks([cut_page(response.content)], SYNC_STATUS_WIRE, raw=raw)

    async def net_worth(self) -> NetWorth:
        """``GET /v1/analytics/net-worth``."""
        return NetWorth.parse(*await self._get_json("/v1/analytics/net-worth"))

    async def spending(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        *,
        group_by: str = "category",
    ) -> Spending:
        """``GET /v1/analytics/spending`` grouped by ``category``, ``merchant`` or ``month``."""
        params = {"from": _date_param(from_), "to": _date_param(to), "group_by": group_by}
        return Spending.parse(*await self._get_json("/v1/analytics/spending", params))

    async def transactions_summary(
        self,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        **filters: str,
    ) -> TransactionsSummary:
        """``GET /v1/transactions/summary``: count and per-type sums for the list's filters."""
        params = self._list_params(from_, to, filters)
        params.pop("sort", None)
        return TransactionsSummary.parse(*await self._get_json("/v1/transactions/summary", params))

    async def transaction(self, transaction_id: str) -> Transaction:
        """``GET /v1/transactions/{id}`` (includes ``notes``)."""
        doc, raw = await self._get_json(f"/v1/transactions/{transaction_id}")
        return Transaction.parse(doc, raw)

    @staticmethod
    def _list_params(
        from_: dt.date | str | None, to: dt.date | str | None, filters: Mapping[str, str]
    ) -> dict[str, str | None]:
        unknown = set(filters) - LIST_FILTERS
        if unknown:
            raise TypeError(f"unknown transaction filter(s): {sorted(unknown)}")
        params: dict[str, str | None] = {"from": _date_param(from_), "to": _date_param(to)}
        params.update({k: str(v) for k, v in filters.items() if v is not None})
        return params

    async def transactions_page(
        self,
        page: int = 1,
        *,
        limit: int = PAGE_LIMIT,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        raw: bool = True,
        **filters: str,
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        """One page of ``GET /v1/transactions`` and its envelope (total, page, pages)."""
        chunk = await self._list_page(page, limit, self._list_params(from_, to, filters))
        return frame_from_chunks([chunk], TRANSACTION_WIRE, raw=raw), chunk.envelope

    async def _list_page(
        self, page: int, limit: int, params: Mapping[str, str | None]
    ) -> PageChunk:
        response = await self.request(
            "GET", "/v1/transactions", params={**params, "page": str(page), "limit": str(limit)}
        )
        return cut_page(response.content)

    async def transaction_date_range(self, **filters: str) -> tuple[dt.date, dt.date] | None:
        """Oldest and newest ``booked_at`` matching the filters (two requests), or None."""
        params = self._list_params(None, None, filters)
        params["sort"] = "booked_at"
        newest = await self._list_page(1, 1, params)
        total = self._last_total = newest.total or 0
        if total == 0:
            return None
        oldest = await self._list_page(total, 1, params)
        dates = []
        for chunk in (oldest, newest):
            frame = frame_from_chunks([chunk], TRANSACTION_WIRE, raw=False)
            if frame.height == 0:  # the ledger shrank in between: read it all
                return None
            dates.append(frame.get_column("booked_at")[0])
        return dates[0], dates[1]

    async def read_transactions(
        self,
        windows: Iterable[tuple[dt.date | str | None, dt.date | str | None]],
        *,
        concurrency: int | None = None,
        raw: bool = True,
        verify: bool = True,
        **filters: str,
    ) -> AsyncGenerator[TransactionBatch, None]:
        """Read date windows drift-safely; yields one verified batch per (sub-)window, in order.

        A window whose ``total`` exceeds ``max_window_rows`` is halved by date (bounded windows
        only), so memory stays bounded by that size times ``concurrency``.
        """
        self._list_params(None, None, filters)  # reject unknown filters before any request
        async for batch in self._read_windows(windows, filters, concurrency, raw, verify):
            yield batch

    async def _read_windows(
        self,
        windows: Iterable[tuple[dt.date | str | None, dt.date | str | None]],
        filters: Mapping[str, str],
        concurrency: int | None,
        raw: bool,
        verify: bool,
    ) -> AsyncGenerator[TransactionBatch, None]:
        queue = deque((_as_date(a), _as_date(b)) for a, b in windows)
        width = max(1, concurrency or self.concurrency)
        # list requests in flight, shared by the windows: a lone window still uses every slot
        # two requests per window in flight: the next page is on its way while the client is
        # busy with the last one (measured 10-20 % faster than one per window at 1M rows)
        slots = asyncio.Semaphore(width * REQUESTS_PER_WINDOW)
        running: deque[asyncio.Task[list[TransactionBatch]]] = deque()

        def start_next() -> None:
            if queue:
                window = queue.popleft()
                running.append(
                    asyncio.create_task(
                        self._read_window(window, filters, raw, verify, None, slots)
                    )
                )

        try:
            for _ in range(width):
                start_next()
            while running:
                batches = await running.popleft()
                start_next()
                for batch in batches:
                    yield batch
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def read_all_transactions(
        self, *, raw: bool = True, verify: bool = True, **filters: str
    ) -> tuple[pl.DataFrame, list[WindowReport]]:
        """Every transaction matching the filters, read by calendar month, as one frame."""
        frames, reports = [], []
        windows = await self.default_windows(window_rows=20_000, **filters)
        self._list_params(None, None, filters)
        async for batch in self._read_windows(windows, filters, None, raw, verify):
            frames.append(batch.frame)
            reports.append(batch.report)
        if not frames:
            return frame_from_chunks([], TRANSACTION_WIRE, raw=raw), reports
        return pl.concat(frames, how="vertical", rechunk=True), reports

    async def default_windows(self, *, window_rows: int = 20_000, **filters: str) -> list[Window]:
        """Windows over the ledger's date range (two requests), open at both ends.

        Whole calendar months, several to a window when months are small, so that a window
        holds about ``window_rows`` rows: few partial pages and summaries, bounded memory.
        """
        span = await self.transaction_date_range(**filters)
        if span is None:
            return [(None, None)]
        months = month_windows(span[0], span[1], open_ends=True)
        total = self._last_total or 0
        per_window = max(1, window_rows * len(months) // max(total, 1))
        return group_windows(months, per_window)

    async def stream_window(
        self,
        window: tuple[dt.date | str | None, dt.date | str | None],
        *,
        raw: bool = True,
        verify: bool = True,
        concurrency: int | None = None,
        batch_pages: int | None = None,
        **filters: str,
    ) -> AsyncGenerator[WindowEvent, None]:
        """Read one window drift-safely as a stream, for loaders that must not hold it whole.

        Yields ``WindowRows`` (a parsed batch of pages, in page order) as pages arrive. When the
        window changed under the reader it yields ``WindowVoid``: every row of the pass so far
        is void and the window is read again from page 1. ``WindowDone`` (with the report)
        comes last, once the pass passed every check, so a loader stages rows and commits them
        only on ``WindowDone``. Memory holds a few batches (``batch_pages`` pages each),
        whatever the window's size.
        """
        bounds = (_as_date(window[0]), _as_date(window[1]))
        self._list_params(None, None, filters)
        slots = asyncio.Semaphore(max(1, concurrency or self.concurrency))
        report = WindowReport(window=bounds, filters=dict(filters))
        events = self._stream_window(
            bounds,
            filters,
            raw,
            verify,
            slots,
            report,
            None,
            max(1, batch_pages or PARSE_BATCH_PAGES),
        )
        async for event in events:
            if not isinstance(event, _WindowTooBig):  # never split here (no row cap)
                yield event

    async def _read_window(
        self,
        window: Window,
        filters: Mapping[str, str],
        raw: bool,
        verify: bool,
        parent: Window | None,
        slots: asyncio.Semaphore,
    ) -> list[TransactionBatch]:
        """A whole window as one frame (split in halves by date when it is too big)."""
        report = WindowReport(window=window, filters=dict(filters), split_from=parent)
        parts: list[pl.DataFrame] = []
        events = self._stream_window(
            window, filters, raw, verify, slots, report, self.max_window_rows, PARSE_BATCH_PAGES
        )
        async for event in events:
            if isinstance(event, WindowRows):
                parts.append(event.frame)
            elif isinstance(event, WindowVoid):
                parts.clear()
            elif isinstance(event, _WindowTooBig):
                log.debug("window %s holds %s rows: splitting", window, event.total)
                out: list[TransactionBatch] = []
                for half in event.halves:
                    out.extend(
                        await self._read_window(half, filters, raw, verify, parent or window, slots)
                    )
                return out
        # an accepted pass always yields rows (an empty window yields one empty batch)
        frame = parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)
        return [TransactionBatch(frame, report)]

    async def _stream_window(
        self,
        window: Window,
        filters: Mapping[str, str],
        raw: bool,
        verify: bool,
        slots: asyncio.Semaphore,
        report: WindowReport,
        max_rows: int | None,
        batch_pages: int,
    ) -> AsyncGenerator[WindowEvent | _WindowTooBig, None]:
        started = time.monotonic()
        params = self._list_params(window[0], window[1], filters)

        async def fetch(number: int) -> PageChunk:
            async with slots:
                return await self._list_page(number, PAGE_LIMIT, params)

        def parse_and_tally(chunks: list[PageChunk]) -> tuple[pl.DataFrame, Tally]:
            frame = frame_from_chunks(chunks, TRANSACTION_WIRE, raw=raw)
            return frame, Tally.of(frame)

        def parse(chunks: list[PageChunk]) -> asyncio.Task[tuple[pl.DataFrame, Tally]]:
            # Polars releases the GIL: parsing (and the check's tallies) overlap the requests
            # still going, and keep the event loop free to send them
            return asyncio.create_task(self._in_parse_pool(parse_and_tally, chunks))

        for _ in range(self.max_rereads + 1):
            check = WindowCheck(PAGE_LIMIT)
            ahead: deque[asyncio.Task[PageChunk]] = deque()
            parsing: deque[asyncio.Task[tuple[pl.DataFrame, Tally]]] = deque()
            # The server's summary is one more observation of the window: taken alongside the
            # pages (off the critical path), it must agree with the rows read, whatever moved.
            summary_task = (
                asyncio.create_task(self.transactions_summary(window[0], window[1], **filters))
                if verify
                else None
            )
            try:
                first = await fetch(1)
                report.requests += 1
                reason = check.first(first)
                if (
                    reason is None
                    and max_rows is not None
                    and (check.total or 0) > max_rows
                    and (halves := split_window(window)) is not None
                ):
                    yield _WindowTooBig(halves, check.total or 0)
                    return
                # Pages are parsed a batch at a time as they arrive and their bytes dropped; a
                # bounded number of pages is requested ahead of the one awaited.
                batch: list[PageChunk] = [first]
                number, following = 1, 2
                while reason is None and number < check.pages:
                    while following <= check.pages and len(ahead) < READ_AHEAD_PAGES:
                        ahead.append(asyncio.create_task(fetch(following)))
                        following += 1
                    chunk = await ahead.popleft()
                    number += 1
                    report.requests += 1
                    reason = check.page(chunk, number)
                    batch.append(chunk)
                    if reason is None and len(batch) >= batch_pages:
                        parsing.append(parse(batch))
                        batch = []
                        while len(parsing) > 1:
                            part, tally = await parsing.popleft()
                            check.add(part, tally)
                            yield WindowRows(part)
                if reason is None:
                    if batch:
                        parsing.append(parse(batch))
                    del batch
                    while parsing:
                        part, tally = await parsing.popleft()
                        check.add(part, tally)
                        yield WindowRows(part)
                    reason = await self._in_parse_pool(check.done)
                if summary_task is not None:
                    summary = await summary_task
                    report.requests += 1
                    if reason is None:
                        reason = check.agrees(summary)
                        report.verified = reason is None
            finally:
                for task in ahead:
                    task.cancel()
                await asyncio.gather(*ahead, return_exceptions=True)
                report.requests += sum(
                    1 for t in ahead if not t.cancelled() and t.exception() is None
                )
                if summary_task is not None and not summary_task.done():
                    summary_task.cancel()
                    await asyncio.gather(summary_task, return_exceptions=True)
                # a thread cannot be stopped: let abandoned parses end, then drop them
                await asyncio.gather(*parsing, return_exceptions=True)
            if reason is None:
                report.total = check.total or 0
                report.rows = check.rows
                report.pages = check.pages
                report.elapsed_s = time.monotonic() - started
                yield WindowDone(report)
                return
            report.rereads += 1
            report.reasons.append(reason)
            self.stats.add("GET /v1/transactions", rereads=1)
            log.info("window %s changed while read (%s): reading it again", window, reason)
            yield WindowVoid(reason)
        report.elapsed_s = time.monotonic() - started
        raise DriftError(
            f"window {window} kept changing after {report.rereads} re-reads: "
            + "; ".join(report.reasons[-3:])
        )

    # ------------------------------------------------------------------ writers

    async def create_transaction(
        self,
        *,
        account_id: str,
        amount: int,
        concept: str,
        booked_at: dt.date | str,
        idempotency_key: str,
        type: str | None = None,
        category_id: str | None = None,
        expense_goal_id: str | None = None,
        notes: str | None = None,
    ) -> Transaction:
        """``POST /v1/transactions``; resent with the same ``idempotency_key`` when unsure.

        Derive ``idempotency_key`` from the originating event (never a fresh random value per
        call), so a crash and rerun replays instead of creating twice.
        """
        if not isinstance(amount, int) or isinstance(amount, bool):
            raise TypeError("amount must be integer cents")
        if not idempotency_key:
            raise ValueError("idempotency_key is required: derive it from the originating event")
        body: dict[str, Any] = {
            "account_id": account_id,
            "amount": amount,
            "concept": concept,
            "booked_at": _date_param(booked_at),
        }
        optional = {
            "type": type,
            "category_id": category_id,
            "expense_goal_id": expense_goal_id,
            "notes": notes,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        response = await self.request(
            "POST", "/v1/transactions", json=body, idempotency_key=idempotency_key
        )
        return Transaction.parse(
            _json(response),
            response.text,
            replayed=response.headers.get("idempotent-replayed", "").lower() == "true",
        )

    async def update_transaction(self, transaction_id: str, **fields: Any) -> Transaction:
        """``PATCH /v1/transactions/{id}`` with only the fields to change."""
        if not fields:
            raise ValueError("nothing to update")
        body = {k: (_date_param(v) if isinstance(v, dt.date) else v) for k, v in fields.items()}
        response = await self.request("PATCH", f"/v1/transactions/{transaction_id}", json=body)
        return Transaction.parse(_json(response), response.text)

    async def assign_expense(self, transaction_id: str, expense_goal_id: str | None) -> Transaction:
        """``POST /v1/transactions/{id}/expense``: assign to an Expense, or clear with None."""
        response = await self.request(
            "POST",
            f"/v1/transactions/{transaction_id}/expense",
            json={"expense_goal_id": expense_goal_id},
        )
        return Transaction.parse(_json(response), response.text)

    async def trigger_sync(
        self, provider: str | None = None, *, idempotency_key: str | None = None
    ) -> SyncRequest:
        """``POST /v1/sync`` for every provider or one; a spent quota raises, never retried."""
        body = {} if provider is None else {"provider": provider}
        response = await self.request(
            "POST",
            "/v1/sync",
            json=body,
            idempotency_key=idempotency_key,
            retry_unknown_outcome=idempotency_key is not None,
        )
        return SyncRequest.parse(_json(response), response.text)


def _json(response: httpx.Response) -> Any:
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise ResponseFormatError(
            f"{response.request.method} {response.request.url.path}: body is not JSON"
        ) from None


__all__ = ["AsyncApiClient", "TransportFailure", "check_base_url"]
