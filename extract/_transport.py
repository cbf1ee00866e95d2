"""How requests travel: the network transport, the base URL check, the key's auth header,
query encoding and the direct send path.

This is the one adapter over httpx and httpx-aiohttp internals: every private name of theirs
the client relies on is read here (`DirectSender`, `client_transport`, `_FAST_URL`, and httpx's
command line left out of its import: `_SKIP_CLI`), pinned by tests/extract/test_transport.py and
allowed by tests/test_private_reaches.py. aiohttp is imported here too, with the CA stores of
the default TLS contexts it makes at import loaded at their first connection (`_DEFER_TLS`).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import socket
import ssl
import sys
import threading
from collections.abc import Generator, Mapping
from functools import lru_cache
from typing import Any
from urllib.parse import quote

# httpx imports its own command line (`httpx._main`, with click, rich and pygments) whenever
# those are installed, as Dagster's dependencies are: about 30 ms of every centsync process
# (docs/benchmarks.md), for a command no one runs from here. httpx falls back to a stub `main`
# when that import fails (httpx 0.28, pinned: tests/extract/test_transport.py); the module is
# refused for httpx's first import only, so a later `import httpx._main` still works.
_SKIP_CLI = "httpx" not in sys.modules and "httpx._main" not in sys.modules
if _SKIP_CLI:
    sys.modules["httpx._main"] = None  # type: ignore[assignment]


# aiohttp makes two TLS contexts when its connector module is first imported, for connections
# given no context of their own, and each loads the system's CA store there
# (`set_default_verify_paths`: 45-50 ms each on the benchmarks' host, about 0.1 s of every
# centsync process). centsync's transports always give their own (`_tls_context`, or none for
# loopback http), so the store of a context made during that import is loaded when the context
# first wraps a connection instead (`_loads_on_first_use`): the same store, later, or never.
_DEFERRED: list[ssl.SSLContext] = []


def _defer_verify_paths(context: ssl.SSLContext) -> None:
    _DEFERRED.append(context)


def _loads_on_first_use(context: ssl.SSLContext) -> None:
    """`context` loads the system's CA store (what its deferred `set_default_verify_paths`
    would have) before it first wraps a socket or a BIO, once, whichever thread asks."""
    lock = threading.Lock()
    loaded = False

    def ready() -> None:
        nonlocal loaded
        with lock:
            if not loaded:
                ssl.SSLContext.set_default_verify_paths(context)
                loaded = True

    def wrap_socket(*args: Any, **kwargs: Any) -> ssl.SSLSocket:
        ready()
        return ssl.SSLContext.wrap_socket(context, *args, **kwargs)

    def wrap_bio(*args: Any, **kwargs: Any) -> ssl.SSLObject:
        ready()
        return ssl.SSLContext.wrap_bio(context, *args, **kwargs)

    context.wrap_socket = wrap_socket  # type: ignore[method-assign]
    context.wrap_bio = wrap_bio  # type: ignore[method-assign]


_DEFER_TLS = "aiohttp.connector" not in sys.modules
if _DEFER_TLS:
    ssl.SSLContext.set_default_verify_paths = _defer_verify_paths  # type: ignore[method-assign,assignment]
try:
    import aiohttp
finally:
    if _DEFER_TLS:
        del ssl.SSLContext.set_default_verify_paths  # the C method is inherited again
        while _DEFERRED:
            _loads_on_first_use(_DEFERRED.pop())
import httpx  # noqa: E402
import orjson  # noqa: E402
from httpx_aiohttp import AiohttpTransport  # noqa: E402

if _SKIP_CLI:
    del sys.modules["httpx._main"]

from ._errors import (  # noqa: E402
    ConfigurationError,
    ResponseFormatError,
)

_IN_PROCESS = (httpx.ASGITransport, httpx.MockTransport, httpx.WSGITransport)


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


# httpx-aiohttp hands a body to httpx in 16 KiB pieces, each through a chain of async
# generators; taking whatever has arrived, up to 1 MiB, at a time cut the instructions a 67 KB
# page request costs the client by 15-19 % (callgrind, docs/benchmarks.md).
BODY_CHUNK = 1 << 20


class LargeChunkAiohttpTransport(AiohttpTransport):
    """httpx-aiohttp's transport, its responses read in pieces of up to ``BODY_CHUNK``.

    The stream's ``CHUNK_SIZE`` (a public class attribute of httpx-aiohttp 0.2) is set on each
    response's own stream, so no other user of httpx-aiohttp in the process is affected.
    """

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        stream = response.stream
        if getattr(stream, "CHUNK_SIZE", BODY_CHUNK) < BODY_CHUNK:
            stream.CHUNK_SIZE = BODY_CHUNK  # type: ignore[union-attr]
        return response


TRANSPORTS = ("aiohttp", "httpcore")


def network_transport(
    limits: httpx.Limits | None = None, *, tls: bool = True, kind: str = "aiohttp"
) -> httpx.AsyncBaseTransport:
    """The network layer under ``httpx.AsyncClient``: by default aiohttp's C-accelerated
    HTTP/1.1 (``httpx-aiohttp``). The client API stays httpx's; measured here it reads pages
    about twice as fast as httpx's own httpcore transport (docs/benchmarks.md). ``kind=
    "httpcore"`` uses httpx's own (the edge passes it from ``CENTSYNC_HTTP_TRANSPORT``)."""
    limits = limits or httpx.Limits(max_connections=8)
    choice = kind.strip().lower()
    if choice == "httpcore":
        return httpx.AsyncHTTPTransport(limits=limits)
    if choice != "aiohttp":
        raise ConfigurationError(
            f"HTTP transport {choice!r} (CENTSYNC_HTTP_TRANSPORT) is not known; "
            "use 'aiohttp' or 'httpcore'"
        )
    # `tls=False` is for a plain-http base URL, which `check_base_url` allows only on loopback
    # (the sandbox): such a transport never makes a TLS connection, so it loads no CA bundle.
    return LargeChunkAiohttpTransport(limits=limits, verify=_tls_context() if tls else False)


