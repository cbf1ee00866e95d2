"""Every sandbox dialect (sandbox/dialects.py): a first sync, an edit in an old month and an
incremental refresh leave the warehouse exactly equal to the service, whatever shape the
service gives the answers the API document leaves "not shown"; the contract is learned from
the data (ops.contract) and reconciliation proves the numbers the answers support.

In process (httpx.ASGITransport): fast, the same sandbox and the same refresh code as over
loopback (tests/pipelines/test_refresh_e2e.py runs that one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import httpx
import polars as pl
import pytest
from starlette.testclient import TestClient

from centsync.extract import ApiClient
from centsync.pipelines.reconcile import reconcile
from centsync.pipelines.refresh.run import run_refresh
from centsync.pipelines.refresh.summary import RefreshOptions
from centsync.sandbox import Sandbox
from centsync.sandbox.app import SandboxApp
from centsync.sandbox.dialects import DIALECTS
from centsync.sandbox.server import run_in_thread
from centsync.transform.compare import UNREAD
from helpers import make_sandbox

from .conftest import HttpEnv, assert_exact

pytestmark = pytest.mark.e2e

BASE = "http://sandbox.test"
SUMMARY = "GET /v1/transactions/summary"
# the numbers the contract's answers let reconciliation prove on this household (every check)
CONTRACT_CHECKS = 106


def _client(sb: Sandbox) -> ApiClient:
    return ApiClient(
        BASE,
        sb.keys["read_only"],
        transport=httpx.ASGITransport(app=sb.app),
        backoff_initial=0.01,
        backoff_max=0.05,
    )


def _admin(sb: Sandbox, method: str, path: str, body: Any = None) -> Any:
    """The sandbox's control surface (an edit as the bank would make it), in process."""
    with TestClient(sb.app, base_url=BASE) as c:
        r = c.request(
            method, path, json=body, headers={"Authorization": f"Bearer {sb.keys['admin_token']}"}
        )
        assert r.status_code < 300, r.text
        return r.json() if r.content else None


def _refresh(sb: Sandbox, warehouse: Path) -> Any:
    with _client(sb) as client:
        return run_refresh(client, warehouse, RefreshOptions(source="sandbox"))


def _contract(warehouse: Path) -> dict[str, tuple[str, str | None]]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        got = con.execute("SELECT surface, state, reason FROM ops.contract").fetchall()
    finally:
        con.close()
    return {s: (state, reason) for s, state, reason in got}


def _proves_what_the_answers_support(summary: Any, warehouse: Path) -> None:
    """As many numbers as against the contract, every one proved but those the service's
    answers do not give (listed as unavailable, with that reason, never as agreeing)."""
    assert summary.recon_checked + summary.recon_unavailable >= CONTRACT_CHECKS
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        why = con.execute(
            "SELECT DISTINCT explanation FROM recon.results WHERE status = 'unavailable'"
        ).fetchall()
    finally:
        con.close()
    assert set(why) <= {(UNREAD,)}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_dialect_syncs_exactly_learns_its_contract_and_proves_its_numbers(
    dialect: str, tmp_path: Path
) -> None:
    sb = make_sandbox(dialect=dialect, rate_limit=False)
    warehouse = tmp_path / "centsync.duckdb"
    first = _refresh(sb, warehouse)
    assert_exact(sb, warehouse)
    contract = _contract(warehouse)
    # every surface this household's answers can support is read: learned or documented
    assert {s: v for s, v in contract.items() if v[0] not in ("documented", "learned")} == {}
    if dialect == "contract":
        assert {v[0] for v in contract.values()} == {"documented"}
    assert first.verdict == "agree", first.differences
    _proves_what_the_answers_support(first, warehouse)
    # the category names (the API's only source of them: the spending rows' labels)
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        named = dict(con.execute("SELECT id::VARCHAR, name FROM core.categories").fetchall())
    finally:
        con.close()
    names = {c["id"]: c["name"] for c in sb.state()["categories"]}
    assert named and named == {k: names[k] for k in named}
    # an edit in an old month, as the bank would make it, then an incremental refresh
    state = sb.state()
    old = next(
        t for t in state["transactions"] if t["booked_at"] < "2025-03-01" and t["type"] == "expense"
    )
    _admin(
        sb,
        "PATCH",
        f"/_sandbox/transactions/{old['id']}",
        {"concept": "Edited by the bank", "amount": old["amount"] - 7},
    )
    second = _refresh(sb, warehouse)
    assert second.mode == "incremental"
    assert second.rows_changed >= 1
    assert_exact(sb, warehouse)
    assert second.verdict == "agree", second.differences
    _proves_what_the_answers_support(second, warehouse)
    # learning costs nothing after the first refresh: the shapes are only re-checked
    assert second.contract["notes"] == []


