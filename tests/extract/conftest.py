"""Fixtures for the extract tests: a real sandbox in-process, its control surface, clients."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx
import polars as pl
import pytest

from centsync.extract import AsyncApiClient
from centsync.sandbox import Sandbox, SandboxConfig

BASE = "http://sandbox.test"
T = TypeVar("T")

# retries fast enough for tests; the policy is the same as in production
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05}


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


class Admin:
    """The sandbox's /_sandbox control surface, over the same in-process transport."""

    def __init__(self, sb: Sandbox, http: httpx.AsyncClient) -> None:
        self.sb = sb
        self.http = http
        self.headers = {"Authorization": f"Bearer {sb.keys['admin_token']}"}

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        response = await self.http.request(method, path, json=body, headers=self.headers)
        response.raise_for_status()
        return response.json()

    async def faults(self, **faults: Any) -> Any:
        return await self.call("PUT", "/_sandbox/faults", faults)

    async def clear_faults(self) -> Any:
        return await self.call("DELETE", "/_sandbox/faults")

    async def state(self) -> dict[str, Any]:
        return await self.call("GET", "/_sandbox/state")  # type: ignore[no-any-return]

    async def new_key(self, **body: Any) -> str:
        return (await self.call("POST", "/_sandbox/keys", body))["key"]  # type: ignore[no-any-return]


class AsgiEnv:
    """A sandbox with an admin and a factory of clients, all in-process."""

    def __init__(self, sb: Sandbox) -> None:
        self.sb = sb
        self.transport = httpx.ASGITransport(app=sb.app)
        self.keys = sb.keys

    def client(self, key: str | None = None, **options: Any) -> AsyncApiClient:
        opts = {**FAST, **options}
        return AsyncApiClient(
            BASE, key or self.keys["read_write"], transport=self.transport, **opts
        )

    def admin(self) -> Admin:
        return Admin(self.sb, httpx.AsyncClient(transport=self.transport, base_url=BASE))


def small_sandbox(transactions: int = 3000, dialect: str = "contract", **config: Any) -> Sandbox:
    config.setdefault("rate_limit", False)
    return Sandbox(
        SandboxConfig(seed=config.pop("seed", 7), years=2, transactions=transactions, **config),
        dialect=dialect,
    )


@pytest.fixture
def asgi_env() -> AsgiEnv:
    """A fresh small sandbox (3,000 transactions, no rate limit) per test."""
    return AsgiEnv(small_sandbox())


@pytest.fixture
def limited_asgi_env() -> AsgiEnv:
    """A fresh small sandbox that enforces rate limits."""
    return AsgiEnv(small_sandbox(1000, rate_limit=True))


def state_frame(state: dict[str, Any]) -> pl.DataFrame:
    """The server's transactions as a frame comparable with the client's (raw excluded)."""
    rows = state["transactions"]
    frame = pl.DataFrame(
        {
            "id": [r["id"] for r in rows],
            "account_id": [r["account_id"] for r in rows],
            "concept": [r["concept"] for r in rows],
            "amount": [r["amount"] for r in rows],
            "booked_at": [r["booked_at"] for r in rows],
            "type": [r["type"] for r in rows],
            "category_id": [r["category_id"] for r in rows],
            "expense_goal_id": [r["expense_goal_id"] for r in rows],
            "updated_at": [r.get("updated_at") for r in rows],
        },
        schema={
            "id": pl.Utf8,
            "account_id": pl.Utf8,
            "concept": pl.Utf8,
            "amount": pl.Int64,
            "booked_at": pl.Utf8,
            "type": pl.Utf8,
            "category_id": pl.Utf8,
            "expense_goal_id": pl.Utf8,
            "updated_at": pl.Utf8,
        },
    )
    return frame.with_columns(
        pl.col("booked_at").str.to_date(),
        pl.col("updated_at").str.to_datetime(time_unit="ms", time_zone="UTC"),
    ).sort("id")


def comparable(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(
        "id",
        "account_id",
        "concept",
        "amount",
        "booked_at",
        "type",
        "category_id",
        "expense_goal_id",
        "updated_at",
    ).sort("id")


@pytest.fixture
def key_leak_check() -> Iterator[Callable[[str, list[str]], None]]:
    def check(key: str, texts: list[str]) -> None:
        leaks = [t for t in texts if key in t]
        assert not leaks, f"key found in {len(leaks)} text(s)"

    yield check
