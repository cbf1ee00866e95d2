"""Dagster definitions: the refresh as assets, checks, schedules, a sensor and resources.

No `from __future__ import annotations` here: it breaks Dagster's definition loading.
"""

import datetime as dt
import os
import sys
from collections.abc import Iterator
from typing import Any

import dagster as dg
from tqdm import tqdm

from centsync.extract import ApiClient, ProviderQuotaExhausted
from centsync.pipelines.refresh import (
    RefreshOptions,
    RefreshSummary,
    parse_month_range,
    run_refresh,
)
from centsync.warehouse import connect_readonly, default_path

OWNERS = ["team:centsync"]
PARTITIONS_START = os.environ.get("CENTSYNC_PARTITIONS_START", "2015-01-01")


class ApiResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The Personal Finance Data API: base URL and key (from the environment, never logged)."""

    base_url: str
    api_key: str
    concurrency: int = 2

    def client(self) -> ApiClient:
        # Windows are month-aligned by the refresh: the reader must not split them by date.
        return ApiClient(
            self.base_url, self.api_key, concurrency=self.concurrency, max_window_rows=10**12
        )


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """Where the DuckDB warehouse lives (CENTSYNC_WAREHOUSE, else data/centsync.duckdb)."""

    path: str = ""

    def resolved(self) -> str:
        return self.path or str(default_path())


class RefreshConfig(dg.Config):
    mode: str = "auto"  # auto (fingerprint-checked), full, hot (hot window only)
    months: str = ""  # "2024-01..2024-06": force-read these months
    hot_months: int = 2


# One spec per GET endpoint the refresh reads: each shows in the UI with what the run landed.
ENDPOINT_ASSETS: dict[str, tuple[str, str, str]] = {
    "me": (
        "identity",
        "GET /v1/me",
        "Key identity, scopes, allowance and expiry (checked every refresh).",
    ),
    "settings": (
        "snapshots",
        "GET /v1/settings",
        "core.settings: timezone and currency; a timezone change makes the refresh full.",
    ),
    "accounts": (
        "snapshots",
        "GET /v1/accounts",
        "core.accounts and history.accounts (one row per refresh).",
    ),
    "connections": (
        "snapshots",
        "GET /v1/connections",
        "core.connections and history.connections.",
    ),
    "sync_status": (
        "snapshots",
        "GET /v1/sync/status",
        "core.sync_status and history.sync_status.",
    ),
    "transactions": (
        "ledger",
        "GET /v1/transactions",
        "core.transactions and raw.transactions: exactly the server's ledger.",
    ),
    "transactions_summary": (
        "server_aggregates",
        "GET /v1/transactions/summary",
        "server.transactions_summary: per-year/month fingerprints and totals.",
    ),
    "accounts_summary": (
        "server_aggregates",
        "GET /v1/accounts/summary",
        "server.accounts_summary.",
    ),
    "net_worth": (
        "server_aggregates",
        "GET /v1/analytics/net-worth",
        "server.net_worth and history.net_worth.",
    ),
    "spending": (
        "server_aggregates",
        "GET /v1/analytics/spending",
        "server.spending by category, merchant and month.",
    ),
}


def _specs() -> list[dg.AssetSpec]:
    return [
        dg.AssetSpec(
            key,
            group_name=group,
            description=f"{desc} Source: {endpoint}.",
            owners=OWNERS,
            kinds={"duckdb", "python"},
            metadata={"endpoint": endpoint},
        )
        for key, (group, endpoint, desc) in ENDPOINT_ASSETS.items()
    ]


def _metadata(summary: RefreshSummary, key: str) -> dict[str, Any]:
    endpoint = ENDPOINT_ASSETS[key][1]
    md: dict[str, Any] = {
        "requests": summary.requests.get(endpoint, 0),
        "refresh_id": summary.refresh_id,
    }
    if key == "transactions":
        md.update(
            {
                "rows": summary.transactions,
                "rows_changed": summary.rows_changed,
                "rows_rejected": summary.rows_rejected,
                "mode": f"{summary.mode} ({summary.reason})",
                "months_checked": summary.months_checked,
                "months_reread": len(summary.months_reread),
                "requests_total": summary.requests_total,
                "requests_floor": summary.floor,
                "rereads": summary.rereads,
                "preview": dg.MetadataValue.md(_markdown(summary)),
            }
        )
    return md


def _markdown(summary: RefreshSummary) -> str:
    lines = ["| months | rows | changed | reason |", "| - | - | - | - |"]
    for r in summary.months_reread[:50]:
        lines.append(f"| {r['from']}..{r['to']} | {r['rows']} | {r['changed']} | {r['reason']} |")
    lines.append("")
    lines.append("| endpoint | requests |")
    lines.append("| - | - |")
    for k, v in sorted(summary.requests.items()):
        lines.append(f"| {k} | {v} |")
    return "\n".join(lines)


def _run(
    context: dg.AssetExecutionContext,
    api: ApiResource,
    warehouse: WarehouseResource,
    options: RefreshOptions,
) -> Iterator[dg.MaterializeResult]:
    show = sys.stderr.isatty() or bool(os.environ.get("CENTSYNC_PROGRESS"))
    with (
        tqdm(desc="transactions", unit=" rows", disable=not show, file=sys.stderr) as bar,
        api.client() as client,
    ):

        def progress(months: str, rows: int) -> None:
            # rows as batches land (negative when a window is read again); months as each commits
            bar.update(rows)
            if months:
                bar.set_postfix_str(f"months {months}")

        options.progress = progress
        summary = run_refresh(client, warehouse.resolved(), options)
    for w in summary.warnings:
        context.log.warning(w)
    context.log.info(
        f"refresh {summary.refresh_id}: {summary.mode} ({summary.reason}); {summary.transactions} transactions, "
        f"{summary.rows_changed} rows changed, {summary.requests_total} requests (floor {summary.floor})"
    )
    for key in ENDPOINT_ASSETS:
        yield dg.MaterializeResult(asset_key=key, metadata=_metadata(summary, key))


@dg.multi_asset(specs=_specs(), name="refresh", can_subset=False)
def refresh_assets(
    context: dg.AssetExecutionContext,
    config: RefreshConfig,
    api: ApiResource,
    warehouse: WarehouseResource,
) -> Iterator[dg.MaterializeResult]:
    """One refresh: snapshots, reconcile-then-repair of the ledger, the server's aggregates."""
    months = parse_month_range(config.months) if config.months else None
    mode = config.mode if config.mode in ("auto", "full", "hot") else "auto"
    yield from _run(
        context,
        api,
        warehouse,
        RefreshOptions(mode=mode, months=months, hot_months=config.hot_months),
    )  # type: ignore[arg-type]