@lru_cache(maxsize=1)
def _tls_context() -> ssl.SSLContext:
    """One verifying TLS context for the process, as httpx makes it (certifi's CA bundle, or
    SSL_CERT_FILE / SSL_CERT_DIR): loading the bundle took 20 ms of every client's creation,
    two clients a refresh. A context is shared safely by connections and threads."""
    return httpx.create_ssl_context()


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


def _date_param(value: dt.date | str | None) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, dt.date) else str(value)


def _as_date(value: dt.date | str | None) -> dt.date | None:
    if value is None or isinstance(value, dt.date):
        return value
    return dt.date.fromisoformat(value)


def _json(response: httpx.Response) -> Any:
    try:
        return orjson.loads(response.content)
    except orjson.JSONDecodeError:
        raise ResponseFormatError(
            f"{response.request.method} {response.request.url.path}: body is not JSON"
        ) from None


def unreachable_reason(exc: BaseException) -> str | None:
    """Why no connection was made, when that is what happened (None for other transport errors).

    httpx-aiohttp reports every failed connect as ``ConnectTimeout``; the cause chain says what
    it really was.
    """
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ssl.SSLError):
            # aiohttp's ClientConnectorSSLError is an SSLError without `reason`
            return f"the TLS handshake failed ({getattr(cause, 'reason', None) or cause})"
        if isinstance(cause, socket.gaierror):
            return f"the host name could not be resolved ({cause.strerror or cause})"
        if isinstance(cause, ConnectionRefusedError):
            return "the connection was refused (nothing listens at that address and port)"
        if isinstance(cause, aiohttp.ClientConnectorCertificateError):
            return f"the service's TLS certificate was refused ({cause})"
        cause = cause.__cause__ or cause.__context__
    return None


def client_transport(http_client: httpx.AsyncClient) -> httpx.AsyncBaseTransport | None:
    """The transport a caller's own client sends through (to judge its base URL)."""
    return getattr(http_client, "_transport", None)  # no public accessor in httpx 0.28


class DirectSender:
    """Sends a request straight to the transport the client would pick for the base URL, with
    the client's default headers, timeouts and the key.

    httpx's per-request client layer (URL merging, auth and redirect flows, hooks) was about
    18 % of the event loop's time in a 1,000,000-row read (py-spy). Only for a client the
    request core made itself: a caller's own client keeps the whole client path (its hooks,
    auth and mounts).
    """

    def __init__(self, http: httpx.AsyncClient, prefix: str, auth: _BearerAuth) -> None:
        http._cookies = _NoCookies()  # no public switch for this in httpx 0.28
        self._target = http._transport_for_url(httpx.URL(prefix + "/"))
        self._prefix = prefix
        self._auth = auth
        # lower-case names, so a call's own header replaces the default of the same name
        self._default_headers = {k.lower(): v for k, v in http.headers.items()}
        self._timeouts = http.timeout.as_dict()
        self._paths: dict[str, Any] = {}
        self._headers: dict[tuple[tuple[str, str], ...], httpx.Headers] = {}

    def url(self, path: str, query: str | None) -> httpx.URL:
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

    def request_headers(self, headers: Mapping[str, str]) -> httpx.Headers:
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

    async def send(
        self,
        method: str,
        path: str,
        query: str | None,
        content: bytes | None,
        headers: Mapping[str, str],
    ) -> httpx.Response:
        """What ``AsyncClient.send`` does for one request without redirects or auth flows."""
        request = httpx.Request(
            method,
            self.url(path, query),
            headers=self.request_headers(headers),  # copied by the request
            content=content,
            extensions={"timeout": self._timeouts},
        )
        response = await self._target.handle_async_request(request)
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
