"""Helpers shared by the test folders: a sandbox factory and a thin synchronous API caller."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import httpx
from starlette.testclient import TestClient

from centsync.sandbox import Sandbox, SandboxConfig

# A fixed simulated "now", so every test sees the same household.
START = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)


def make_sandbox(dialect: str = "contract", **overrides: Any) -> Sandbox:
    """The test household (seed 7, two years to START), speaking `dialect` (`sandbox/dialects.py`)."""
    cfg: dict[str, Any] = {"seed": 7, "years": 2, "start": START}
    cfg.update(overrides)
    return Sandbox(SandboxConfig(**cfg), dialect=dialect)


class Api:
    """A thin synchronous caller of one sandbox, by key name: for tests of the sandbox itself."""

    def __init__(self, sb: Sandbox, client: TestClient) -> None:
        self.sb = sb
        self.client = client

    def headers(self, key: str | None) -> dict[str, str]:
        if key is None:
            return {}
        value = self.sb.keys.get(key, key)
        return {"Authorization": f"Bearer {value}"}

    def get(self, path: str, key: str | None = "read_only", **params: Any) -> httpx.Response:
        return self.client.get(path, params=params or None, headers=self.headers(key))

    def post(
        self,
        path: str,
        body: Any = None,
        key: str | None = "read_write",
        headers: dict[str, str] | None = None,
        **kw: Any,
    ) -> httpx.Response:
        h = {**self.headers(key), **(headers or {})}
        if body is not None and "content" not in kw:
            kw["json"] = body
        return self.client.post(path, headers=h, **kw)

    def patch(
        self,
        path: str,
        body: Any,
        key: str | None = "read_write",
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        return self.client.patch(path, json=body, headers={**self.headers(key), **(headers or {})})

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        r = self.client.request(method, path, json=body, headers=self.headers("admin_token"))
        assert r.status_code < 300, r.text
        return r.json()

    def state(self) -> dict[str, Any]:
        return self.admin("GET", "/_sandbox/state")

    def all_transactions(self, key: str = "read_only", **filters: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        page = 1
        while True:
            body = self.get("/v1/transactions", key, limit=200, page=page, **filters).json()
            rows += body["data"]
            if page >= body["pages"]:
                return rows
            page += 1


@contextmanager
def silent() -> Iterator[str]:
    """A server that accepts every connection and never answers (a hung service)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
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


@contextmanager
def redirecting(status: int, to: str, query: str) -> Iterator[str]:
    """A server that answers every request with a redirect (`status`) to `to` + the path +
    `?query` (another host: a redirect centsync must name, never follow)."""

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Location", f"{to}{self.path}?{query}")
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>moved</html>")

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def assert_windows_kept(kept: Mapping[str, int], server: Mapping[str, int]) -> None:
    """Windows are read oldest first, each one's pages newest first: a stop keeps the oldest
    months whole (the windows committed), then the newest months of the window it stopped in,
    the oldest of those partial; nothing else."""
    months = sorted(server)
    whole = 0
    while whole < len(months) and kept.get(months[whole]) == server[months[whole]]:
        whole += 1
    rest = [m for m in months[whole:] if m in kept]
    if not rest:
        return
    at = months.index(rest[0])
    assert rest == months[at : at + len(rest)], f"a month between those kept is missing: {rest}"
    partial = [m for m in rest if kept[m] != server[m]]
    assert all(kept[m] < server[m] for m in partial), partial
    assert partial in ([], rest[:1]), f"a month after the one stopped inside is partial: {partial}"


def months_kept(warehouse: Path) -> Counter[str]:
    """A warehouse file's transactions by month ('YYYY-MM'), read only."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT strftime(month, '%Y-%m'), count(*) FROM core.transactions GROUP BY 1"
        ).fetchall()
    return Counter({m: int(n) for m, n in rows})


def wait_for_reading(
    proc: subprocess.Popen[str], *, then: float = 0.0, timeout: float = 60.0
) -> None:
    """Until a refresh started with `CENTSYNC_PROGRESS=1` (stderr a text pipe) prints its first
    progress line of the transactions' read, then `then` seconds more: the refresh is reading,
    however long its imports took on this host."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if "transactions:" in line:
            time.sleep(then)
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError("the refresh never started reading")