monthly = dg.MonthlyPartitionsDefinition(start_date=PARTITIONS_START, end_offset=1)


@dg.asset(
    partitions_def=monthly,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="ledger",
    owners=OWNERS,
    kinds={"duckdb", "python"},
    description="Force-read a range of months of GET /v1/transactions (a backfill covers many in one run).",
)
def transactions_by_month(
    context: dg.AssetExecutionContext, api: ApiResource, warehouse: WarehouseResource
) -> dg.MaterializeResult:
    keys = context.partition_key_range
    first, last = keys.start[:7], keys.end[:7]
    with api.client() as client:
        summary = run_refresh(client, warehouse.resolved(), RefreshOptions(months=(first, last)))
    return dg.MaterializeResult(
        metadata={
            "months": f"{first}..{last}",
            "rows": sum(r["rows"] for r in summary.months_reread),
            "rows_changed": summary.rows_changed,
            "requests_total": summary.requests_total,
        }
    )


class BankSyncConfig(dg.Config):
    max_age_hours: float = 24.0


@dg.asset(
    group_name="sync",
    owners=OWNERS,
    kinds={"python"},
    description="Ask the providers for new bank data (POST /v1/sync) when the last sync is older than max_age_hours; a spent provider quota is recorded, never retried.",
)
def bank_sync(
    context: dg.AssetExecutionContext, config: BankSyncConfig, api: ApiResource
) -> dg.MaterializeResult:
    with api.client() as client:
        status = client.sync_status(raw=False)
        now = dt.datetime.now(dt.UTC)
        stale: list[str] = []
        for row in status.iter_rows(named=True):
            last = row.get("last_synced_at")
            if last is None or (now - last).total_seconds() > config.max_age_hours * 3600:
                stale.append(row["provider"])
        requested, exhausted = [], []
        for provider in sorted(set(stale)):
            try:
                client.trigger_sync(provider)
                requested.append(provider)
            except ProviderQuotaExhausted as e:
                context.log.warning(
                    f"provider {provider}: quota spent, not retried this run ({e.code})"
                )
                exhausted.append(provider)
    return dg.MaterializeResult(
        metadata={
            "requested": ", ".join(requested) or "none",
            "quota_exhausted": ", ".join(exhausted) or "none",
        }
    )