def test_a_service_that_changes_its_shape_is_noticed_named_and_re_learned(tmp_path: Path) -> None:
    sb = make_sandbox(rate_limit=False)
    warehouse = tmp_path / "centsync.duckdb"
    _refresh(sb, warehouse)
    assert {v[0] for v in _contract(warehouse).values()} == {"documented"}
    # the same service, the same data, another way of answering (a new release of the API)
    sb.app = SandboxApp(sb.service, "camel")
    changed = _refresh(sb, warehouse)
    assert_exact(sb, warehouse)
    notes = " ".join(changed.contract["notes"])
    assert "GET /v1/transactions/summary" in notes and "changed its shape" in notes
    assert changed.verdict == "agree", changed.differences
    contract = _contract(warehouse)
    assert contract["GET /v1/transactions/summary"][0] == "learned"
    assert contract["GET /v1/analytics/spending"][0] == "learned"
    # learned: the next refresh only re-checks the shapes, and says nothing
    again = _refresh(sb, warehouse)
    assert again.contract["notes"] == []
    assert again.requests_total <= changed.requests_total
    assert_exact(sb, warehouse)


@pytest.mark.parametrize("dialect", ["tagged", "result"])
def test_live_reconciliation_reads_through_the_learned_contract(
    dialect: str, tmp_path: Path
) -> None:
    sb = make_sandbox(dialect=dialect, rate_limit=False)
    warehouse = tmp_path / "centsync.duckdb"
    _refresh(sb, warehouse)
    con = duckdb.connect(str(warehouse))
    try:
        with _client(sb) as client:
            outcome = reconcile(con, source="live", client=client, build_marts=False)
    finally:
        con.close()
    assert outcome.verdict == "agree", outcome.differences
    counts = outcome.counts()
    # every number the answers give is proved; the ones they do not give are listed apart
    assert outcome.proved > CONTRACT_CHECKS and counts["unavailable"] > 0
    unread = outcome.results.filter(pl.col("status") == "unavailable")
    assert set(unread["explanation"].to_list()) == {UNREAD}
    if dialect == "tagged":  # its totals give the count and net only: every month's sums listed
        months = unread.filter(pl.col("check") == "transactions.income")
        assert months.height > 12


@pytest.mark.parametrize("dialect", ["keyed", "bare", "enveloped"])
def test_years_are_proven_through_a_learned_contract(dialect: str, tmp_path: Path) -> None:
    """Every year proven by its fingerprints (a household's are otherwise re-read): the
    learned totals and spending answers prove the history, and a re-categorisation in an old
    year is found by them and re-read."""
    sb = make_sandbox(dialect=dialect, rate_limit=False)
    warehouse = tmp_path / "centsync.duckdb"
    options = RefreshOptions(source="sandbox", plan="fingerprints")
    with _client(sb) as client:
        run_refresh(client, warehouse, options)
    state = sb.state()
    t = next(
        t
        for t in state["transactions"]
        if t["booked_at"] < "2025-01-01" and t["type"] == "expense" and t["category_id"]
    )
    other = next(c["id"] for c in state["categories"] if c["id"] != t["category_id"])
    _admin(sb, "PATCH", f"/_sandbox/transactions/{t['id']}", {"category_id": other})
    with _client(sb) as client:
        second = run_refresh(client, warehouse, options)
    assert second.mode == "incremental" and "re-read instead" not in second.reason
    assert second.months_checked > 0
    assert any("differs" in r["reason"] for r in second.months_reread)
    assert second.rows_changed >= 1
    assert_exact(sb, warehouse)
    assert second.verdict == "agree", second.differences


