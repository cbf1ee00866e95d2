"""End to end over real loopback HTTP (uvicorn): the same client code, real sockets."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from centsync.extract import ApiClient, AsyncApiClient, InsufficientScope
from centsync.sandbox import Sandbox
from centsync.sandbox.server import free_port, run_in_thread, spawn_serve

from .conftest import FAST, Admin, comparable, run, small_sandbox, state_frame

pytestmark = pytest.mark.e2e


@pytest.fixture
def served() -> Iterator[tuple[Sandbox, str]]:
    sb = small_sandbox(4000)
    with run_in_thread(sb) as base_url:
        yield sb, base_url


def test_loopback_faulty_read_equals_server_state(served: tuple[Sandbox, str]) -> None:
    sb, base_url = served

    async def go() -> None:
        import httpx

        async with httpx.AsyncClient(base_url=base_url) as http:
            admin = Admin(sb, http)
            await admin.faults(
                error_rate=0.1,
                error_statuses=[500, 500, 503],
                drop_rate=0.15,
                latency_ms=2,
                drift={"inserts": 1, "updates": 1, "deletes": 1, "pages": 6},
            )
            async with AsyncApiClient(base_url, sb.keys["read_only"], max_attempts=12, **FAST) as c:
                frame, reports = await c.read_all_transactions()
                stats = c.stats.total()
            await admin.clear_faults()
            state = await admin.state()
        assert comparable(frame).equals(state_frame(state))
        assert stats.transport_errors > 0  # real dropped connections, over real sockets
        assert all(r.verified for r in reports)

    run(go())


def test_blocking_facade_reads_and_writes_over_loopback(served: tuple[Sandbox, str]) -> None:
    sb, base_url = served
    with ApiClient(base_url, sb.keys["read_write"], **FAST) as c:
        accounts = c.accounts()
        batches = list(c.read_transactions([("2025-01-01", "2025-03-31")], type="expense"))
        tx = c.create_transaction(
            account_id=accounts["id"][0],
            amount=-999,
            concept="Loopback",
            booked_at="2025-02-02",
            idempotency_key="loopback-1",
        )
        again = c.create_transaction(
            account_id=accounts["id"][0],
            amount=-999,
            concept="Loopback",
            booked_at="2025-02-02",
            idempotency_key="loopback-1",
        )
        assert "key=<hidden>" in repr(c)
    assert batches and all(set(b.frame["type"]) <= {"expense"} for b in batches)
    assert again.replayed and again.id == tx.id
    with ApiClient(base_url, sb.keys["read_only"], **FAST) as ro, pytest.raises(InsufficientScope):
        ro.trigger_sync()


def test_cli_served_sandbox_via_keys_file(tmp_path: Path) -> None:
    keys = tmp_path / "keys.json"
    # the same CLI process the benchmarks start: it writes the keys file once it serves
    proc = spawn_serve(
        keys,
        "--port",
        str(free_port()),
        "--transactions",
        "2000",
        "--no-rate-limit",
        timeout=60,
    )
    try:
        info = json.loads(keys.read_text())
        with ApiClient(info["base_url"], info["read_only"]) as c:
            frame, reports = c.read_all_transactions()
            summary = c.transactions_summary()
        assert frame.height == summary.count == 2000
        assert sum(r.requests for r in reports) >= 10
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