@dg.asset_check(
    asset="transactions",
    blocking=True,
    description="No landed row was rejected by validation in the latest refresh.",
)
def no_rejected_rows(warehouse: WarehouseResource) -> dg.AssetCheckResult:
    con = connect_readonly(warehouse.resolved())
    try:
        row = con.execute(
            """
            SELECT count(*), any_value(reason) FROM raw.rejected_rows
            WHERE refresh_id = (SELECT refresh_id FROM ops.refreshes WHERE status = 'succeeded' ORDER BY started_at DESC LIMIT 1)
            """
        ).fetchone()
    finally:
        con.close()
    n, reason = row or (0, None)
    return dg.AssetCheckResult(
        passed=n == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"rejected_rows": int(n), "example_reason": str(reason or "")},
        description=None if n == 0 else f"{n} rows were rejected: see raw.rejected_rows",
    )


refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.assets(refresh_assets),
    description="One warehouse refresh.",
)
bank_sync_job = dg.define_asset_job("bank_sync_job", selection=dg.AssetSelection.assets(bank_sync))


def _schedule(name: str, cron: str, mode: str, description: str) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=name,
        cron_schedule=cron,
        job=refresh_job,
        run_config={"ops": {"refresh": {"config": {"mode": mode}}}},
        description=description,
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )


schedules = [
    _schedule(
        "hourly_hot_window",
        "5 * * * *",
        "hot",
        "Every hour: re-read the hot window (current and previous month).",
    ),
    _schedule(
        "nightly_fingerprints",
        "30 2 * * *",
        "auto",
        "Every night: fingerprint-checked refresh of the whole history.",
    ),
    _schedule("weekly_full", "0 4 * * 0", "full", "Every Sunday: a full re-read."),
]


@dg.sensor(
    job=refresh_job,
    minimum_interval_seconds=300,
    description="Start a refresh once a connection finished a bank sync (GET /v1/sync/status).",
)
def bank_sync_finished(
    context: dg.SensorEvaluationContext, api: ApiResource
) -> Iterator[dg.RunRequest]:
    with api.client() as client:
        status = client.sync_status(raw=False)
    latest = max(
        (
            r["last_synced_at"]
            for r in status.iter_rows(named=True)
            if r["last_synced_at"] is not None
        ),
        default=None,
    )
    if latest is None:
        return
    stamp = latest.isoformat()
    if context.cursor is None or stamp > context.cursor:
        if context.cursor is not None:  # the first evaluation only records where we are
            yield dg.RunRequest(
                run_key=f"bank-sync-{stamp}",
                run_config={"ops": {"refresh": {"config": {"mode": "hot"}}}},
            )
        context.update_cursor(stamp)


def build_definitions() -> dg.Definitions:
    return dg.Definitions(
        assets=[refresh_assets, transactions_by_month, bank_sync],
        asset_checks=[no_rejected_rows],
        jobs=[refresh_job, bank_sync_job],
        schedules=schedules,
        sensors=[bank_sync_finished],
        resources={
            "api": ApiResource(
                base_url=dg.EnvVar("CENTSYNC_API_BASE_URL"), api_key=dg.EnvVar("CENTSYNC_API_KEY")
            ),
            "warehouse": WarehouseResource(),  # CENTSYNC_WAREHOUSE is read when the run starts
        },
        executor=dg.in_process_executor,
    )


defs = build_definitions()
