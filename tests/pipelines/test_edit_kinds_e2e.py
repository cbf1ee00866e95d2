"""Edits that keep a month's count and per-type sums reach the warehouse within the stated bound
(docs/refresh.md, "What a refresh catches, and when").

Two families, each made in old months between two refreshes, over real loopback HTTP:
- caught at once, by the per-year fingerprints (spending by merchant): two expenses of one
  category with different merchants swap amounts; an expense's concept is renamed;
- caught by rolling verification within the period (no aggregate of the API sees them): an
  income re-categorised, an expense assigned to an Expense, a date moved within its month, an
  income renamed, two expenses of one category, merchant and account swap amounts.
Both run with CENTSYNC_PLAN=fingerprints: the cost-based plan re-reads a household's years and
catches all of them at once (tests/pipelines/test_plan_e2e.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import httpx
import pytest

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

HOT = "2026-10"  # the hot window starts here (sandbox clock 2026-11-15, two hot months)


def _v1(http_env: HttpEnv, method: str, path: str, body: Any) -> dict[str, Any]:
    """A write through the public API with the read-write key (the application's edit)."""
    with httpx.Client(
        base_url=http_env.base_url,
        headers={"Authorization": f"Bearer {http_env.sb.keys['read_write']}"},
    ) as c:
        r = c.request(method, path, json=body)
        assert r.status_code == 200, r.text
        return r.json()


def _local(http_env: HttpEnv, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    rows = http_env.sql(
        "SELECT id::VARCHAR, concept, amount, strftime(booked_at, '%Y-%m-%d'), "
        "category_id::VARCHAR, expense_goal_id::VARCHAR FROM core.transactions "
        "WHERE id::VARCHAR IN (SELECT unnest(?))",
        [ids],
    )
    return {r[0]: r[1:] for r in rows}


def _server(http_env: HttpEnv, ids: list[str]) -> dict[str, tuple[Any, ...]]:
    by_id = {t["id"]: t for t in http_env.sb.state()["transactions"]}
    return {
        i: (
            by_id[i]["concept"],
            by_id[i]["amount"],
            by_id[i]["booked_at"],
            by_id[i]["category_id"],
            by_id[i]["expense_goal_id"],
        )
        for i in ids
    }


def _swap_pair(tx: list[dict[str, Any]], *, same_merchant: bool, months: range) -> tuple[Any, Any]:
    """Two expenses of one month, category and account with different amounts: of one merchant,
    or of two."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for t in tx:
        if t["type"] != "expense" or t["booked_at"][:7] >= HOT:
            continue
        if int(t["booked_at"][5:7]) not in months:
            continue
        key = (t["booked_at"][:7], t["category_id"], t["account_id"])
        groups[key + ((t["concept"].lower(),) if same_merchant else ())].append(t)
    for rows in groups.values():
        for a in rows:
            for b in rows:
                if a["amount"] != b["amount"] and (
                    same_merchant or a["concept"].lower() != b["concept"].lower()
                ):
                    return a, b
    raise AssertionError("the household has no such pair")


def _swap(http_env: HttpEnv, a: dict[str, Any], b: dict[str, Any]) -> None:
    http_env.admin("PATCH", f"/_sandbox/transactions/{a['id']}", {"amount": b["amount"]})
    http_env.admin("PATCH", f"/_sandbox/transactions/{b['id']}", {"amount": a["amount"]})


def test_swaps_and_renames_of_expenses_are_caught_by_the_next_refresh(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rolling verification off, and every year proven by its fingerprints (a household's years
    # are otherwise re-read, test_plan_e2e.py): what is caught here is caught by them alone
    monkeypatch.setenv("CENTSYNC_VERIFY_DAYS", "0")
    monkeypatch.setenv("CENTSYNC_PLAN", "fingerprints")
    http_env.refresh()
    tx = http_env.sb.state()["transactions"]
    a, b = _swap_pair(tx, same_merchant=False, months=range(1, 13))
    _swap(http_env, a, b)
    renamed = next(
        t
        for t in tx
        if t["type"] == "expense" and "2025-03" <= t["booked_at"] < "2025-04" and t not in (a, b)
    )
    _v1(http_env, "PATCH", f"/v1/transactions/{renamed['id']}", {"concept": "Renamed by the user"})
    ids = [a["id"], b["id"], renamed["id"]]
    assert _local(http_env, ids) != _server(http_env, ids)  # the edits are not in the warehouse yet

    meta = http_env.refresh()
    assert _local(http_env, ids) == _server(http_env, ids)
    assert meta["rows"]["changed"] >= 3
    reasons = {r["reason"] for r in meta["months_reread"]}
    assert any("differs" in r for r in reasons), reasons
    assert meta["verification"]["months"] == 0
    http_env.assert_exact()


# CI runs it (make test-slow): refreshes across a verification period, about 15 s on 2 cores
@pytest.mark.slow
def test_edits_no_aggregate_sees_are_caught_within_the_verification_period(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Daily refreshes with a 7-day period and a 1-page minimum: each day re-reads about a
    seventh of the history; by the seventh day every edit is in the warehouse. The plan proves
    every year (a household's are otherwise re-read, and these edits caught at once:
    test_plan_e2e.py), so what catches them here is rolling verification alone."""
    monkeypatch.setenv("CENTSYNC_VERIFY_PAGES", "1")
    monkeypatch.setenv("CENTSYNC_PLAN", "fingerprints")
    http_env.refresh()
    state = http_env.sb.state()
    tx = state["transactions"]
    old = [t for t in tx if "2025-05" <= t["booked_at"] < HOT]
    income = [t for t in old if t["type"] == "income"]
    recategorised, renamed = income[0], income[-1]
    other_category = next(
        c["id"] for c in state["categories"] if c["id"] != recategorised["category_id"]
    )
    _v1(
        http_env,
        "PATCH",
        f"/v1/transactions/{recategorised['id']}",
        {"category_id": other_category},
    )
    _v1(http_env, "PATCH", f"/v1/transactions/{renamed['id']}", {"concept": "Salary, renamed"})
    a, b = _swap_pair(tx, same_merchant=True, months=range(1, 13))
    assigned = next(
        t
        for t in old
        if t["type"] == "expense" and t["expense_goal_id"] is None and t not in (a, b)
    )
    _v1(
        http_env,
        "POST",
        f"/v1/transactions/{assigned['id']}/expense",
        {"expense_goal_id": state["expenses"][0]["id"]},
    )
    moved = next(t for t in old if t["type"] == "transfer" and int(t["booked_at"][8:]) <= 20)
    day = int(moved["booked_at"][8:]) + 5
    http_env.admin(
        "PATCH",
        f"/_sandbox/transactions/{moved['id']}",
        {"booked_at": f"{moved['booked_at'][:8]}{day:02d}"},
    )
    _swap(http_env, a, b)
    ids = [recategorised["id"], renamed["id"], assigned["id"], moved["id"], a["id"], b["id"]]
    assert len(set(ids)) == len(ids)

    caught_on: dict[str, int] = {}
    verified = []
    for day_n in range(1, 8):
        http_env.admin("POST", "/_sandbox/clock/advance", {"days": 1})
        meta = http_env.refresh()
        verified.append(meta["verification"]["months"])
        local, server = _local(http_env, ids), _server(http_env, ids)
        for i in ids:
            if local.get(i) == server[i]:
                caught_on.setdefault(i, day_n)
        if len(caught_on) == len(ids):
            break
    assert set(caught_on) == set(ids), f"not caught within 7 days: {set(ids) - set(caught_on)}"
    code, out = http_env.cli("status")
    assert code == 0 and "Verification: oldest month re-read" in out
    code, out = http_env.cli("status", "--json")
    assert json.loads(out)["verification"]["months"] >= 20
    # spread out: no day re-read the whole history at once
    months = len({t["booked_at"][:7] for t in tx if t["booked_at"][:7] < HOT})
    assert max(verified) < months, verified
    http_env.assert_exact()


@pytest.mark.slow  # CI runs it (make test-slow); waits out ten real Retry-After seconds: about 16 s
def test_a_burst_of_ten_429s_is_waited_out_and_the_refresh_ends_exact(http_env: HttpEnv) -> None:
    http_env.refresh()
    http_env.admin("PUT", "/_sandbox/faults", {"rate_limit_burst": 10})
    meta = http_env.refresh()
    assert meta["requests"]["retries"] >= 10
    http_env.assert_exact()


@pytest.mark.slow  # CI runs it (make test-slow); spends a real wait budget: about 7 s
def test_a_rate_limit_past_the_wait_budget_stops_with_when_to_run_again(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from centsync.pipelines.cli.main import main

    http_env.refresh()
    monkeypatch.setenv("CENTSYNC_MAX_WAIT", "0.5")  # shorter than the 1 s the service asks
    http_env.admin("PUT", "/_sandbox/faults", {"rate_limit_burst": 3})
    result = CliRunner().invoke(main, ["refresh"], catch_exceptions=False)
    assert result.exit_code == 5, result.output
    assert "CENTSYNC_MAX_WAIT" in result.output and "run again after" in result.output
    assert http_env.sb.keys["read_only"] not in result.output
    http_env.admin("DELETE", "/_sandbox/faults")
    http_env.refresh()
    http_env.assert_exact()