def test_the_cli_refresh_over_loopback_on_the_tersest_dialect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One end to end over HTTP, through the CLI and its Dagster run: `tagged` gives the least
    (terse totals, per-type account rows, unix times, no Retry-After)."""
    sb = make_sandbox(dialect="tagged", rate_limit=False)
    with run_in_thread(sb) as base_url:
        http_env = HttpEnv(sb, base_url, tmp_path, monkeypatch)
        first = http_env.refresh()
        http_env.assert_exact()
        assert first["status"] == "ok" and first["verdict"] == "agree"
        assert first["contract"]["unavailable"] == {}
        recon = first["reconciliation"]
        assert recon["unavailable"] > 0 and recon["checked"] + recon["unavailable"] >= 106
        code, out = http_env.cli("reconcile")
        assert code == 0, out
        proved = f"{recon['checked']} numbers proved, {recon['unavailable']} could not be"
        assert proved in out


def test_a_damaged_row_on_a_first_sync_is_done_without_then_learned_and_explained(
    tmp_path: Path,
) -> None:
    """The rows cannot confirm the totals while one is rejected: the first refresh lands the
    rest, lists the checks it could not read as unavailable (never agreeing) and names why; the
    next learns the answers on a month read whole and explains the difference."""
    sb = make_sandbox(dialect="keyed", rate_limit=False)
    warehouse = tmp_path / "centsync.duckdb"
    victim = next(t for t in sb.state()["transactions"] if t["booked_at"] < "2025-06-01")
    _admin(sb, "PUT", "/_sandbox/faults", {"corrupt": {victim["id"]: "amount_string"}})
    first = _refresh(sb, warehouse)
    assert first.rows_rejected == 1 and first.verdict == "agree"
    assert first.recon_unavailable > 0
    assert SUMMARY in first.contract["unavailable"]
    assert "limit=1" in first.contract["unavailable"][SUMMARY]
    second = _refresh(sb, warehouse)
    assert second.verdict == "explained" and second.recon_unavailable == 0
    assert _contract(warehouse)[SUMMARY][0] == "learned"


class _Without:
    """The sandbox with some "not shown" surfaces missing (404 `not_found` in the error
    envelope, as a service without those endpoints answers): everything else is the sandbox."""

    def __init__(self, app: Any, paths: tuple[str, ...]) -> None:
        self.app, self.paths = app, paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            body = b'{"error": {"code": "not_found", "message": "no such endpoint"}}'
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def test_a_service_without_the_aggregate_endpoints_still_lands_everything(tmp_path: Path) -> None:
    """Only the documented surface answers: the ledger and accounts land exactly, every
    aggregate is named as unavailable with why, and reconciliation proves nothing it cannot."""
    sb = make_sandbox(rate_limit=False)
    missing = (
        "/v1/settings",
        "/v1/analytics/net-worth",
        "/v1/accounts/summary",
        "/v1/transactions/summary",
        "/v1/analytics/spending",
        "/v1/connections",
        "/v1/sync/status",
    )
    app = _Without(sb.app, missing)
    warehouse = tmp_path / "centsync.duckdb"
    for _ in range(2):  # a first sync, then an incremental refresh after an edit
        with ApiClient(BASE, sb.keys["read_only"], transport=httpx.ASGITransport(app=app)) as c:
            summary = run_refresh(c, warehouse, RefreshOptions(source="sandbox"))
        assert_exact(sb, warehouse)
        assert summary.verdict == "agree"
        assert summary.recon_checked == 0 and summary.recon_unavailable > 0
        assert set(_contract(warehouse)) == {f"GET {p}" for p in missing}
        assert {v[0] for v in _contract(warehouse).values()} == {"unavailable"}
        assert "not_found" in summary.contract["unavailable"][SUMMARY]
        old = next(t for t in sb.state()["transactions"] if t["booked_at"] < "2025-03-01")
        _admin(sb, "PATCH", f"/_sandbox/transactions/{old['id']}", {"amount": old["amount"] - 1})
