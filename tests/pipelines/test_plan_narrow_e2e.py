"""Reconciliation names a differing category at its month (issue 26), over real loopback HTTP:
a row re-categorised on the service between the ledger read and the aggregates differs over the
whole history in two categories; the refresh's reconciliation places both in the row's month
with the service's own spending (a request per halving) and says so in `refresh --json`,
`recon.results` and the report."""

from __future__ import annotations

import pytest

from centsync.extract import ApiClient
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh

from .conftest import HttpEnv
from .test_reconcile_e2e import _ChangesTheServerBeforeItsAggregates

pytestmark = pytest.mark.e2e

SPENDING = "GET /v1/analytics/spending"


def test_a_recategorised_row_is_named_at_its_month_and_both_categories(http_env: HttpEnv) -> None:
    http_env.refresh()
    state = http_env.sb.state()
    row = next(
        t
        for t in state["transactions"]
        if t["type"] == "expense" and t["category_id"] and t["booked_at"].startswith("2025-03")
    )
    names = {c["id"]: c["name"] for c in state["categories"]}
    other = next(c for c in names if c != row["category_id"])

    def edit() -> None:
        http_env.admin("PATCH", f"/_sandbox/transactions/{row['id']}", {"category_id": other})

    with _ChangesTheServerBeforeItsAggregates(
        http_env.base_url, http_env.sb.keys["read_only"], max_window_rows=10**12, edit=edit
    ) as client:
        summary = run_refresh(client, str(http_env.warehouse), RefreshOptions(mode="full"))
    scopes = {(d["check"], d["scope"]): d for d in summary.differences}
    assert ("spending.category", f"all/{names[row['category_id']]}") in scopes
    left = scopes[("spending.category", f"2025-03/{names[row['category_id']]}")]
    joined = scopes[("spending.category", f"2025-03/{names[other]}")]
    assert left["difference_cents"] == row["amount"] == -joined["difference_cents"]
    # the service changed the month after it was read: explained, and saying which month
    assert left["status"] == joined["status"] == "explained"
    assert "2025-03" in left["explanation"]
    # within 15 requests: 3 spending requests every refresh lands, the rest placed the month
    assert 1 <= summary.requests[SPENDING] - 3 <= 15, summary.requests
    # the narrowest first: the month comes before the whole history
    firsts = [d["scope"] for d in summary.differences if d["check"] == "spending.category"]
    assert firsts[0].startswith("2025-03/")
    recorded = http_env.sql(
        "SELECT scope FROM recon.results WHERE recon_id = ? AND scope LIKE '2025-03/%'",
        [summary.recon_id],
    )
    assert {r[0] for r in recorded} >= {
        f"2025-03/{names[row['category_id']]}",
        f"2025-03/{names[other]}",
    }
    # stand-alone `centsync reconcile` asks no service, and names the same month and categories
    # (the refresh's narrowing replayed from the warehouse)
    code, offline = http_env.reconcile()
    assert code == 0 and offline["verdict"] == "explained", offline
    named = {(d["check"], d["scope"]): d for d in offline["differences"]}
    for name in (names[row["category_id"]], names[other]):
        again = named[("spending.category", f"2025-03/{name}")]
        assert again["status"] == "explained" and abs(again["difference_cents"]) == abs(
            row["amount"]
        )
    firsts = [d["scope"] for d in offline["differences"] if d["check"] == "spending.category"]
    assert firsts[0].startswith("2025-03/")
    code, out = http_env.cli("report")
    assert code == 0, out
    report = next(http_env.warehouse.parent.glob("*.html")).read_text("utf-8")
    assert f"2025-03/{names[other]}" in report


def test_nothing_is_spent_narrowing_when_everything_agrees(http_env: HttpEnv) -> None:
    first = http_env.refresh()
    with ApiClient(
        http_env.base_url, http_env.sb.keys["read_only"], max_window_rows=10**12
    ) as client:
        summary = run_refresh(client, str(http_env.warehouse), RefreshOptions())
    assert summary.verdict == "agree" and first["verdict"] == "agree"
    assert summary.requests[SPENDING] == 3


def test_a_renamed_merchant_is_named_at_its_month_online_and_offline(http_env: HttpEnv) -> None:
    """A row renamed on the service between the ledger read and the aggregates moves its amount
    from one merchant to another over the whole history; the refresh places both at the row's
    month, and stand-alone `centsync reconcile` names the same month."""
    http_env.refresh()
    state = http_env.sb.state()
    row = max(
        (
            t
            for t in state["transactions"]
            if t["type"] == "expense" and t["booked_at"].startswith("2025-03")
        ),
        key=lambda t: -t["amount"],
    )
    merchant = " ".join(row["concept"].strip().lower().split())

    def edit() -> None:
        http_env.admin(
            "PATCH", f"/_sandbox/transactions/{row['id']}", {"concept": "NARROW Renamed"}
        )

    with _ChangesTheServerBeforeItsAggregates(
        http_env.base_url, http_env.sb.keys["read_only"], max_window_rows=10**12, edit=edit
    ) as client:
        summary = run_refresh(client, str(http_env.warehouse), RefreshOptions(mode="full"))
    merchants = {d["scope"]: d for d in summary.differences if d["check"] == "spending.merchant"}
    assert f"2025-03/{merchant}" in {s.lower() for s in merchants}, sorted(merchants)
    month = {s.lower(): d for s, d in merchants.items() if s.startswith("2025-03/")}
    left = month[f"2025-03/{merchant}"]
    assert left["difference_cents"] == row["amount"] and left["status"] == "explained"
    assert 1 <= summary.requests[SPENDING] - 3 <= 15, summary.requests
    code, offline = http_env.reconcile()
    assert code == 0 and offline["verdict"] == "explained", offline
    again = {
        d["scope"].lower(): d for d in offline["differences"] if d["check"] == "spending.merchant"
    }
    assert again[f"2025-03/{merchant}"]["difference_cents"] == row["amount"]
    assert again[f"2025-03/{merchant}"]["status"] == "explained"
