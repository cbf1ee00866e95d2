"""Every GET endpoint and parameter, and aggregates consistent with the rows."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import date
from typing import Any

from helpers import Api, make_sandbox

UUID_FIELDS = ("id", "account_id")


def test_me_is_the_seed_identity_record(shared_api: Api) -> None:
    me = shared_api.get("/v1/me").json()
    assert set(me) == {"account_id", "scopes", "key", "rate_limit"}
    assert me["scopes"] == ["data.read"]
    assert set(me["key"]) == {"id", "expires_at"} and me["key"]["expires_at"].endswith("Z")
    assert set(me["rate_limit"]) == {
        "minute_limit",
        "minute_remaining",
        "hour_limit",
        "hour_remaining",
    }


def test_list_default_page_is_50_newest_first(shared_api: Api) -> None:
    body = shared_api.get("/v1/transactions").json()
    assert set(body) == {"data", "total", "page", "pages"}
    assert body["page"] == 1 and len(body["data"]) == 50
    assert body["pages"] == math.ceil(body["total"] / 50)
    keys = [(t["booked_at"], t["created_at"]) for t in body["data"]]
    assert keys == sorted(keys, reverse=True)
    assert "notes" not in body["data"][0]


def test_pages_cover_every_row_once_and_past_the_end_is_empty(shared_api: Api) -> None:
    rows = shared_api.all_transactions()
    state = shared_api.state()
    assert [r["id"] for r in rows] == [t["id"] for t in state["transactions"]]
    total = len(rows)
    last = shared_api.get("/v1/transactions", limit=200, page=math.ceil(total / 200) + 1).json()
    assert last["data"] == [] and last["total"] == total


def test_sort_created_at_orders_by_creation_desc(shared_api: Api) -> None:
    data = shared_api.get("/v1/transactions", limit=200, sort="created_at").json()["data"]
    created = [t["created_at"] for t in data]
    assert created == sorted(created, reverse=True)


def test_filters_match_the_state(shared_api: Api) -> None:
    state = shared_api.state()
    txs = state["transactions"]
    acc = state["accounts"][0]["id"]
    cat = next(t["category_id"] for t in txs if t["category_id"])
    goal = next(t["expense_goal_id"] for t in txs if t["expense_goal_id"])
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"type": "transfer"}, lambda t: t["type"] == "transfer"),
        ({"account_id": acc}, lambda t: t["account_id"] == acc),
        ({"category_id": cat}, lambda t: t["category_id"] == cat),
        ({"expense_goal_id": goal}, lambda t: t["expense_goal_id"] == goal),
        ({"search": "MERCADONA"}, lambda t: "mercadona" in t["concept"].lower()),
        (
            {"from": "2026-03-01", "to": "2026-03-31"},
            lambda t: "2026-03-01" <= t["booked_at"] <= "2026-03-31",
        ),
        (
            {"type": "expense", "from": "2026-01-15"},
            lambda t: t["type"] == "expense" and t["booked_at"] >= "2026-01-15",
        ),
    ]
    for params, pred in cases:
        got = [t["id"] for t in shared_api.all_transactions(**params)]
        want = [t["id"] for t in txs if pred(t)]
        assert got == want and want, params


def test_single_transaction_includes_notes(shared_api: Api) -> None:
    t = shared_api.state()["transactions"][3]
    got = shared_api.get(f"/v1/transactions/{t['id']}").json()
    assert got == t and "notes" in got


def test_unknown_transaction_is_404(shared_api: Api) -> None:
    r = shared_api.get("/v1/transactions/6a1e4b6e-0000-4000-8000-000000000000")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


def test_summary_equals_the_rows_it_filters(shared_api: Api) -> None:
    for params in (
        {},
        {"from": "2026-02-01", "to": "2026-02-28"},
        {"type": "expense"},
        {"search": "uber"},
    ):
        rows = shared_api.all_transactions(**params)
        s = shared_api.get("/v1/transactions/summary", **params).json()
        by_type: dict[str, int] = defaultdict(int)
        for t in rows:
            by_type[t["type"]] += t["amount"]
        assert s == {
            "count": len(rows),
            "income": by_type["income"],
            "expense": by_type["expense"],
            "transfer": by_type["transfer"],
            "net": sum(t["amount"] for t in rows),
        }, params


def test_spending_groupings_equal_the_rows(shared_api: Api) -> None:
    state = shared_api.state()
    names = {c["id"]: c["name"] for c in state["categories"]}
    frm, to = "2025-06-01", "2026-05-31"
    expenses = [
        t for t in state["transactions"] if t["type"] == "expense" and frm <= t["booked_at"] <= to
    ]
    keyers = {
        "category": lambda t: t["category_id"],
        "merchant": lambda t: " ".join(t["concept"].split()).lower(),
        "month": lambda t: t["booked_at"][:7],
    }
    for group_by, keyer in keyers.items():
        cells: dict[Any, list[int]] = defaultdict(lambda: [0, 0])
        for t in expenses:
            cells[keyer(t)][0] += t["amount"]
            cells[keyer(t)][1] += 1
        body = shared_api.get(
            "/v1/analytics/spending", **{"from": frm, "to": to, "group_by": group_by}
        ).json()
        assert (
            body["from"] == frm
            and body["to"] == to
            and body["group_by"] == group_by
            and body["currency"] == "EUR"
        )
        assert {r["key"]: [r["amount"], r["count"]] for r in body["data"]} == dict(cells)
        assert body["total"] == sum(t["amount"] for t in expenses)
        amounts = [r["amount"] for r in body["data"]]
        assert amounts == sorted(amounts)
        if group_by == "category":
            for r in body["data"]:
                assert r["label"] == (names[r["key"]] if r["key"] else "Uncategorized")
    # Refunds are positive expenses and count towards spending.
    assert any(t["amount"] > 0 for t in expenses)


def test_spending_defaults_to_the_current_month_by_category(shared_api: Api) -> None:
    body = shared_api.get("/v1/analytics/spending").json()
    assert body["group_by"] == "category"
    assert body["from"] == "2026-11-01" and body["to"] == "2026-11-30"


def test_accounts_sorted_by_name_and_summary_and_net_worth_agree(shared_api: Api) -> None:
    accounts = shared_api.get("/v1/accounts").json()
    assert isinstance(accounts, list) and len(accounts) >= 6
    assert [a["name"].casefold() for a in accounts] == sorted(
        a["name"].casefold() for a in accounts
    )
    assert {a["type"] for a in accounts} >= {"depository", "credit", "investment", "loan"}
    summ = shared_api.get("/v1/accounts/summary").json()
    assets = sum(a["balance"] for a in accounts if a["balance"] > 0)
    liabilities = -sum(a["balance"] for a in accounts if a["balance"] < 0)
    by_type: dict[str, int] = defaultdict(int)
    for a in accounts:
        by_type[a["type"]] += a["balance"]
    assert summ == {
        "currency": "EUR",
        "assets": assets,
        "liabilities": liabilities,
        "net_worth": assets - liabilities,
        "count": len(accounts),
        "by_type": dict(by_type),
    }
    nw = shared_api.get("/v1/analytics/net-worth").json()
    assert (nw["assets"], nw["liabilities"], nw["total"]) == (
        assets,
        liabilities,
        assets - liabilities,
    )
    assert nw["as_of"].endswith("Z")


def test_balances_move_with_the_transactions() -> None:
    from starlette.testclient import TestClient

    sb = make_sandbox()
    with TestClient(sb.app, base_url="http://t") as c:
        api = Api(sb, c)
        acc = api.get("/v1/accounts").json()[0]
        r = api.post(
            "/v1/transactions",
            {
                "account_id": acc["id"],
                "amount": -1234,
                "concept": "cash",
                "booked_at": "2026-11-10",
            },
        )
        assert r.status_code == 201
        after = next(a for a in api.get("/v1/accounts").json() if a["id"] == acc["id"])
        assert after["balance"] == acc["balance"] - 1234


def test_connections_settings_and_sync_status(shared_api: Api) -> None:
    conns = shared_api.get("/v1/connections").json()["data"]
    assert len(conns) == 2 and {c["provider"] for c in conns} == {"bankfeed_eu", "openbank_uk"}
    for c in conns:
        assert set(c) == {
            "id",
            "provider",
            "institution",
            "status",
            "last_synced_at",
            "account_ids",
        }
        assert c["status"] in ("active", "reauth_required", "error")
    settings = shared_api.get("/v1/settings").json()
    assert settings == {
        "timezone": "Europe/Madrid",
        "currency": "EUR",
        "locale": "es-ES",
        "week_start": "monday",
    }
    status = shared_api.get("/v1/sync/status").json()["data"]
    assert {s["connection_id"] for s in status} == {c["id"] for c in conns}
    for s in status:
        assert s["next_sync_at"] > s["last_synced_at"]


def test_hidden_account_is_invisible_everywhere() -> None:
    sb = make_sandbox()
    svc = sb.service
    hidden = next(a for a in svc.accounts.values() if a.hidden)
    hidden_rows = svc.hidden_rows[hidden.id]
    assert hidden_rows, "the household has activity on its hidden account"
    from starlette.testclient import TestClient

    with TestClient(sb.app, base_url="http://t") as c:
        api = Api(sb, c)
        assert hidden.id not in {a["id"] for a in api.get("/v1/accounts").json()}
        ids = {t["id"] for t in api.all_transactions()}
        assert not ids & {t.id for t in hidden_rows}
        assert api.get(f"/v1/transactions/{hidden_rows[0].id}").status_code == 404
        assert api.get("/v1/transactions", account_id=hidden.id).status_code == 400
        conns = api.get("/v1/connections").json()["data"]
        assert all(hidden.id not in c["account_ids"] for c in conns)
        summ = api.get("/v1/accounts/summary").json()
        assert summ["count"] == len(api.get("/v1/accounts").json())
        spend = api.get(
            "/v1/analytics/spending", **{"from": "2000-01-01", "to": "2100-01-01"}
        ).json()
        assert spend["total"] == sum(
            t["amount"] for t in api.state()["transactions"] if t["type"] == "expense"
        )


def test_household_has_the_promised_shape(shared_api: Api) -> None:
    state = shared_api.state()
    txs = state["transactions"]
    names = {c["id"]: c["name"] for c in state["categories"]}
    cats = {names.get(t["category_id"]) for t in txs}
    assert cats >= {
        "Salary",
        "Rent",
        "Groceries",
        "Restaurants",
        "Subscriptions",
        "Utilities",
        "Transport",
        "Travel",
        None,
    }
    assert any(t["type"] == "transfer" and t["amount"] > 0 for t in txs) and any(
        t["type"] == "transfer" and t["amount"] < 0 for t in txs
    )
    assert len({t["expense_goal_id"] for t in txs if t["expense_goal_id"]}) >= 2
    concepts = {t["concept"] for t in txs}
    assert "Mercadona" in concepts and "MERCADONA 0412 VALENCIA" in concepts
    years = {t["booked_at"][:4] for t in txs}
    assert len(years) >= 2
    first = min(date.fromisoformat(t["booked_at"]) for t in txs)
    assert (date(2026, 11, 15) - first).days > 365 * 2 - 40


def test_same_seed_same_data_other_seed_other_data() -> None:
    a, b, c = make_sandbox(seed=5), make_sandbox(seed=5), make_sandbox(seed=6)
    sa, sb_, sc = a.state(), b.state(), c.state()
    assert sa == sb_
    assert sa["transactions"] != sc["transactions"]


def test_scale_knob_gives_exactly_n_visible_transactions() -> None:
    sb = make_sandbox(transactions=5000, years=4)
    assert len(sb.service.ledger.rows) == 5000
    days = {t.booked for t in sb.service.ledger.rows}
    assert max(days) - min(days) > 3 * 365
