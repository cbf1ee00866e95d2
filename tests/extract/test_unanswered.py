"""A service that does not answer as a service: one that accepts the connection and never
answers (each try named with its wait, given up after three), and one that redirects to
another host (named with where it points, not "body is not JSON"). Real loopback sockets."""

from __future__ import annotations

import http.server
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from centsync.extract import AsyncApiClient, Redirected, ServiceSilent

from .conftest import run

pytestmark = pytest.mark.e2e


@contextmanager
def silent() -> Iterator[str]:
    """Accepts every connection, never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for conn in held:
            conn.close()


class _Moved(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(308)
        self.send_header("Location", f"https://api.other.example/base{self.path}?sig=abc")
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def moved() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Moved)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


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
        with moved() as url:
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
