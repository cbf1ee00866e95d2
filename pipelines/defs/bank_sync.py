"""Bank syncs: ask the providers for new data, and refresh once a connection has synced."""

import datetime as dt
from collections.abc import Iterator

import dagster as dg

from centsync.extract import ProviderQuotaExhausted
from centsync.pipelines.clients import api_client
from centsync.pipelines.defs import OWNERS
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.defs.jobs import refresh_job
from centsync.pipelines.settings import Settings


class BankSyncConfig(dg.Config):
    max_age_hours: float = 24.0


@dg.asset(
    group_name="sync",
    owners=OWNERS,
    kinds={"python"},
    description="Ask the providers for new bank data (POST /v1/sync) when the last sync is older than max_age_hours; a spent provider quota is recorded, never retried.",
)
def bank_sync(
    context: dg.AssetExecutionContext, config: BankSyncConfig, settings: dg.ResourceParam[Settings]
) -> dg.MaterializeResult:
    with known_failures(), api_client(settings) as client:
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


@dg.sensor(
    job=refresh_job,
    minimum_interval_seconds=300,
    description="Start a refresh once a connection finished a bank sync (GET /v1/sync/status).",
)
def bank_sync_finished(
    context: dg.SensorEvaluationContext, settings: dg.ResourceParam[Settings]
) -> Iterator[dg.RunRequest]:
    with api_client(settings) as client:
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
