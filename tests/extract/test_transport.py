"""How requests leave the client: the direct transport path, the first attempt outside the
retry machinery, and whole bodies over the aiohttp network layer."""

from __future__ import annotations

import contextlib
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest

from centsync.extract import AsyncApiClient, InternalError, NotFound

from .conftest import FAST, run

KEY = "sk_test_transport_0123456789abcdef"
BASE = "http://api.test"


def recording(
    answers: list[httpx.Response] | None = None,
) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    """A transport that records every request and gives the answers in turn (200 {} after)."""
    seen: list[httpx.Request] = []
    queue = list(answers or [])

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return queue.pop(0) if queue else httpx.Response(200, json={})

    return httpx.MockTransport(handler), seen


def test_requests_carry_the_clients_defaults_the_key_and_its_timeout() -> None:
    transport, seen = recording()

    async def go() -> None:
        async with AsyncApiClient(BASE, KEY, transport=transport, pacing=False, timeout=7.5) as c:
            await c.request("GET", "/v1/settings", params={"a": "x y", "b": None})
            await c.request("POST", "/v1/transactions", json={"n": 1}, idempotency_key="evt-1")

    run(go())
    get, post = seen
    for request in seen:
        assert request.headers["authorization"] == f"Bearer {KEY}"
        assert request.headers["user-agent"].startswith("python-httpx/")
        assert "gzip" in request.headers["accept-encoding"]
        assert request.headers["accept"] == "application/json"
        assert request.extensions["timeout"] == dict.fromkeys(
            ("connect", "read", "write", "pool"), 7.5
        )
    assert str(get.url) == f"{BASE}/v1/settings?a=x%20y"
    assert post.headers["idempotency-key"] == "evt-1"
    assert post.headers["content-type"] == "application/json"
    assert json.loads(post.content) == {"n": 1}


@pytest.mark.parametrize("base", [BASE, f"{BASE}/api/", "http://127.0.0.1:8080"])
def test_request_urls_are_what_httpx_would_parse_from_the_string(base: str) -> None:
    """The client sets each request's query on a once-parsed base URL: the result must be the
    URL httpx makes of the whole string, for any value."""
    transport, seen = recording()
    values = ["x y", "a&b=c", "ü€", "50%", "a+b", "/../?#", "", "2026-11-21"]

    async def go() -> None:
        async with AsyncApiClient(base, KEY, transport=transport, pacing=False) as c:
            for value in values:
                await c.request("GET", "/v1/transactions", params={"search": value, "page": "2"})
            await c.request("GET", "/v1/transactions/a b%2F..")

    run(go())
    prefix = base.rstrip("/")
    for request, value in zip(seen, values, strict=False):
        text = f"{prefix}/v1/transactions?" + urlencode(
            {"search": value, "page": "2"}, quote_via=quote
        )
        assert request.url == httpx.URL(text)
        assert str(request.url) == str(httpx.URL(text))
    assert seen[-1].url == httpx.URL(f"{prefix}/v1/transactions/a b%2F..")


def test_each_write_carries_its_own_idempotency_key() -> None:
    transport, seen = recording()

    async def go() -> None:
        async with AsyncApiClient(BASE, KEY, transport=transport, pacing=False) as c:
            for key in ("evt-1", "evt-2", None, "evt-3"):
                await c.request("POST", "/v1/transactions", json={"n": 1}, idempotency_key=key)
            await c.request("GET", "/v1/settings")

    run(go())
    assert [r.headers.get("idempotency-key") for r in seen] == [
        "evt-1",
        "evt-2",
        None,
        "evt-3",
        None,
    ]


