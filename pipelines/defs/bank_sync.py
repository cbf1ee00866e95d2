"""Bank syncs: ask the providers for new data, and refresh once a connection has synced."""

import datetime as dt
from collections.abc import Iterator
from contextlib import suppress

import dagster as dg
import polars as pl

from centsync.extract import ApiClient, ProviderQuotaExhausted, SurfaceUnavailable
from centsync.pipelines.clients import api_client
from centsync.pipelines.contract_book import NOT_HERE, read_as_learned
from centsync.pipelines.defs import OWNERS
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.defs.jobs import DAEMON_RUN_LOGGERS, refresh_job
from centsync.pipelines.settings import Settings
from centsync.transform.shapes import SYNC_STATUS


class BankSyncConfig(dg.Config):
    max_age_hours: float = 24.0


def _sync_status(client: ApiClient, settings: Settings) -> pl.DataFrame:
    """`GET /v1/sync/status` (its shape "not shown") read through the contract the refreshes
    learned; where none has yet, the connections are read first (one request), the facts a
    sync status record is learned from (its provider is its connection's)."""
    book = read_as_learned(client, settings.warehouse)
    if not book.trusted(SYNC_STATUS):
        with suppress(SurfaceUnavailable, *NOT_HERE):
            client.connections()
    return client.sync_status(raw=False)


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
        try:
            status = _sync_status(client, settings)
        except (SurfaceUnavailable, *NOT_HERE) as e:
            # its shape is not shown in the API document: without it, nothing says a sync is due
            context.log.warning(f"GET /v1/sync/status could not be read ({e}): no sync asked")
            return dg.MaterializeResult(metadata={"requested": "none", "unreadable": str(e)})
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
) -> Iterator[dg.RunRequest | dg.SkipReason]:
    with api_client(settings) as client:
        try:
            status = _sync_status(client, settings)
        except (SurfaceUnavailable, *NOT_HERE) as e:
            yield dg.SkipReason(f"GET /v1/sync/status could not be read ({e})")
            return
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
                run_config={
                    "ops": {"refresh": {"config": {"mode": "hot"}}},
                    "loggers": DAEMON_RUN_LOGGERS,
                },
            )
        context.update_cursor(stamp)
