"""The end-to-end environment: a sandbox on loopback, a warehouse and a Dagster instance."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from click.testing import CliRunner

from centsync.pipelines.cli.main import main
from centsync.sandbox import Sandbox
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox
from system_packages import need_command


class HttpEnv:
    """One sandbox on loopback plus a warehouse and Dagster instance in a temp folder."""

    def __init__(
        self, sb: Sandbox, base_url: str, tmp: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        self.sb, self.base_url, self.tmp = sb, base_url, tmp
        self.warehouse = tmp / "wh" / "centsync.duckdb"
        self.env = {
            "CENTSYNC_API_BASE_URL": base_url,
            "CENTSYNC_API_KEY": sb.keys["read_only"],
            "CENTSYNC_WAREHOUSE": str(self.warehouse),
            "DAGSTER_HOME": str(tmp / "dagster"),
        }
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)

    def refresh(self, *args: str) -> dict[str, Any]:
        result = CliRunner().invoke(main, ["refresh", "--json", *args], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])

    def cli(self, *args: str) -> tuple[int, str]:
        """Run a centsync command in process: (exit code, stdout)."""
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout

    def reconcile(self, *args: str) -> tuple[int, dict[str, Any]]:
        code, out = self.cli("reconcile", "--json", *args)
        return code, json.loads(out.strip().splitlines()[-1])

    def sql(self, statement: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Run SQL on the published warehouse file (read-write: to corrupt it on purpose)."""
        con = duckdb.connect(str(self.warehouse))
        try:
            return con.execute(statement, params or []).fetchall()
        finally:
            con.close()

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        with httpx.Client(
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {self.sb.keys['admin_token']}"},
        ) as c:
            r = c.request(method, path, json=body)
            assert r.status_code < 300, r.text
            return r.json()

    def assert_exact(self) -> None:
        """Every core table equals the server's dumped state, row for row (raw too)."""
        rows = assert_exact(self.sb, self.warehouse)
        con = duckdb.connect(str(self.warehouse), read_only=True)
        try:
            raw_n = con.execute("SELECT count(*) FROM raw.transactions").fetchone()
        finally:
            con.close()
        assert raw_n == (rows,)


def assert_exact(sb: Sandbox, warehouse: Path) -> int:
    """core.transactions and core.accounts equal the sandbox's dumped state, row for row; the
    number of transactions."""
    state = sb.state()
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        rows = con.execute(
            "SELECT id::VARCHAR, account_id::VARCHAR, concept, amount, strftime(booked_at, '%Y-%m-%d'), type, "
            "category_id::VARCHAR, expense_goal_id::VARCHAR FROM core.transactions ORDER BY id"
        ).fetchall()
        accounts = con.execute(
            "SELECT id::VARCHAR, name, type, subtype, currency, balance FROM core.accounts ORDER BY id"
        ).fetchall()
    finally:
        con.close()
    want = sorted(
        (
            t["id"],
            t["account_id"],
            t["concept"],
            t["amount"],
            t["booked_at"],
            t["type"],
            t["category_id"],
            t["expense_goal_id"],
        )
        for t in state["transactions"]
    )
    assert len(rows) == len(want)
    assert rows == want
    assert accounts == sorted(
        (a["id"], a["name"], a["type"], a["subtype"], a["currency"], a["balance"])
        for a in state["accounts"]
    )
    return len(want)


@contextmanager
def serving(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpEnv]:
    """A sandbox on loopback and a warehouse in `tmp`, its settings set through `monkeypatch`."""
    sb = make_sandbox(rate_limit=False)
    with run_in_thread(sb) as base_url:
        yield HttpEnv(sb, base_url, tmp, monkeypatch)


@pytest.fixture
def http_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpEnv]:
    with serving(tmp_path, monkeypatch) as served:
        yield served


# ------------------------------------------------------------------ a real headless browser

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium, installed with apt when missing (never a downloaded browser build)."""
    return need_command("chromium")


@contextmanager
def _launched(chromium: str) -> Iterator[Any]:
    """Chromium driven by Playwright, headless, until the block ends."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=CHROMIUM_FLAGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def browser(chromium: str) -> Iterator[Any]:
    """A browser for one test."""
    with _launched(chromium) as b:
        yield b


@pytest.fixture(scope="module")
def shared_browser(chromium: str) -> Iterator[Any]:
    """One browser for the module's tests (each opens its own page)."""
    with _launched(chromium) as b:
        yield b


@pytest.fixture
def embedded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The embedded sandbox (no service configured) with a warehouse in a temp folder."""
    for name in ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY", "CENTSYNC_SANDBOX_STATE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", str(tmp_path / "w.duckdb"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    return tmp_path


def cli(*args: str) -> tuple[int, str, str]:
    """A centsync command in process: its exit code, stdout and stderr."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def cli_out(*args: str) -> tuple[int, str]:
    """`cli` without stderr."""
    code, out, _ = cli(*args)
    return code, out
