"""The analysts' own marts through a real refresh (in process: httpx.ASGITransport) of the
sandbox's noisy household, whose truth is known (sandbox/household_truth.py): the marts are
filled, match the truth, keep the reconciliation as it was, and take the rules' renames."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import httpx
import pytest

from centsync.extract import ApiClient
from centsync.pipelines.outputs import report
from centsync.pipelines.reconcile import reconcile
from centsync.pipelines.refresh.run import run_refresh
from centsync.pipelines.refresh.summary import RefreshOptions
from centsync.pipelines.writeback.rules import apply_rules
from centsync.sandbox.household_truth import pair_score, series_score
from centsync.warehouse.migrate import migrate
from helpers import make_sandbox

pytestmark = pytest.mark.e2e

BASE = "http://sandbox.test"


def _rows(warehouse: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return con.execute(sql).fetchall()


def test_a_refresh_builds_the_analyst_marts_on_the_truth(tmp_path: Path) -> None:
    sb = make_sandbox(noise=True)
    warehouse = tmp_path / "centsync.duckdb"
    transport = httpx.ASGITransport(app=sb.app)
    with ApiClient(BASE, sb.keys["read_only"], transport=transport) as client:
        summary = run_refresh(client, warehouse, RefreshOptions(source="sandbox"))
    assert summary.verdict == "agree"  # the service's marts and their proof are untouched
    truth = sb.service.truth
    members = _rows(
        warehouse, "SELECT transaction_id::VARCHAR, series_id FROM marts.recurring_transactions"
    )
    pairs = _rows(
        warehouse,
        "SELECT out_transaction_id::VARCHAR, in_transaction_id::VARCHAR FROM marts.transfer_pairs",
    )
    s, p = series_score(truth, members), pair_score(truth, pairs)
    assert s.precision >= 0.96 and s.recall >= 0.95, s
    assert p.precision >= 0.99 and p.recall >= 0.97, p
    # our spending view: the service's spending less the card payments typed as an expense
    card = {out for out, _ in truth.card_as_expense}
    assert card
    ((service, ours, moved),) = _rows(
        warehouse,
        f"""
        SELECT (SELECT sum(amount_cents) FROM marts.spending_by_month_category),
               (SELECT sum(amount_cents) FROM marts.spending_without_transfers),
               (SELECT sum(amount) FROM core.transactions
                WHERE id::VARCHAR IN ({", ".join(repr(i) for i in sorted(card))}))
        """,
    )
    assert ours == service - moved
    ((goals,),) = _rows(warehouse, "SELECT count(*) FROM marts.expense_goals_by_month")
    assert goals > 0
    # every new mart and its every column is documented (the data dictionary reads these)
    undocumented = _rows(
        warehouse,
        """
        SELECT table_name, column_name FROM duckdb_columns()
        WHERE schema_name = 'marts' AND comment IS NULL AND table_name IN (
            'merchant_names', 'recurring_series', 'recurring_transactions', 'transfer_pairs',
            'unpaired_transfers', 'expense_goals_by_month', 'spending_without_transfers')
        """,
    )
    assert undocumented == []
    # the report's section for them, merchants by display name
    page = report.write(warehouse).read_text("utf-8")
    section = page.split('id="recurring-section"', 1)[1].split("</section>", 1)[0]
    assert "Recurring series" in section and "Netflix" in section and "monthly" in section
    assert "card_payment_typed_as_expense" in section.split("Transfer legs without a pair")[1]


def test_the_rules_files_merchants_rename_what_a_person_reads(tmp_path: Path) -> None:
    sb = make_sandbox()
    warehouse = tmp_path / "centsync.duckdb"
    with ApiClient(BASE, sb.keys["read_only"], transport=httpx.ASGITransport(app=sb.app)) as c:
        run_refresh(c, warehouse, RefreshOptions(source="sandbox"))
    rules = tmp_path / "rules.toml"
    rules.write_text('[merchants]\n"AMZN Mktp ES" = "Amazon Marketplace"\n', "utf-8")
    now = dt.datetime.now(dt.UTC)
    dry = apply_rules(warehouse, rules, now, dry_run=True)
    assert (
        dry.merchant_renames == 1
        and not warehouse.with_name("centsync.merchant-names.json").exists()
    )
    run = apply_rules(warehouse, rules, now, dry_run=False)
    assert run.merchant_renames == 1 and run.queued == 0
    with duckdb.connect(str(warehouse)) as con:  # the offline reconcile rebuilds the marts
        migrate(con)
        reconcile(con, source="offline")
    names = dict(_rows(warehouse, "SELECT merchant, merchant_name FROM marts.merchant_names"))
    assert names["amzn mktp es"] == "Amazon Marketplace"
    assert names["amazon.es"] == "Amazon" and names["mercadona 0412 valencia"] == "Mercadona"
