"""The cost-based plan end to end (issue 26), over real loopback HTTP: a household's refresh
re-reads everything for no more than a first sync and so catches every kind of edit at once;
`refresh --plan` prints what a refresh will spend and writes nothing; a big ledger places old
edits in their months (spending by month, bisection) and re-reads only those."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from centsync.pipelines.results import json_schemas
from centsync.sandbox.server import run_in_thread
from helpers import make_sandbox

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e

HOT = "2026-10"  # the hot window starts here (sandbox clock 2026-11-15, two hot months)


def _v1(http_env: HttpEnv, method: str, path: str, body: Any) -> None:
    """A write through the public API with the read-write key (the application's edit)."""
    with httpx.Client(
        base_url=http_env.base_url,
        headers={"Authorization": f"Bearer {http_env.sb.keys['read_write']}"},
    ) as c:
        r = c.request(method, path, json=body)
        assert r.status_code == 200, r.text


def _old(tx: list[dict[str, Any]], kind: str, month: str) -> list[dict[str, Any]]:
    return [t for t in tx if t["type"] == kind and t["booked_at"].startswith(month)]


def _every_edit_kind(http_env: HttpEnv) -> None:
    """One edit of each kind in docs/refresh.md's table, each in a month before the hot window."""
    state = http_env.sb.state()
    tx = state["transactions"]
    patch = lambda t, body: http_env.admin("PATCH", f"/_sandbox/transactions/{t['id']}", body)  # noqa: E731
    e1, e2, e3, e4, e5, e6 = _old(tx, "expense", "2025-02")[:6]
    income = _old(tx, "income", "2025-04") + _old(tx, "income", "2025-06")
    transfer = next(t for t in tx if t["type"] == "transfer" and t["booked_at"] < "2025-09-20")
    other_category = next(c["id"] for c in state["categories"] if c["id"] != e1["category_id"])
    income_category = next(
        c["id"] for c in state["categories"] if c["id"] != income[0]["category_id"]
    )
    http_env.admin(  # added, backdated older than anything local
        "POST",
        "/_sandbox/transactions",
        {
            "account_id": state["accounts"][0]["id"],
            "amount": -4_321,
            "concept": "Backdated",
            "booked_at": "2023-01-05",
        },
    )
    http_env.admin("DELETE", f"/_sandbox/transactions/{e1['id']}")  # deleted
    patch(e2, {"amount": e2["amount"] - 99})  # amount changed
    patch(e3, {"booked_at": "2025-05-14"})  # moved to another month
    _v1(http_env, "PATCH", f"/v1/transactions/{e4['id']}", {"category_id": other_category})
    _v1(http_env, "PATCH", f"/v1/transactions/{e5['id']}", {"concept": e5["concept"].upper() + " "})
    _v1(
        http_env,
        "POST",
        f"/v1/transactions/{e6['id']}/expense",
        {"expense_goal_id": state["expenses"][0]["id"]},
    )
    _v1(http_env, "PATCH", f"/v1/transactions/{income[0]['id']}", {"category_id": income_category})
    _v1(http_env, "PATCH", f"/v1/transactions/{income[1]['id']}", {"concept": "Salary, renamed"})
    day = int(transfer["booked_at"][8:]) + 5  # moved within its month
    patch(transfer, {"booked_at": f"{transfer['booked_at'][:8]}{day:02d}"})


def test_a_household_catches_every_edit_kind_at_once_for_no_more_than_a_first_sync(
    http_env: HttpEnv,
) -> None:
    first = http_env.refresh()
    assert first["mode"] == "full"
    _every_edit_kind(http_env)
    meta = http_env.refresh()
    http_env.assert_exact()  # every kind, including those only rolling verification caught before
    assert meta["mode"] == "incremental" and "re-reading everything" in meta["reason"]
    assert meta["requests"]["total"] <= first["requests"]["total"]
    assert meta["rows"]["changed"] >= 10
    again = http_env.refresh()  # nothing changed: still no dearer than re-reading everything
    assert again["rows"]["changed"] == 0
    assert again["requests"]["total"] <= first["requests"]["total"]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_refresh_plan_writes_nothing_and_estimates_what_the_refresh_spends(
    http_env: HttpEnv,
) -> None:
    code, out = http_env.cli("refresh", "--plan", "--json")
    assert code == 0, out
    printed = json.loads(out.strip().splitlines()[-1])
    jsonschema.validate(printed, json_schemas()["refresh-plan"])  # with the CLI's envelope
    planned = printed["plan"]
    assert planned["mode"] == "full" and planned["reason"] == "first sync"
    assert planned["requests_spent"] == 4  # me, settings, net worth, the ledger's count
    assert not http_env.warehouse.exists()
    first = http_env.refresh()
    assert first["requests"]["total"] == planned["estimate"]

    before = _digest(http_env.warehouse)
    code, out = http_env.cli("refresh", "--dry-run")
    assert code == 0, out
    assert "Nothing was read or written: 3 request(s)" in out
    assert "re-read" in out and "Estimate: about" in out
    code, out = http_env.cli("refresh", "--plan", "--json")
    planned = json.loads(out.strip().splitlines()[-1])["plan"]
    assert _digest(http_env.warehouse) == before  # the plan wrote nothing
    assert planned["everything"] is True
    assert {p["choice"] for p in planned["parts"]} == {"re-read"}
    second = http_env.refresh()
    assert second["rows"]["changed"] == 0
    assert second["requests"]["total"] == planned["estimate"]

    code, out = http_env.cli("refresh", "--plan", "--hot", "--full")
    assert code == 2  # a usage error, before any request


@pytest.fixture
def big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpEnv]:
    """A ledger of 30,000 rows over 3 years: a year is 50 pages, proven by its fingerprints."""
    sb = make_sandbox(rate_limit=False, years=3, transactions=30_000)
    with run_in_thread(sb) as base_url:
        yield HttpEnv(sb, base_url, tmp_path, monkeypatch)


