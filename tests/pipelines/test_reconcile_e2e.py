"""Marts and reconciliation end to end: the CLI and Dagster runs against a sandbox on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from centsync.extract import ApiClient
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.transform.marts import MART_NAMES

from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _differences(report: dict[str, Any], status: str = "differ") -> dict[tuple[str, str], int]:
    return {
        (d["check"], d["scope"]): d["difference_cents"]
        for d in report["differences"]
        if d["status"] == status
    }


def test_a_refresh_builds_every_mart_and_everything_agrees(http_env: HttpEnv) -> None:
    meta = http_env.refresh()
    assert meta["verdict"] == "agree" and meta["reconciliation"]["differ"] == 0
    assert meta["reconciliation"]["checked"] > 50
    for name in MART_NAMES:
        (n,) = http_env.sql(f"SELECT count(*) FROM marts.{name}")[0]
        assert n > 0, name
    # the marts are the ledger's numbers: spending per month equals the server's own
    state = http_env.sb.state()
    want: dict[str, int] = {}
    for t in state["transactions"]:
        if t["type"] == "expense":
            want[t["booked_at"][:7]] = want.get(t["booked_at"][:7], 0) + t["amount"]
    got = dict(
        http_env.sql(
            "SELECT strftime(month, '%Y-%m'), sum(amount_cents) FROM marts.spending_by_month_category GROUP BY 1"
        )
    )
    assert got == want
    # today's reconstructed net worth is the accounts' net worth
    (nw,) = http_env.sql(
        "SELECT net_worth_cents FROM marts.net_worth_daily ORDER BY date DESC LIMIT 1"
    )[0]
    assert nw == sum(a["balance"] for a in state["accounts"])
    code, report = http_env.reconcile()
    assert code == 0 and report["verdict"] == "agree" and report["differences"] == []
    assert report["checked"] == meta["reconciliation"]["checked"]
    (runs,) = http_env.sql("SELECT count(*) FROM recon.runs")[0]
    assert runs == 2
    # --live proves every synced month on its own: categories, merchants and totals per type
    code, live = http_env.reconcile("--live")
    assert code == 0 and live["verdict"] == "agree" and live["checked"] > report["checked"]
    months = {t["booked_at"][:7] for t in state["transactions"]}
    per_month = http_env.sql(
        """
        SELECT "check", count(DISTINCT strftime(from_date, '%Y-%m')) FROM recon.results
        WHERE recon_id = ? AND from_date IS NOT NULL AND date_trunc('month', from_date) = from_date
          AND to_date = last_day(from_date)
        GROUP BY 1
        """,
        [live["recon_id"]],
    )
    counts = dict(per_month)
    for check in ("spending.category", "transactions.net", "transactions.income"):
        assert counts[check] >= len(months), (check, counts)


def test_corruption_is_flagged_exactly_and_a_refresh_repairs_it(http_env: HttpEnv) -> None:
    http_env.refresh()
    old = http_env.sql(
        """
        SELECT id::VARCHAR, strftime(month, '%Y-%m'), amount, category_id::VARCHAR, type
        FROM core.transactions WHERE type = 'expense' AND category_id IS NOT NULL
          AND month < DATE '2026-01-01' ORDER BY booked_at, id
        """
    )
    changed, deleted, moved = old[0], old[40], old[80]
    assert len({changed[1], deleted[1], moved[1]}) == 3  # three different months
    other = next(r[3] for r in old if r[3] != moved[3])
    http_env.sql("UPDATE core.transactions SET amount = amount - 1234 WHERE id = ?", [changed[0]])
    http_env.sql("DELETE FROM core.transactions WHERE id = ?", [deleted[0]])
    http_env.sql("UPDATE core.transactions SET category_id = ? WHERE id = ?", [other, moved[0]])
    (account, acc_type) = http_env.sql(
        "SELECT id::VARCHAR, type FROM core.accounts ORDER BY id LIMIT 1"
    )[0]
    http_env.sql("UPDATE core.accounts SET balance = balance + 500 WHERE id = ?", [account])

    code, report = http_env.reconcile()
    assert code == 1 and report["verdict"] == "differ"
    diffs = _differences(report)
    # the month of each changed amount, with the right difference; the recategorised month
    # keeps its sum, so it shows only in the categories
    assert diffs[("spending.month", changed[1])] == -1234
    assert diffs[("spending.month", deleted[1])] == -deleted[2]
    assert ("spending.month", moved[1]) not in diffs
    cats = {scope: d for (check, scope), d in diffs.items() if check == "spending.category"}
    assert len(cats) >= 2  # the category the row left and the one it joined
    assert diffs[("accounts.by_type", acc_type)] == 500
    assert diffs[("accounts.net_worth", "all")] == 500
    assert diffs[("net_worth.total", "all")] == 500
    rows = {(r["entity"], r["id"]): r for r in report["row_differences"]}
    assert rows[("transactions", changed[0])]["kind"] == "different"
    assert rows[("transactions", changed[0])]["fields"] == "amount"
    assert rows[("transactions", deleted[0])]["kind"] == "only_server"
    assert rows[("transactions", moved[0])]["fields"] == "category_id"
    assert rows[("accounts", account)]["fields"] == "balance"
    assert len(rows) == 4
    assert all(d["explanation"] for d in report["differences"])

    meta = http_env.refresh()  # the fingerprints see the changed months; snapshots replace accounts
    assert meta["verdict"] == "agree", meta
    http_env.assert_exact()
    code, report = http_env.reconcile()
    assert code == 0 and report["verdict"] == "agree"


class _ChangesTheServerBeforeItsAggregates(ApiClient):
    """A client that edits the server once its ledger read is done, before the requests that
    follow it (snapshots and aggregates, asked for at once): the transactions were read before
    the edit, the aggregates after it."""

    def __init__(self, *args: Any, edit: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._edit = edit
        self._reading = False

    def stream_window(self, *args: Any, **kwargs: Any) -> Any:
        self._reading = True
        return super().stream_window(*args, **kwargs)

    def gather(self, *calls: Any) -> list[Any]:
        if self._reading and self._edit is not None:
            self._edit()
            self._edit = None
        return super().gather(*calls)


class _EditsBetweenTheSnapshotAndTheSummary(ApiClient):
    """A client whose accounts summary is asked for after a server-side edit that the accounts
    snapshot, answered just before, did not see. (The refresh asks for both at once; this
    orders them.)"""

    def __init__(self, *args: Any, edit: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        inner = self.async_client
        accounts, summary, body = inner.accounts, inner.accounts_summary, inner.body
        snapshot_answered = asyncio.Event()
        pending = [edit]

        async def accounts_then_signal(**kwargs: Any) -> Any:
            try:
                return await accounts(**kwargs)
            finally:
                snapshot_answered.set()

        async def edit_first() -> None:
            if pending:
                await snapshot_answered.wait()
                await asyncio.to_thread(pending.pop())

        async def edit_then_summary() -> Any:
            await edit_first()
            return await summary()

        async def edit_then_body(path: str, params: Any = None) -> Any:
            # the refresh reads the answer as sent, to learn its shape (issue 42)
            if path == "/v1/accounts/summary":
                await edit_first()
            return await body(path, params)

        inner.accounts = accounts_then_signal  # type: ignore[method-assign]
        inner.accounts_summary = edit_then_summary  # type: ignore[method-assign]
        inner.body = edit_then_body  # type: ignore[method-assign]


def test_a_server_change_between_the_read_and_the_aggregates_is_explained(
    http_env: HttpEnv, tmp_path: Path
) -> None:
    http_env.refresh()
    state = http_env.sb.state()
    t = next(
        t for t in state["transactions"] if t["type"] == "expense" and t["booked_at"] < "2025-06-01"
    )

    def edit() -> None:
        http_env.admin("PATCH", f"/_sandbox/transactions/{t['id']}", {"amount": t["amount"] - 999})

    with _ChangesTheServerBeforeItsAggregates(
        http_env.base_url, http_env.sb.keys["read_only"], max_window_rows=10**12, edit=edit
    ) as client:
        summary = run_refresh(client, str(http_env.warehouse), RefreshOptions(mode="full"))
    assert summary.verdict == "explained", summary.differences
    explained = [d for d in summary.differences if d["status"] == "explained"]
    assert any(
        d["check"] == "spending.month" and d["scope"] == t["booked_at"][:7] for d in explained
    )
    # each says what moved on the service: the month changed after its read, or (net worth,
    # read at the start) the accounts moved before their snapshot
    assert all(
        "changed" in d["explanation"] or "moved before their snapshot" in d["explanation"]
        for d in explained
    ), [(d["check"], d["explanation"]) for d in explained]
    # offline, the same verdict: the local rows are what the service sent
    code, report = http_env.reconcile()
    unexplained = [d for d in report["differences"] if d["status"] == "differ"]
    assert code == 0 and report["verdict"] == "explained", unexplained
    assert not report["row_differences"]
    # live: the service's numbers now, still explained (the warehouse is behind, not wrong)
    code, report = http_env.reconcile("--live")
    assert code == 0 and report["verdict"] == "explained"
    # the next refresh re-reads the month and everything agrees
    meta = http_env.refresh()
    assert meta["verdict"] == "agree"
    http_env.assert_exact()


def test_reconciliation_runs_are_dagster_runs_with_check_results(http_env: HttpEnv) -> None:
    http_env.refresh()
    http_env.sql(
        "UPDATE core.transactions SET amount = amount + 1 WHERE id = "
        "(SELECT id FROM core.transactions WHERE type = 'expense' ORDER BY id LIMIT 1)"
    )
    code, report = http_env.reconcile()
    assert code == 1
    from dagster import DagsterInstance

    instance = DagsterInstance.get()
    runs = instance.get_runs()
    assert {r.job_name for r in runs} >= {"refresh_job", "reconcile_job"}
    refresh_run = next(r for r in runs if r.job_name == "refresh_job")
    checks = instance.get_records_for_run(refresh_run.run_id).records
    evaluations = [
        r.event_log_entry.dagster_event
        for r in checks
        if r.event_log_entry.dagster_event
        and r.event_log_entry.dagster_event.event_type_value == "ASSET_CHECK_EVALUATION"
    ]
    assert len(evaluations) >= len(MART_NAMES)
    con = duckdb.connect(str(http_env.warehouse), read_only=True)
    try:
        latest = pl.from_arrow(
            con.sql(
                "SELECT verdict, source FROM recon.runs ORDER BY ran_at DESC LIMIT 1"
            ).to_arrow_table()
        )
    finally:
        con.close()
    assert isinstance(latest, pl.DataFrame)
    assert latest.row(0) == ("differ", "offline")
    assert report["recon_id"].startswith("recon-")


def test_an_account_hidden_after_the_snapshot_is_explained_by_name(http_env: HttpEnv) -> None:
    http_env.refresh()
    state = http_env.sb.state()
    account = min(state["accounts"], key=lambda a: abs(a["balance"]) if a["balance"] else 10**15)

    def hide() -> None:
        http_env.admin("PATCH", f"/_sandbox/accounts/{account['id']}", {"hidden": True})

    with _EditsBetweenTheSnapshotAndTheSummary(
        http_env.base_url, http_env.sb.keys["read_only"], max_window_rows=10**12, edit=hide
    ) as client:
        summary = run_refresh(client, str(http_env.warehouse), RefreshOptions())
    assert summary.verdict == "explained", [
        (d["check"], d["scope"], d["status"], d["explanation"]) for d in summary.differences
    ]
    hidden = summary.checks["accounts.net_worth"]["first"]
    assert hidden and account["name"] in hidden[0]["explanation"], hidden
    meta = http_env.refresh()  # the account and its rows are gone from the next snapshot and ledger
    assert meta["verdict"] == "agree"
