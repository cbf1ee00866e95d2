"""Idempotency, rate limits, provider quotas, the clock and syncs, timezones, faults and drift."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from centsync.sandbox import Sandbox
from helpers import Api, make_sandbox


def _body(api: Api, **kw: Any) -> dict[str, Any]:
    acc = api.state()["accounts"][0]["id"]
    return {
        "account_id": acc,
        "amount": -4250,
        "concept": "Farmers market",
        "booked_at": "2026-11-08",
        **kw,
    }


def _count(api: Api) -> int:
    return int(api.get("/v1/transactions/summary").json()["count"])


# ---- idempotency ---------------------------------------------------------------------------
def test_replay_returns_the_original_answer_and_creates_nothing(api: Api) -> None:
    n = _count(api)
    body = _body(api)
    first = api.post("/v1/transactions", body, headers={"Idempotency-Key": "csv:row-1"})
    again = api.post("/v1/transactions", body, headers={"Idempotency-Key": "csv:row-1"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert (
        again.headers["idempotent-replayed"] == "true"
        and "idempotent-replayed" not in first.headers
    )
    assert _count(api) == n + 1


def test_same_key_other_body_is_422(api: Api) -> None:
    api.post("/v1/transactions", _body(api), headers={"Idempotency-Key": "k1"})
    r = api.post("/v1/transactions", _body(api, amount=-1), headers={"Idempotency-Key": "k1"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "idempotency_key_reused"


def test_key_is_reusable_after_a_400(api: Api) -> None:
    n = _count(api)
    bad = api.post("/v1/transactions", _body(api, amount=1.5), headers={"Idempotency-Key": "k2"})
    assert bad.status_code == 400
    good = api.post("/v1/transactions", _body(api), headers={"Idempotency-Key": "k2"})
    assert good.status_code == 201 and _count(api) == n + 1


def test_bad_idempotency_key_is_400(api: Api) -> None:
    r = api.post("/v1/transactions", _body(api), headers={"Idempotency-Key": "x" * 256})
    assert r.status_code == 400


def test_idempotency_expires_after_24_hours(api: Api) -> None:
    n = _count(api)
    body = _body(api)
    api.post("/v1/transactions", body, headers={"Idempotency-Key": "k3"})
    api.admin("POST", "/_sandbox/clock/advance", {"hours": 25})
    before = _count(api)
    r = api.post("/v1/transactions", body, headers={"Idempotency-Key": "k3"})
    assert r.status_code == 201 and "idempotent-replayed" not in r.headers
    assert _count(api) == before + 1 and before >= n + 1


@pytest.mark.parametrize("latency_ms", [0, 30])
def test_two_concurrent_requests_with_one_key_create_exactly_one(latency_ms: int) -> None:
    sb = make_sandbox()
    sb.service.faults.latency_ms = latency_ms
    acc = sb.service.visible_accounts()[0].id
    body = {"account_id": acc, "amount": -999, "concept": "Twin", "booked_at": "2026-11-09"}
    headers = {"Authorization": f"Bearer {sb.keys['read_write']}", "Idempotency-Key": "twin-1"}

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=sb.app), base_url="http://t"
        ) as c:
            return list(
                await asyncio.gather(
                    *(c.post("/v1/transactions", json=body, headers=headers) for _ in range(2))
                )
            )

    n = len(sb.service.ledger.rows)
    rs = asyncio.run(go())
    assert len(sb.service.ledger.rows) == n + 1
    statuses = sorted(r.status_code for r in rs)
    assert statuses in ([201, 201], [201, 409])
    created = [r for r in rs if r.status_code == 201]
    assert len({r.json()["id"] for r in created}) == 1


# ---- rate limits ---------------------------------------------------------------------------
def test_minute_limit_gives_429_with_retry_after_and_headers(api: Api) -> None:
    key = api.admin(
        "POST", "/_sandbox/keys", {"scopes": ["data.read"], "minute_limit": 5, "hour_limit": 100}
    )["key"]
    rs = [api.get("/v1/settings", key=key) for _ in range(6)]
    assert [r.status_code for r in rs[:5]] == [200] * 5
    remaining = [int(r.headers["x-ratelimit-remaining-minute"]) for r in rs[:5]]
    assert remaining == [4, 3, 2, 1, 0] or remaining[0] < 5  # the minute may roll over mid-test
    r = rs[5]
    if r.status_code == 429:
        assert r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["retry-after"]) <= 60
        assert (
            r.headers["x-ratelimit-limit-minute"] == "5"
            and r.headers["x-ratelimit-limit-hour"] == "100"
        )


def test_hour_limit_applies_across_minutes(api: Api) -> None:
    key = api.admin(
        "POST", "/_sandbox/keys", {"scopes": ["data.read"], "minute_limit": 100, "hour_limit": 3}
    )["key"]
    codes = [api.get("/v1/me", key=key).status_code for _ in range(4)]
    if codes[-1] == 429:  # unless the wall-clock hour rolled over during the test
        r = api.get("/v1/me", key=key)
        assert int(r.headers["retry-after"]) <= 3600 and "Hourly" in r.json()["error"]["message"]
    assert codes[:3] == [200, 200, 200]


def test_me_reports_the_allowance(api: Api) -> None:
    me = api.get("/v1/me").json()["rate_limit"]
    assert me["minute_limit"] == 300 and me["hour_limit"] == 10_000
    assert me["minute_remaining"] < 300


def test_rate_limit_headers_can_be_omitted_and_bursts_injected(api: Api) -> None:
    api.admin("PUT", "/_sandbox/faults", {"omit_rate_limit_headers": True, "rate_limit_burst": 2})
    rs = [api.get("/v1/me") for _ in range(3)]
    assert [r.status_code for r in rs] == [429, 429, 200]
    assert all("x-ratelimit-limit-minute" not in r.headers for r in rs)
    assert rs[0].headers["retry-after"] == "1"


def test_no_rate_limit_config_never_429s() -> None:
    from starlette.testclient import TestClient

    sb = make_sandbox(rate_limit=False, minute_limit=2)
    with TestClient(sb.app, base_url="http://t") as c:
        api = Api(sb, c)
        assert all(api.get("/v1/settings").status_code == 200 for _ in range(10))


# ---- provider quota ------------------------------------------------------------------------
def test_provider_quota_then_429_and_scheduled_sync_delayed(api: Api) -> None:
    provider = api.get("/v1/connections").json()["data"][0]["provider"]
    for _ in range(4):
        r = api.post("/v1/sync", {"provider": provider})
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["status"] == "queued" and body["providers"] == [provider]
    before = {s["provider"]: s["next_sync_at"] for s in api.get("/v1/sync/status").json()["data"]}
    r = api.post("/v1/sync", {"provider": provider})
    assert r.status_code == 429 and r.json()["error"]["code"] == "provider_quota_exhausted"
    assert int(r.headers["retry-after"]) > 0
    after = {s["provider"]: s["next_sync_at"] for s in api.get("/v1/sync/status").json()["data"]}
    assert after[provider] > before[provider]
    # The other provider still has its own quota.
    other = next(p for p in after if p != provider)
    assert api.post("/v1/sync", {"provider": other}).status_code == 202
    # A day later the quota is back.
    api.admin("POST", "/_sandbox/clock/advance", {"hours": 24})
    assert api.post("/v1/sync", {"provider": provider}).status_code == 202


# ---- clock, syncs, timezone ----------------------------------------------------------------
def test_scheduled_syncs_bring_rows_and_settle_pending_ones(api: Api) -> None:
    before = api.state()
    pending_before = [t for t in api.sb.service.ledger.rows if t.pending_until_ms]
    assert pending_before, "the newest bank-feed rows start pending"
    api.admin("POST", "/_sandbox/clock/advance", {"days": 4})
    after = api.state()
    assert after["now"] > before["now"]
    old = {t["id"]: t for t in before["transactions"]}
    new = {t["id"]: t for t in after["transactions"]}
    assert set(new) - set(old), "new bank-feed rows arrived"
    changed = [i for i in old if i in new and old[i] != new[i]]
    cancelled = [i for i in old if i not in new]
    assert changed or cancelled
    for s in after["sync_status"]:
        assert s["last_synced_at"] > before["now"][:10]
    # Manual rows never change by themselves.
    manual = {t.id for t in api.sb.service.ledger.rows if t.manual}
    assert all(old[i] == new[i] for i in manual if i in old)


def test_timezone_change_moves_booked_at_near_midnight() -> None:
    from starlette.testclient import TestClient

    sb = make_sandbox()
    svc = sb.service
    # A bank row at 23:30 local (Madrid) time.
    acc = svc.visible_accounts()[0].id
    with TestClient(sb.app, base_url="http://t") as c:
        api = Api(sb, c)
        t = api.admin(
            "POST",
            "/_sandbox/transactions",
            {
                "account_id": acc,
                "amount": -1500,
                "concept": "Late dinner",
                "occurred_at": "2026-06-10T21:30:00Z",
            },
        )
        assert t["booked_at"] == "2026-06-10"
        api.admin("PUT", "/_sandbox/settings", {"timezone": "Asia/Tokyo"})
        assert api.get("/v1/settings").json()["timezone"] == "Asia/Tokyo"
        assert api.get(f"/v1/transactions/{t['id']}").json()["booked_at"] == "2026-06-11"
        rows = api.all_transactions(**{"from": "2026-06-11", "to": "2026-06-11"})
        assert t["id"] in {r["id"] for r in rows}
        s = api.get("/v1/transactions/summary", **{"from": "2026-06-11", "to": "2026-06-11"}).json()
        assert s["count"] == len(rows)
        r = c.put(
            "/_sandbox/settings",
            json={"timezone": "Mars/Olympus"},
            headers=api.headers("admin_token"),
        )
        assert r.status_code == 400


# ---- faults --------------------------------------------------------------------------------
def test_injected_errors_use_the_envelope(api: Api) -> None:
    api.admin("PUT", "/_sandbox/faults", {"error_rate": 1.0, "error_statuses": [500, 503]})
    codes = {api.get("/v1/accounts").status_code for _ in range(30)}
    assert codes <= {500, 503} and codes
    r = api.get("/v1/accounts")
    assert r.json()["error"]["code"] in ("internal_error", "service_unavailable")
    if r.status_code == 503:
        assert r.headers["retry-after"]
    api.admin("DELETE", "/_sandbox/faults")
    assert api.get("/v1/accounts").status_code == 200


def test_dropped_connection_raises_in_process(api: Api) -> None:
    api.admin("PUT", "/_sandbox/faults", {"drop_rate": 1.0})
    with pytest.raises(ConnectionResetError):
        api.get("/v1/settings")


@pytest.mark.e2e
def test_dropped_connection_over_loopback_is_a_transport_error(
    live_sandbox: tuple[Sandbox, str],
) -> None:
    sb, base = live_sandbox
    sb.service.faults.drop_rate = 1.0
    with (
        httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {sb.keys['read_only']}"}
        ) as c,
        pytest.raises(httpx.TransportError),
    ):
        c.get("/v1/settings")


def test_drop_after_a_write_keeps_the_write_for_an_idempotent_resend(api: Api) -> None:
    n = _count(api)
    body = _body(api)
    api.admin("PUT", "/_sandbox/faults", {"drop_rate": 1.0})
    with pytest.raises(ConnectionResetError):
        api.post("/v1/transactions", body, headers={"Idempotency-Key": "lost-answer"})
    api.admin("DELETE", "/_sandbox/faults")
    r = api.post("/v1/transactions", body, headers={"Idempotency-Key": "lost-answer"})
    assert r.status_code == 201 and r.headers["idempotent-replayed"] == "true"
    assert _count(api) == n + 1


def test_drift_between_pages_moves_total(api: Api) -> None:
    window = {"from": "2026-09-01", "to": "2026-10-31"}
    first = api.get("/v1/transactions", limit=20, page=1, **window).json()
    api.admin(
        "PUT", "/_sandbox/faults", {"drift": {"inserts": 2, "deletes": 1, "updates": 1, "pages": 1}}
    )
    second = api.get("/v1/transactions", limit=20, page=2, **window).json()
    assert second["total"] == first["total"] + 1
    third = api.get("/v1/transactions", limit=20, page=3, **window).json()
    assert third["total"] == second["total"]  # the drift budget is spent


def test_drop_extra_fields(api: Api) -> None:
    api.admin("PUT", "/_sandbox/faults", {"drop_extra_fields": True})
    t = api.get("/v1/transactions", limit=1).json()["data"][0]
    assert set(t) == {
        "id",
        "account_id",
        "concept",
        "amount",
        "booked_at",
        "type",
        "category_id",
        "expense_goal_id",
    }
    a = api.get("/v1/accounts").json()[0]
    assert set(a) == {"id", "name", "type", "subtype", "currency", "balance"}


def test_latency_is_injected(api: Api) -> None:
    import time

    api.admin("PUT", "/_sandbox/faults", {"latency_ms": 120})
    t = time.perf_counter()
    api.get("/v1/settings")
    assert time.perf_counter() - t >= 0.1


# ---- control surface -----------------------------------------------------------------------
def test_control_surface_edits_are_visible(api: Api) -> None:
    state = api.state()
    old = state["transactions"][-1]
    cat = state["categories"][0]["id"]
    api.admin(
        "PATCH",
        f"/_sandbox/transactions/{old['id']}",
        {"category_id": cat, "amount": old["amount"] - 100},
    )
    got = api.get(f"/v1/transactions/{old['id']}").json()
    assert got["category_id"] == cat and got["amount"] == old["amount"] - 100
    api.admin("DELETE", f"/_sandbox/transactions/{old['id']}")
    assert api.get(f"/v1/transactions/{old['id']}").status_code == 404
    acc = api.admin(
        "POST", "/_sandbox/accounts", {"name": "Pension", "type": "investment", "balance": 100}
    )
    assert acc["id"] in {a["id"] for a in api.get("/v1/accounts").json()}
    api.admin("PATCH", f"/_sandbox/accounts/{acc['id']}", {"hidden": True})
    assert acc["id"] not in {a["id"] for a in api.get("/v1/accounts").json()}
    api.admin("DELETE", f"/_sandbox/accounts/{acc['id']}")
    assert api.admin("GET", "/_sandbox/clock")["timezone"] == "Europe/Madrid"


def test_merchant_spending_follows_edits_deletes_and_inserts(api: Api) -> None:
    """Merchant spending comes from per-day aggregates: every change must keep them exact."""

    def by_rows() -> dict[str, list[int]]:
        cells: dict[str, list[int]] = {}
        for t in api.state()["transactions"]:
            if t["type"] == "expense":
                cell = cells.setdefault(" ".join(t["concept"].split()).lower(), [0, 0])
                cell[0] += t["amount"]
                cell[1] += 1
        return cells

    def by_api() -> dict[str, list[int]]:
        body = api.get(
            "/v1/analytics/spending",
            **{"from": "1990-01-01", "to": "2999-12-31", "group_by": "merchant"},
        ).json()
        return {r["key"]: [r["amount"], r["count"]] for r in body["data"]}

    expenses = [t for t in api.state()["transactions"] if t["type"] == "expense"]
    a, b = expenses[0], expenses[1]
    api.admin("PATCH", f"/_sandbox/transactions/{a['id']}", {"concept": "  Brand NEW   Shop "})
    api.admin("DELETE", f"/_sandbox/transactions/{b['id']}")
    api.admin("POST", "/_sandbox/clock/advance", {"hours": 30})  # syncs add, change, cancel rows
    assert "brand new shop" in by_api()
    assert by_api() == by_rows()