def test_a_callers_own_client_keeps_its_event_hooks() -> None:
    transport, seen = recording()
    hooked: list[str] = []

    async def hook(request: httpx.Request) -> None:
        hooked.append(request.url.path)

    async def go() -> None:
        http = httpx.AsyncClient(
            base_url=BASE, transport=transport, event_hooks={"request": [hook]}
        )
        async with http, AsyncApiClient(BASE, KEY, http_client=http, pacing=False) as c:
            await c.request("GET", "/v1/settings")

    run(go())
    assert hooked == ["/v1/settings"]
    assert seen[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize(
    ("statuses", "attempts", "ok"),
    [
        ([500, 502, 200], 3, True),  # the first failure goes on to tenacity, then succeeds
        ([500, 500, 500, 500], 3, False),  # the attempt budget counts the first attempt
        ([404], 1, False),  # a permanent error is never retried
    ],
)
def test_retries_count_the_attempt_made_before_the_retry_machinery(
    statuses: list[int], attempts: int, ok: bool
) -> None:
    def answer(status: int) -> httpx.Response:
        if status == 200:
            return httpx.Response(200, json={"ok": True})
        code = "not_found" if status == 404 else "internal_error"
        return httpx.Response(status, json={"error": {"code": code, "message": "no"}})

    transport, seen = recording([answer(s) for s in statuses])

    async def go() -> None:
        async with AsyncApiClient(
            BASE, KEY, transport=transport, pacing=False, max_attempts=3, **FAST
        ) as c:
            if ok:
                response = await c.request("GET", "/v1/settings")
                assert response.json() == {"ok": True}
            else:
                expected = InternalError if statuses[0] == 500 else NotFound
                with pytest.raises(expected) as err:
                    await c.request("GET", "/v1/settings")
                assert err.value.status == statuses[attempts - 1]
            stats = c.stats.snapshot()["GET /v1/settings"]
            assert (stats["requests"], stats["retries"]) == (attempts, attempts - 1)

    run(go())
    assert len(seen) == attempts


@contextlib.asynccontextmanager
async def serving(path: str, handler: Any) -> AsyncIterator[str]:
    """An aiohttp web server on a free loopback port answering GET ``path``; yields its URL."""
    from aiohttp import web

    app = web.Application()
    app.router.add_get(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@pytest.mark.e2e
def test_bodies_larger_than_the_read_size_arrive_whole_over_loopback() -> None:
    from aiohttp import web

    record = {"id": "x" * 36, "concept": "é" * 500}
    body = json.dumps({"data": [record] * 9000, "total": 9000}).encode()
    assert len(body) > 3 * (1 << 20)  # several of the transport's 1 MiB reads

    async def handler(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == f"Bearer {KEY}"
        return web.Response(body=body, content_type="application/json")

    async def go() -> None:
        async with serving("/v1/big", handler) as url, AsyncApiClient(url, KEY, pacing=False) as c:
            for _ in range(3):
                response = await c.request("GET", "/v1/big")
                assert response.content == body
            assert c.stats.snapshot()["GET /v1/big"]["bytes"] == 3 * len(body)

    run(go())


@pytest.mark.e2e
def test_compressed_bodies_are_decoded_and_plain_ones_read_as_sent() -> None:
    from aiohttp import web

    body = json.dumps({"data": [{"id": str(i)} for i in range(2000)]}).encode()

    async def handler(request: web.Request) -> web.Response:
        if request.query.get("gzip"):
            return web.Response(
                body=gzip.compress(body),
                headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
            )
        return web.Response(body=body, content_type="application/json")

    async def go() -> None:
        async with serving("/v1/list", handler) as url, AsyncApiClient(url, KEY, pacing=False) as c:
            plain = await c.request("GET", "/v1/list")
            packed = await c.request("GET", "/v1/list", params={"gzip": "1"})
        assert plain.content == packed.content == body
        assert plain.is_closed and packed.is_closed
        assert packed.headers["content-encoding"] == "gzip"

    run(go())


def test_request_urls_are_parsed_from_strings_where_httpx_keeps_no_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("centsync.extract._transport._FAST_URL", False)
    transport, seen = recording()

    async def go() -> None:
        async with AsyncApiClient(BASE, KEY, transport=transport, pacing=False) as c:
            await c.request("GET", "/v1/transactions", params={"search": "a b", "page": "2"})

    run(go())
    assert seen[0].url == httpx.URL(f"{BASE}/v1/transactions?search=a%20b&page=2")


def test_one_verifying_tls_context_per_process_and_none_loaded_for_loopback_http() -> None:
    """Loading the CA bundle costs 20 ms: https clients share one verifying context; a plain
    http transport (allowed only on loopback) never makes a TLS connection and loads none."""
    import ssl

    from centsync.extract._transport import _tls_context, network_transport

    first, second = network_transport(tls=True), network_transport(tls=True)
    assert first.ssl_context is second.ssl_context is _tls_context()  # type: ignore[attr-defined]
    assert _tls_context().verify_mode == ssl.CERT_REQUIRED and _tls_context().check_hostname
    plain = network_transport(tls=False)
    assert plain.ssl_context is not _tls_context()  # type: ignore[attr-defined]


def test_the_httpx_internals_the_direct_path_relies_on() -> None:
    """What extract/_transport.py reads or sets in httpx 0.28 and httpx-aiohttp 0.2 (pinned):
    a change there fails here, not in a refresh."""
    import inspect

    from httpx_aiohttp import AiohttpTransport

    from centsync.extract._transport import _FAST_URL, LargeChunkAiohttpTransport

    client = httpx.AsyncClient(base_url=BASE)
    assert isinstance(client._cookies, httpx.Cookies)
    assert list(inspect.signature(client._transport_for_url).parameters) == ["url"]
    assert client._transport_for_url(httpx.URL(BASE + "/")) is client._transport
    assert _FAST_URL and hasattr(httpx.URL(BASE)._uri_reference, "_replace")
    response = httpx.Response(200, content=b"x")
    assert response._content == b"x"
    # the large-chunk transport sets the stream's chunk size per response, not on the class
    assert issubclass(LargeChunkAiohttpTransport, AiohttpTransport)
    from httpx_aiohttp.transport import AiohttpResponseStream

    assert AiohttpResponseStream.CHUNK_SIZE == 16 * 1024
    assert "self.CHUNK_SIZE" in inspect.getsource(AiohttpResponseStream.__aiter__)


@pytest.mark.e2e
def test_a_large_chunk_transport_reads_whole_bodies_and_leaves_the_class_alone() -> None:
    from httpx_aiohttp.transport import AiohttpResponseStream

    body = b"y" * (200 * 1024)

    async def handler(request: Any) -> Any:
        from aiohttp import web

        return web.Response(body=body)

    async def go() -> None:
        async with serving("/v1/big", handler) as url, AsyncApiClient(url, KEY, pacing=False) as c:
            response = await c.request("GET", "/v1/big")
            assert response.content == body

    run(go())
    assert AiohttpResponseStream.CHUNK_SIZE == 16 * 1024


def test_httpx_is_imported_without_its_command_line_which_still_loads_when_asked() -> None:
    """`_transport` refuses `httpx._main` to httpx's first import (click, rich and pygments,
    ~30 ms of every process) and lets it load afterwards; httpx falls back to a stub `main`
    when that import fails: if a new httpx stopped doing so, importing the client would fail
    here."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import centsync.extract\n"
        "import httpx\n"
        "assert 'rich' not in sys.modules and 'pygments' not in sys.modules, 'CLI loaded'\n"
        "assert 'httpx._main' not in sys.modules\n"
        "assert callable(httpx.main) and httpx.AsyncClient\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('rich') is not None:\n"
        "    import httpx._main\n"
        "    assert hasattr(httpx._main, 'main')\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA, and a certificate for localhost it signed: (ca.pem, server.pem, server.key)."""
    import datetime as dt
    import ipaddress

    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def signed(subject: str, key: Any, issuer: str, issuer_key: Any, ca: bool) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
            builder = builder.add_extension(usage, critical=True)
            builder = builder.add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
        else:
            names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
            builder = builder.add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                critical=False,
            )
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = signed("centsync test CA", ca_key, "centsync test CA", ca_key, True)
    server = signed("localhost", key, "centsync test CA", ca_key, False)
    paths = folder / "ca.pem", folder / "server.pem", folder / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.mark.e2e
def test_aiohttps_default_tls_contexts_load_the_ca_store_at_their_first_connection(
    tmp_path: Path,
) -> None:
    """aiohttp 3.14 makes two TLS contexts when its connector is imported, each loading the
    system's CA store (~0.1 s of every process). `_transport` imports aiohttp with that load
    deferred to each context's first connection. Here, in a fresh process whose CA store is a
    test CA (`SSL_CERT_FILE`), the contexts hold no certificate after the import, and a request
    that relies on aiohttp's own verifying context reaches a loopback TLS server that CA signed:
    the store was loaded before the handshake. A release that stops making them at import, or
    makes them another way, fails the first check."""
    import os
    import subprocess
    import sys

    ca, cert, key = _certificates(tmp_path)
    code = f"""
import asyncio, ssl
import centsync.extract
import aiohttp
from aiohttp import connector
made = [connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED]
assert [c.cert_store_stats()["x509_ca"] for c in made] == [0, 0], "loaded at import"
assert "set_default_verify_paths" not in vars(ssl.SSLContext)

async def main():
    serving = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    serving.load_cert_chain({str(cert)!r}, {str(key)!r})

    async def answer(reader, writer):
        await reader.readuntil(b"\\r\\n\\r\\n")
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: 2\\r\\nConnection: close\\r\\n\\r\\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=serving)
    port = server.sockets[0].getsockname()[1]
    async with aiohttp.ClientSession() as session:  # aiohttp's own verifying context
        async with session.get(f"https://localhost:{{port}}/") as response:
            print(response.status, await response.text())
    server.close()

asyncio.run(main())
print(made[0].cert_store_stats()["x509_ca"], made[0].verify_mode == ssl.CERT_REQUIRED)
"""
    env = {**os.environ, "SSL_CERT_FILE": str(ca)}
    env.pop("SSL_CERT_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["200", "ok", "1", "True"]
