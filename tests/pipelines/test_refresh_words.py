"""What a refresh says by default, through the real CLI on the embedded sandbox: one line a
person wants (first sync, nothing new, a day's changes), counted in transactions, with the one
duration `status` shows too; the planner's reasoning only behind `--verbose`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from centsync.pipelines import failures as errors
from centsync.sandbox import SandboxConfig
from centsync.sandbox.state import load

from .conftest import HttpEnv, cli_out

pytestmark = pytest.mark.e2e

NUMBERS = r"All (\d+) numbers match the app\."
FIRST = re.compile(rf"First sync: ([\d,]+) transactions in ([\d.]+) s\. {NUMBERS}\n")
NOTHING = re.compile(
    rf"Up to date: no changes in ([\d.]+) s \(([\d,]+) transactions\)\. {NUMBERS}\n"
)
CHANGES = re.compile(
    rf"Up to date: ([\d,]+) changes? \(([^)]*)\) in ([\d.]+) s \(([\d,]+) transactions\)\. "
    rf"{NUMBERS}\n"
)


def _status() -> dict:
    code, out = cli_out("status", "--json")
    assert code == 0, out
    return json.loads(out)


def _ids(warehouse: Path) -> set[str]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {str(r[0]) for r in con.execute("SELECT id FROM core.transactions").fetchall()}
    finally:
        con.close()


def _same_figures(line: re.Match[str], seconds: str, transactions: str, status: dict) -> None:
    """The line's figures are the warehouse's: its transactions, the duration `status` shows,
    the numbers the reconciliation proved."""
    assert int(transactions.replace(",", "")) == status["tables"]["core.transactions"]
    assert float(seconds) == pytest.approx(status["last_refresh"]["seconds"], abs=0.006)
    assert int(line.group(line.re.groups)) == status["reconciliation"]["checked"] > 100


def test_the_refresh_leads_with_one_line_a_person_wants(embedded: Path) -> None:
    # the first sync: one line, nothing of the planner's
    code, out = cli_out("refresh")
    assert code == 0, out
    first = FIRST.fullmatch(out)
    assert first, out
    _same_figures(first, first.group(2), first.group(1), _status())

    # nothing new on the service: no changes, said so
    code, out = cli_out("refresh")
    nothing = NOTHING.fullmatch(out)
    assert code == 0 and nothing, out
    _same_figures(nothing, nothing.group(1), nothing.group(2), _status())

    # two days pass: the changes are transactions, counted as transactions
    warehouse = embedded / "w.duckdb"
    before = _ids(warehouse)
    assert cli_out("sandbox", "advance", "--days", "3")[0] == 0
    service = load(embedded / "w.sandbox", SandboxConfig(seed=1))
    assert service is not None
    now = {t.id for t in service.ledger.rows}
    code, out = cli_out("refresh")
    changes = CHANGES.fullmatch(out)
    assert code == 0 and changes, out
    _same_figures(changes, changes.group(3), changes.group(4), _status())
    parts = dict(
        (what, int(n.replace(",", "")))
        for n, what in (p.split(" ") for p in changes.group(2).split(", "))
    )
    assert parts.get("new", 0) == len(now - before) > 0
    assert parts.get("removed", 0) == len(before - now)
    assert int(changes.group(1)) == sum(parts.values())
    assert int(changes.group(4).replace(",", "")) == len(now)
    # `status` counts the same transactions, and the same duration
    code, out = cli_out("status")
    counted = ", ".join(f"{parts.get(k, 0):,} {k}" for k in ("new", "updated", "removed"))
    assert code == 0 and f"({changes.group(3)} s, " in out and f"{counted} transactions)" in out


def test_verbose_shows_the_plan_and_json_keeps_its_keys(embedded: Path) -> None:
    code, out = cli_out("refresh", "--verbose")
    assert code == 0, out
    head, *details = out.splitlines()
    assert FIRST.fullmatch(head + "\n"), head
    said = "\n".join(details)
    for line in ("Plan: full: first sync.", "Rows: ", "Requests: ", "Time: ", "Dagster run: "):
        assert line in said, said
    assert "Reconciliation: AGREE" in said
    code, out = cli_out("refresh", "--json")
    result = json.loads(out)
    # the keys of before, and the new ones beside them
    assert {"total", "changed", "rejected", "landed", "new", "updated", "removed"} <= set(
        result["rows"]
    )
    assert {"refresh_seconds", "reconcile_seconds", "total_seconds", "seconds"} <= set(
        result["durations"]
    )
    assert result["durations"]["seconds"] == pytest.approx(
        _status()["last_refresh"]["seconds"], abs=0.006
    )


def test_rows_the_service_damages_are_said_after_the_line_with_the_explained_verdict(
    http_env: HttpEnv,
) -> None:
    old = [t for t in http_env.sb.state()["transactions"] if t["booked_at"] < "2025-06-01"]
    http_env.admin("PUT", "/_sandbox/faults", {"corrupt": {old[0]["id"]: "unknown_type"}})
    code, out = http_env.cli("refresh")
    assert code == errors.REJECTED, out
    head, *rest = out.splitlines()
    explained = re.fullmatch(
        r"First sync: ([\d,]+) transactions in [\d.]+ s\. All (\d+) numbers match the app, or "
        r"differ for a known reason \((\d+) explained, below\)\.",
        head,
    )
    assert explained, head
    assert int(explained.group(1).replace(",", "")) == len(http_env.sb.state()["transactions"]) - 1
    said = "\n".join(rest)
    assert said.startswith("Rejected: 1 row(s) the service sent broke"), said
    # the verdict and its differences follow, as before
    assert "Reconciliation: EXPLAINED" in said and "explained" in said


def test_the_month_still_running_is_partial_in_the_marts_and_the_report(embedded: Path) -> None:
    code, out = cli_out("refresh", "--report")
    assert code == 0, out
    con = duckdb.connect(str(embedded / "w.duckdb"), read_only=True)
    try:
        (today,) = con.execute("SELECT max(date) FROM marts.net_worth_daily").fetchone() or ()
        current = today.replace(day=1)
        for mart in (
            "cash_flow_by_month",
            "spending_by_month_category",
            "spending_by_month_merchant",
            "transactions_by_month_type",
            "spending_by_month",
        ):
            running = con.execute(
                f"SELECT DISTINCT month FROM marts.{mart} WHERE partial"
            ).fetchall()
            finished = con.execute(
                f"SELECT count(*) FROM marts.{mart} WHERE NOT partial AND month >= ?", [current]
            ).fetchone()
            assert running == [(current,)] and finished == (0,), mart
        (comment,) = (
            con.execute(
                "SELECT comment FROM duckdb_columns() WHERE table_name = 'cash_flow_by_month' "
                "AND column_name = 'partial'"
            ).fetchone()
            or ()
        )
        assert "still running" in comment
    finally:
        con.close()
    page = (embedded / "centsync-report.html").read_text()
    assert f'id="partial-note">{current:%Y-%m} is still running' in page
    assert page.count('class="muted partial"') == 1  # the months table marks that month alone