def test_a_big_ledger_places_old_edits_in_their_months_and_rereads_only_those(
    big: HttpEnv,
) -> None:
    env = big
    env.refresh()
    _, out = env.cli("refresh", "--plan", "--json")
    planned = json.loads(out.strip().splitlines()[-1])["plan"]
    assert {p["choice"] for p in planned["parts"] if p["rows"] > 5_000} == {"prove"}
    quiet = env.refresh()
    assert quiet["rows"]["changed"] == 0
    assert quiet["requests"]["total"] == planned["estimate"]  # the estimate, when nothing differs
    state = env.sb.state()
    tx = state["transactions"]
    expense = _old(tx, "expense", "2024-05")[3]
    income = _old(tx, "income", "2025-03")[0]
    recategorised = _old(tx, "expense", "2024-11")[5]
    renamed = _old(tx, "expense", "2025-08")[2]
    other = next(c["id"] for c in state["categories"] if c["id"] != recategorised["category_id"])
    env.admin("PATCH", f"/_sandbox/transactions/{expense['id']}", {"amount": expense["amount"] - 7})
    env.admin("PATCH", f"/_sandbox/transactions/{income['id']}", {"amount": income["amount"] + 7})
    env.admin("PATCH", f"/_sandbox/transactions/{recategorised['id']}", {"category_id": other})
    env.admin("PATCH", f"/_sandbox/transactions/{renamed['id']}", {"concept": "Renamed"})

    meta = env.refresh()
    env.assert_exact()
    located = [r for r in meta["months_reread"] if "differs" in r["reason"]]
    assert sorted(r["from"] for r in located) == ["2024-05", "2024-11", "2025-03", "2025-08"]
    assert all(r["months"] == 1 for r in located), located
    # drilling every month of the three years that differ (3 requests each) would alone cost
    # 3 x 12 x 2 = 72 requests more than a quiet refresh; placing them costs far less
    extra = meta["requests"]["total"] - quiet["requests"]["total"]
    pages = sum(-(-r["rows"] // 200) + 1 for r in located)
    assert extra - pages <= 30, (extra, pages)
