"""The Dagster code location: what `centsync.pipelines.defs` defines, run in process.

Found with no flags from the project root (`[tool.dg.project]` in pyproject.toml names this
module), by `dagster dev`, `dagster asset list` and `dg list defs`. In process: DuckDB has one
writer, and the in-process executor starts runs about 3x faster than the multiprocess one.
Listed by hand rather than scanned: Dagster's package scanner is a preview API, and the folder
loader needs a pyproject.toml, which an installed wheel does not have.
"""

import dagster as dg

from centsync.pipelines.defs import (
    bank_sync,
    checks,
    jobs,
    reconcile,
    refresh,
    schedules,
    writeback,
)
from centsync.pipelines.defs.resources import resources

defs = dg.Definitions(
    assets=[
        writeback.outbox,
        refresh.refresh_assets,
        refresh.transactions_by_month,
        bank_sync.bank_sync,
    ],
    asset_checks=[checks.no_rejected_rows],
    jobs=[
        jobs.refresh_job,
        jobs.bank_sync_job,
        jobs.writeback_job,
        reconcile.reconcile_job,
        reconcile.reconcile_live_job,
    ],
    schedules=schedules.schedules,
    sensors=[bank_sync.bank_sync_finished],
    resources=resources(),
    executor=dg.in_process_executor,
)
