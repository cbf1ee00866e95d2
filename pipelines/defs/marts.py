"""The marts and the reconciliation as assets downstream of what the refresh landed.

They are materialised by the refresh's own op (one publish: the marts and their proof land
with the data they describe), and their specs name their upstream endpoints, so the asset
graph runs from each API endpoint through the ledger and snapshots to `marts` and `recon`.
"""

from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg

from centsync.pipelines.defs import OWNERS
from centsync.pipelines.refresh.run import RefreshSummary


class Mart(NamedTuple):
    """A mart as an asset: what it is, what it is built from, the checks that prove it."""

    description: str
    upstream: tuple[str, ...]  # the endpoint assets it is built from
    checks: tuple[str, ...]  # the reconciliation checks that prove it


MARTS: dict[str, Mart] = {
    "spending_by_month_category": Mart(
        "Spending per month and category (every expense, refunds included).",
        ("transactions", "spending"),
        ("spending.month", "spending.category"),
    ),
    "spending_by_month_merchant": Mart(
        "Spending per month and merchant key.",
        ("transactions",),
        ("spending.month", "spending.merchant"),
    ),
    "cash_flow_by_month": Mart(
        "Income, spending, net and transfers per month.",
        ("transactions",),
        (
            "transactions.income",
            "transactions.expense",
            "transactions.transfer",
            "transactions.net",
        ),
    ),
    "transactions_by_month_type": Mart(
        "Every transaction per month and type.",
        ("transactions",),
        (
            "transactions.income",
            "transactions.expense",
            "transactions.transfer",
            "transactions.net",
        ),
    ),
    "balance_daily": Mart(
        "Each account's daily balance, rolled back from today's through its transactions.",
        ("transactions", "accounts", "net_worth"),
        ("accounts.assets", "accounts.liabilities", "accounts.net_worth", "accounts.by_type"),
    ),
    "net_worth_daily": Mart(
        "Assets, liabilities and net worth per day, from balance_daily.",
        ("transactions", "accounts", "net_worth"),
        ("net_worth.assets", "net_worth.liabilities", "net_worth.total"),
    ),
    "net_worth_snapshots": Mart(
        "Net worth as each refresh saw the accounts.",
        ("accounts",),
        ("net_worth.total",),
    ),
}
RECON_KEY = dg.AssetKey(["recon", "results"])
SERVER_AGGREGATES = ("transactions_summary", "accounts_summary", "net_worth", "spending")
CHECK_NAME = "reconciles_with_service"


def mart_key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["marts", name])


def specs() -> list[dg.AssetSpec]:
    """One spec per mart and one for the reconciliation, with their lineage."""
    out = [
        dg.AssetSpec(
            mart_key(name),
            group_name="marts",
            description=f"marts.{name}: {desc}",
            owners=OWNERS,
            kinds={"duckdb", "polars"},
            deps=list(upstream),
        )
        for name, (desc, upstream, _) in MARTS.items()
    ]
    out.append(
        dg.AssetSpec(
            RECON_KEY,
            group_name="recon",
            description="recon.runs, recon.results, recon.row_differences: every mart number the "
            "service also computes, compared to the cent.",
            owners=OWNERS,
            kinds={"duckdb", "polars"},
            deps=[mart_key(n) for n in MARTS] + list(SERVER_AGGREGATES),
        )
    )
    return out


def check_specs() -> list[dg.AssetCheckSpec]:
    """A blocking check per mart: its numbers agree with the service's, or are explained."""
    return [
        dg.AssetCheckSpec(
            CHECK_NAME,
            asset=mart_key(name),
            blocking=True,
            description="Every number of this mart the service also computes agrees to the cent "
            "(or the difference is explained).",
        )
        for name in MARTS
    ]


def materializations(
    summary: RefreshSummary, report: Path | None = None
) -> list[dg.MaterializeResult]:
    """What the run shows for each mart and for the reconciliation."""
    out: list[dg.MaterializeResult] = [
        dg.MaterializeResult(
            asset_key=mart_key(name),
            metadata={"rows": summary.marts.get(name, 0), "refresh_id": summary.refresh_id},
        )
        for name in MARTS
        if summary.marts
    ]
    if summary.verdict:
        out.append(
            dg.MaterializeResult(
                asset_key=RECON_KEY,
                metadata={
                    "verdict": summary.verdict,
                    "recon_id": summary.recon_id,
                    "recon_checked": summary.recon_checked,
                    "recon_explained": summary.recon_explained,
                    "recon_differ": summary.recon_differ,
                    "recon_seconds": round(summary.recon_seconds, 3),
                    "differences": dg.MetadataValue.json(summary.differences),
                    "differences_table": dg.MetadataValue.md(_table(summary.differences)),
                    **({"report_path": dg.MetadataValue.path(str(report))} if report else {}),
                },
            )
        )
    return out


def check_results(summary: RefreshSummary) -> list[dg.AssetCheckResult]:
    """Each mart's check, from the reconciliation checks that prove it."""
    out = []
    for name, (_, _, checks) in MARTS.items():
        parts = [summary.checks[c] for c in checks if c in summary.checks]
        differ = sum(p["differ"] for p in parts)
        first: list[dict[str, Any]] = [d for p in parts for d in p["first"]][:5]
        out.append(
            dg.AssetCheckResult(
                asset_key=mart_key(name),
                check_name=CHECK_NAME,
                passed=differ == 0,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={
                    "checked": sum(p["checked"] for p in parts),
                    "explained": sum(p["explained"] for p in parts),
                    "differ": differ,
                    "first_differences": dg.MetadataValue.md(_table(first)),
                },
                description=None
                if differ == 0
                else f"{differ} numbers differ from the service's: see recon.results",
            )
        )
    return out


def _table(differences: list[dict[str, Any]]) -> str:
    if not differences:
        return "no differences"
    lines = [
        "| status | check | scope | local | server | difference | why |",
        "| - | - | - | - | - | - | - |",
    ]
    for d in differences:
        lines.append(
            f"| {d['status']} | {d['check']} | {d['scope']} | {d['local_cents']} | {d['server_cents']} "
            f"| {d['difference_cents']} | {d.get('explanation') or ''} |"
        )
    return "\n".join(lines)
