"""The Dagster code location: what `centsync.pipelines.defs` defines, run in process.

Found with no flags from the project root (`[tool.dg.project]` in pyproject.toml names this
module), by `dagster dev`, `dagster asset list` and `dg list defs`. In process: DuckDB has one
writer, and the in-process executor starts runs about 3x faster than the multiprocess one.
Listed by hand rather than scanned: Dagster's package scanner is a preview API, and the folder
loader needs a pyproject.toml, which an installed wheel does not have.

`build(settings)` is the factory: the CLI builds the definitions with its own `Settings` (the
embedded sandbox's URL and key reach its runs as a resource instance, never through the
environment or the run config). `defs` is what Dagster's tools load: read from the environment
when the code location loads (the partitions' start from the ledger, the schedules' cron
lines), and again when each run starts.
"""

import dagster as dg

from centsync.pipelines.defs import (
    alerts,
    bank_sync,
    jobs,
    partitions,
    reconcile,
    refresh,
    schedules,
    writeback,
)
from centsync.pipelines.defs.resources import resources
from centsync.pipelines.kept import private_umask
from centsync.pipelines.settings import Settings

# loaded by `dagster dev` or the daemon without the CLI: what runs create is private too
private_umask()


def build(settings: Settings | None = None) -> dg.Definitions:
    """Every asset, job, schedule and sensor; runs get `settings`, else read the environment."""
    config = settings or Settings.from_env()
    # the ledger's first month (or the setting's) and the service's time zone: read once, in
    # one open of the warehouse, when the code location loads
    first, zone = partitions.ledger_facts(config.warehouse)
    start = partitions.partitions_start(config, first)
    return dg.Definitions(
        assets=[
            writeback.outbox,
            refresh.refresh_assets,
            refresh.transactions_by_month(start),
            bank_sync.bank_sync,
        ],
        jobs=[
            jobs.refresh_job,
            jobs.bank_sync_job,
            jobs.writeback_job,
            reconcile.reconcile_job,
            reconcile.reconcile_live_job,
        ],
        schedules=schedules.schedules(config, zone or "UTC"),
        sensors=[bank_sync.bank_sync_finished, alerts.alert_on_findings, alerts.alert_on_failure],
        resources=resources(settings),
        executor=dg.in_process_executor,
    )


@dg.definitions
def defs() -> dg.Definitions:
    """The code location Dagster's tools load (`dagster dev`, `dg list defs`, the daemon)."""
    return build()
