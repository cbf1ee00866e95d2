"""Auth, scopes, the error envelope, and a corpus of bad input: 400 with nothing changed."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import Api

UNKNOWN = "00000000-0000-4000-8000-000000000000"


def _envelope(r: Any, status: int, code: str) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and body["error"]["code"] == code and body["error"]["message"]
    assert r.headers["x-request-id"]


def test_every_response_carries_a_request_id(api: Api) -> None:
    for r in (
        api.get("/v1/me"),
        api.get("/v1/nope"),
        api.get("/v1/me", key=None),
        api.get("/openapi.json", key=None),
    ):
        assert len(r.headers["x-request-id"]) == 36


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Basic abc", "Bearer pfd_live_" + "x" * 40, "bearer pfd_live_"]
)
def test_missing_malformed_or_unknown_key_is_401(api: Api, header: str | None) -> None:
    r = api.client.get("/v1/me", headers={"Authorization": header} if header else {})
    _envelope(r, 401, "unauthenticated")
    assert "x-ratelimit-limit-minute" not in r.headers


def test_expired_key_is_key_expired(api: Api) -> None:
    _envelope(api.get("/v1/me", key="expired"), 401, "key_expired")


def test_key_format_matches_the_contract(api: Api) -> None:
    import re

    for name in ("read_only", "read_write", "expired"):
        assert re.fullmatch(r"pfd_live_[A-Za-z0-9]{40}", api.sb.keys[name])


def test_unknown_path_404_and_wrong_method_405(api: Api) -> None:
    _envelope(api.get("/v1/nothing"), 404, "not_found")
    _envelope(
        api.client.delete("/v1/transactions", headers=api.headers("read_write")),
        405,
        "method_not_allowed",
    )
    _envelope(api.post("/v1/accounts", {}), 405, "method_not_allowed")


def _writes(api: Api) -> list[tuple[str, str, Any]]:
    state = api.state()
    tx = next(t for t in state["transactions"] if t["type"] == "expense")
    acc = state["accounts"][0]["id"]
    return [
        (
            "POST",
            "/v1/transactions",
            {"account_id": acc, "amount": -100, "concept": "x", "booked_at": "2026-11-01"},
        ),
        ("PATCH", f"/v1/transactions/{tx['id']}", {"concept": "renamed"}),
        ("POST", f"/v1/transactions/{tx['id']}/expense", {"expense_goal_id": None}),
        ("POST", "/v1/sync", {}),
    ]


def test_every_write_with_a_read_only_key_is_403_and_changes_nothing(api: Api) -> None:
    before = api.state()
    for method, path, body in _writes(api):
        r = api.client.request(method, path, json=body, headers=api.headers("read_only"))
        _envelope(r, 403, "insufficient_scope")
        assert "read-only" in r.json()["error"]["message"]
    assert api.state() == before


def test_every_write_with_the_read_write_key_succeeds(api: Api) -> None:
    for method, path, body in _writes(api):
        r = api.client.request(method, path, json=body, headers=api.headers("read_write"))
        assert r.status_code in (200, 201, 202), r.text


def _bad_bodies(acc: str) -> list[tuple[str, Any]]:
    ok = {"account_id": acc, "amount": -100, "concept": "Coffee", "booked_at": "2026-11-01"}
    return [
        ("float amount", {**ok, "amount": -1.5}),
        ("string amount", {**ok, "amount": "-100"}),
        ("bool amount", {**ok, "amount": True}),
        ("huge amount", {**ok, "amount": 10**12 + 1}),
        ("zero amount without type", {**ok, "amount": 0}),
        ("missing amount", {k: v for k, v in ok.items() if k != "amount"}),
        ("missing account", {k: v for k, v in ok.items() if k != "account_id"}),
        ("missing concept", {k: v for k, v in ok.items() if k != "concept"}),
        ("missing booked_at", {k: v for k, v in ok.items() if k != "booked_at"}),
        ("empty concept", {**ok, "concept": ""}),
        ("long concept", {**ok, "concept": "x" * 201}),
        ("concept not a string", {**ok, "concept": 5}),
        ("long notes", {**ok, "notes": "é" * 2001}),
        ("impossible date", {**ok, "booked_at": "2025-02-30"}),
        ("datetime not date", {**ok, "booked_at": "2025-02-03T10:00:00Z"}),
        ("unknown type", {**ok, "type": "refund"}),
        ("non-uuid account", {**ok, "account_id": "abc"}),
        ("unknown account", {**ok, "account_id": UNKNOWN}),
        ("unknown category", {**ok, "category_id": UNKNOWN}),
        ("unknown expense", {**ok, "expense_goal_id": UNKNOWN}),
        ("unknown field", {**ok, "merchant": "x"}),
        ("array body", [ok]),
        ("null body", None),
    ]


def test_bad_bodies_are_400_and_create_nothing(api: Api) -> None:
    acc = api.state()["accounts"][0]["id"]
    before = api.state()
    for name, body in _bad_bodies(acc):
        r = api.post(
            "/v1/transactions",
            content=__import__("orjson").dumps(body),
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 400, name
        assert r.json()["error"]["code"] == "invalid_request", name
    r = api.post(
        "/v1/transactions", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    _envelope(r, 400, "invalid_request")
    r = api.post("/v1/transactions", content=b"{}", headers={"Content-Type": "text/plain"})
    _envelope(r, 415, "unsupported_media_type")
    assert api.state() == before


def test_notes_length_counts_code_points_not_bytes(api: Api) -> None:
    acc = api.state()["accounts"][0]["id"]
    r = api.post(
        "/v1/transactions",
        {
            "account_id": acc,
            "amount": -1,
            "concept": "é" * 200,
            "booked_at": "2026-11-01",
            "notes": "€" * 2000,
        },
    )
    assert r.status_code == 201, r.text
    assert r.json()["notes"] == "€" * 2000


@pytest.mark.parametrize(
    "params",
    [
        {"page": "0"},
        {"page": "-1"},
        {"page": "abc"},
        {"page": "1.5"},
        {"limit": "0"},
        {"limit": "201"},
        {"type": "refund"},
        {"account_id": "not-a-uuid"},
        {"account_id": UNKNOWN},
        {"category_id": "123"},
        {"expense_goal_id": UNKNOWN},
        {"from": "2025-13-01"},
        {"from": "2025-02-30"},
        {"to": "yesterday"},
        {"from": "2025-03-01", "to": "2025-02-01"},
        {"sort": "amount"},
    ],
)
def test_bad_query_values_are_400(api: Api, params: dict[str, str]) -> None:
    _envelope(api.get("/v1/transactions", **params), 400, "invalid_request")
    _envelope(api.get("/v1/transactions/summary", **params), 400, "invalid_request")


@pytest.mark.parametrize(
    "params",
    [{"group_by": "week"}, {"from": "2025-02-30"}, {"from": "2025-03-02", "to": "2025-03-01"}],
)
def test_bad_spending_query_is_400(api: Api, params: dict[str, str]) -> None:
    _envelope(api.get("/v1/analytics/spending", **params), 400, "invalid_request")


def test_non_uuid_path_id_is_400(api: Api) -> None:
    _envelope(api.get("/v1/transactions/12345"), 400, "invalid_request")


def _manual_and_bank(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    acc = api.state()["accounts"][0]["id"]
    manual = api.post(
        "/v1/transactions",
        {"account_id": acc, "amount": -500, "concept": "Kiosk", "booked_at": "2026-11-02"},
    ).json()
    svc = api.sb.service
    bank = next(t for t in svc.ledger.rows if not t.manual and t.type == "expense")
    return manual, api.get(f"/v1/transactions/{bank.id}").json()


def test_patch_rules(api: Api) -> None:
    manual, bank = _manual_and_bank(api)
    _envelope(api.patch(f"/v1/transactions/{manual['id']}", {}), 400, "invalid_request")
    r = api.patch(f"/v1/transactions/{manual['id']}", {"expense_goal_id": None})
    _envelope(r, 400, "invalid_request")
    assert "/expense" in r.json()["error"]["message"]
    _envelope(api.patch(f"/v1/transactions/{bank['id']}", {"amount": -1}), 400, "invalid_request")
    _envelope(api.patch(f"/v1/transactions/{bank['id']}", {"nope": 1}), 400, "invalid_request")
    _envelope(api.patch(f"/v1/transactions/{UNKNOWN}", {"concept": "x"}), 404, "not_found")
    r = api.patch(
        f"/v1/transactions/{bank['id']}",
        {"concept": "Renamed", "notes": "checked", "category_id": None},
    )
    assert (
        r.status_code == 200
        and r.json()["concept"] == "Renamed"
        and r.json()["category_id"] is None
    )
    r = api.patch(
        f"/v1/transactions/{manual['id']}",
        {"amount": -700, "booked_at": "2026-10-30", "type": "expense"},
    )
    assert r.status_code == 200 and (r.json()["amount"], r.json()["booked_at"]) == (
        -700,
        "2026-10-30",
    )


def test_assign_rules(api: Api) -> None:
    state = api.state()
    goal = state["expenses"][0]
    manual, _bank = _manual_and_bank(api)
    income = next(t for t in state["transactions"] if t["type"] == "income")
    path = f"/v1/transactions/{manual['id']}/expense"
    _envelope(api.post(path, {}), 400, "invalid_request")
    _envelope(api.post(path, {"expense_goal_id": UNKNOWN}), 400, "invalid_request")
    _envelope(
        api.post(f"/v1/transactions/{income['id']}/expense", {"expense_goal_id": goal["id"]}),
        400,
        "invalid_request",
    )
    r = api.post(path, {"expense_goal_id": goal["id"]})
    assert r.status_code == 200 and r.json()["expense_goal_id"] == goal["id"]
    after = next(e for e in api.state()["expenses"] if e["id"] == goal["id"])
    assert after["balance"] == goal["balance"] + manual["amount"]
    r = api.post(path, {"expense_goal_id": None})
    assert r.json()["expense_goal_id"] is None


def test_sync_rejects_unknown_provider_and_fields(api: Api) -> None:
    _envelope(api.post("/v1/sync", {"provider": "nope"}), 400, "invalid_request")
    _envelope(api.post("/v1/sync", {"providers": []}), 400, "invalid_request")


def test_control_surface_needs_the_admin_token(api: Api) -> None:
    r = api.get("/_sandbox/state", key="read_write")
    _envelope(r, 401, "unauthenticated")


def test_dates_outside_the_supported_years_are_400_even_far_from_utc(api: Api) -> None:
    acc = api.state()["accounts"][0]["id"]
    api.admin("PUT", "/_sandbox/settings", {"timezone": "Etc/GMT+12"})
    for day in ("9999-12-31", "0001-01-01", "1899-12-31", "3000-01-01"):
        r = api.post(
            "/v1/transactions", {"account_id": acc, "amount": -5, "concept": "x", "booked_at": day}
        )
        _envelope(r, 400, "invalid_request")
    assert api.get("/v1/transactions", **{"from": "0001-01-01"}).status_code == 400


def test_405_names_the_allowed_methods(api: Api) -> None:
    r = api.client.delete("/v1/me", headers=api.headers("read_write"))
    assert r.status_code == 405 and r.headers["allow"] == "GET"


def test_an_unexpected_fault_is_an_internal_error_envelope(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(api.sb.service, "settings", boom)
    _envelope(api.get("/v1/settings"), 500, "internal_error")
