"""`centsync reconcile` as Dagster runs: rebuild the marts, compare them with the service.

Offline (the aggregates the latest refresh landed, no request) or live (fetched now). The
marts and `recon/results` are materialised by the refresh's op; these jobs record their new
versions as materialisation events of the same assets, so the UI shows one history.
"""

import dagster as dg

from centsync.extract import ApiClient
from centsync.pipelines.clients import api_client
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.defs.marts import MARTS, RECON_KEY, mart_key
from centsync.pipelines.reconcile import Outcome, reconcile
from centsync.pipelines.results import RESULT_KEY
from centsync.pipelines.settings import Settings
from centsync.warehouse import Warehouse


def _reconcile(
    context: dg.OpExecutionContext, settings: Settings, client: ApiClient | None
) -> None:
    with Warehouse.publishing(settings.warehouse) as wh:
        wh.refresh_settings(memory=settings.duckdb_memory)  # as a refresh: it spills
        outcome = reconcile(wh.con, source="live" if client else "offline", client=client)
    _record(context, outcome)


def _record(context: dg.OpExecutionContext, outcome: Outcome) -> None:
    counts = outcome.counts()
    for name in MARTS:
        context.log_event(
            dg.AssetMaterialization(
                mart_key(name),
                metadata={"rows": outcome.marts.get(name, 0), "recon_id": outcome.recon_id},
            )
        )
    context.log_event(
        dg.AssetMaterialization(
            RECON_KEY,
            metadata={
                "verdict": outcome.verdict,
                "recon_id": outcome.recon_id,
                "refresh_id": outcome.refresh_id,
                "source": outcome.source,
                "recon_checked": outcome.results.height,
                "recon_explained": counts["explained"],
                "recon_differ": counts["differ"],
                # what `centsync reconcile` prints: the typed result, one entry
                RESULT_KEY: dg.MetadataValue.json(outcome.result().to_json()),
            },
        )
    )
    context.log.info(
        f"reconciliation {outcome.recon_id} ({outcome.source}): {outcome.verdict}, "
        f"{outcome.results.height} checks, {counts['explained']} explained, {counts['differ']} differ"
    )


@dg.op(name="reconcile_offline")
def reconcile_offline(context: dg.OpExecutionContext, settings: dg.ResourceParam[Settings]) -> None:
    """Against the aggregates the latest refresh landed: no request to the service."""
    with known_failures():
        _reconcile(context, settings, None)


@dg.op(name="reconcile_live")
def reconcile_live(context: dg.OpExecutionContext, settings: dg.ResourceParam[Settings]) -> None:
    """Against the service's aggregates fetched now (about 6 requests)."""
    with known_failures(), api_client(settings) as client:
        _reconcile(context, settings, client)


@dg.job(description="Rebuild the marts and reconcile them with the latest refresh's aggregates.")
def reconcile_job() -> None:
    reconcile_offline()


@dg.job(description="Rebuild the marts and reconcile them with the service's aggregates, now.")
def reconcile_live_job() -> None:
    reconcile_live()
