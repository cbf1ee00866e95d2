"""Shared fixtures: the sandbox in-process (fast) and over real loopback HTTP (end to end)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from starlette.testclient import TestClient

from centsync.sandbox import Sandbox, SandboxConfig
from centsync.sandbox.server import run_in_thread

# A fixed simulated "now", so every test sees the same household.
START = datetime(2026, 11, 15, 12, 0, tzinfo=UTC)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("RUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow suite: set RUN_SLOW=1 (make test-all) to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def make_sandbox(**overrides: Any) -> Sandbox:
    cfg: dict[str, Any] = {"seed": 7, "years": 2, "start": START}
    cfg.update(overrides)
    return Sandbox(SandboxConfig(**cfg))


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


@pytest.fixture
def sandbox() -> Sandbox:
    return make_sandbox()


@pytest.fixture
def api(sandbox: Sandbox) -> Iterator[Api]:
    with TestClient(
        sandbox.app, base_url="http://sandbox.test", raise_server_exceptions=True
    ) as client:
        yield Api(sandbox, client)


@pytest.fixture(scope="session")
def shared_sandbox() -> Sandbox:
    """A read-only-use sandbox shared by tests that never change it."""
    return make_sandbox(seed=11, rate_limit=False)


@pytest.fixture(scope="session")
def shared_api(shared_sandbox: Sandbox) -> Iterator[Api]:
    with TestClient(shared_sandbox.app, base_url="http://sandbox.test") as client:
        yield Api(shared_sandbox, client)


@pytest.fixture
def live_sandbox(sandbox: Sandbox) -> Iterator[tuple[Sandbox, str]]:
    """The sandbox served over real loopback HTTP by uvicorn: (sandbox, base_url)."""
    with run_in_thread(sandbox) as base_url:
        yield sandbox, base_url
