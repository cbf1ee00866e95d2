"""Shared fixtures: the sandbox in-process (fast) and over real loopback HTTP (end to end)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from centsync.sandbox import Sandbox
from centsync.sandbox.server import run_in_thread
from helpers import Api, make_sandbox


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("RUN_SLOW"):
        return
    skip = pytest.mark.skip(reason="slow suite: set RUN_SLOW=1 (make test-all) to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


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
