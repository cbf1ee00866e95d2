"""Write-back as an asset: the outbox, drained by its own job and first in every refresh."""

from pathlib import Path

import dagster as dg

from centsync.pipelines.clients import api_client
from centsync.pipelines.defs import OWNERS
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.defs.refresh import interrupts_as_keyboard
from centsync.pipelines.results import RESULT_KEY
from centsync.pipelines.settings import Settings
from centsync.pipelines.writeback import run as writeback
from centsync.pipelines.writeback.summary import line
from centsync.warehouse.outbox import OutboxBusyError

WRITEBACK_JOB = "writeback_job"


@dg.asset(
    name="outbox",
    group_name="writeback",
    owners=OWNERS,
    kinds={"duckdb", "python"},
    description=(
        "Manual transactions, edits and Expense assignments from the inbox folder and "
        "ops.outbox_requests, each written to the outbox with its derived idempotency key "
        "before it is sent (POST /v1/transactions, PATCH /v1/transactions/{id}, "
        "POST /v1/transactions/{id}/expense)."
    ),
)
def outbox(
    context: dg.AssetExecutionContext, settings: dg.ResourceParam[Settings]
) -> dg.MaterializeResult:
    # The write-back job fails when it cannot write (a read-only key, the service gone); as the
    # first step of a refresh the same is a warning, and the refresh goes on.
    strict = context.run.job_name == WRITEBACK_JOB
    options = writeback.WritebackOptions(
        strict=strict, inbox=settings.inbox, allow_future=settings.allow_future
    )
    with known_failures():
        try:
            with api_client(settings) as client, interrupts_as_keyboard():
                summary = writeback.run_writeback(client, Path(settings.warehouse), options)
        except OutboxBusyError as e:
            if strict:
                raise
            context.log.warning(f"write-back skipped: {e}")
            return dg.MaterializeResult(metadata={"skipped": str(e)})
    for w in summary.warnings:
        context.log.warning(w)
    # a refresh's step that had nothing to send stays out of a scheduled run's one INFO line
    (context.log.info if strict or summary.plan else context.log.debug)(line(summary))
    return dg.MaterializeResult(
        metadata={
            "sent": summary.sent,
            "rejected": summary.rejected + summary.rejected_by_service,
            "needs_attention": summary.needs_attention + summary.conflicts,
            "pending": summary.counts.get("pending", 0),
            "outbox": summary.outbox,
            # what `centsync writeback` prints: the typed result, one entry
            RESULT_KEY: dg.MetadataValue.json(summary.to_json()),
        }
    )
