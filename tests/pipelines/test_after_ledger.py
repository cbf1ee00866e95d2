"""After the ledger a refresh asks for the accounts, connections and the service's aggregates
at once, and the sync status once the connections are read (it is learned from them): two
round trips, not three. Over loopback HTTP, every answer delayed as a distant service's are."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from centsync.extract import _requests
from centsync.pipelines.refresh.steps import Refresher

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

DELAY_MS = 400  # each answer's delay while the accounts and aggregates are asked for
TOGETHER = ("/v1/accounts", "/v1/connections", "/v1/accounts/summary", "/v1/analytics/spending")


def test_the_accounts_and_aggregates_are_asked_at_once(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_env.refresh()  # the first: every answer learned
    seen: list[tuple[str, float, float]] = []
    request, after = _requests.RequestCore.request, Refresher._after_ledger

    async def timed(self: Any, method: str, path: str, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            return await request(self, method, path, **kwargs)
        finally:
            seen.append((path, started, time.monotonic()))

    def delayed(self: Refresher, today: dt.date) -> None:
        http_env.admin("PUT", "/_sandbox/faults", {"latency_ms": DELAY_MS})
        seen.clear()  # the ledger's requests before: not these
        try:
            after(self, today)
        finally:
            http_env.admin("DELETE", "/_sandbox/faults")

    monkeypatch.setattr(_requests.RequestCore, "request", timed)
    monkeypatch.setattr(Refresher, "_after_ledger", delayed)
    summary = http_env.refresh()
    assert summary["verdict"] == "agree"
    together = [(p, s, e) for p, s, e in seen if p in TOGETHER]
    assert sorted({p for p, _, _ in together}) == sorted(TOGETHER)
    assert len(together) == 6  # spending by category, merchant and month
    # every one of them was asked before any was answered
    assert max(s for _, s, _ in together) < min(e for _, _, e in together)
    (connections,) = [e for p, _, e in seen if p == "/v1/connections"]
    (sync,) = [s for p, s, _ in seen if p == "/v1/sync/status"]
    assert sync >= connections
    assert [p for p, _, _ in seen if p not in TOGETHER] == ["/v1/sync/status"]
