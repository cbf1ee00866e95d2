"""The jobs that schedules, the sensor and the CLI start."""

import dagster as dg

from centsync.pipelines.defs.refresh import refresh_assets
from centsync.pipelines.defs.writeback import WRITEBACK_JOB, outbox

# The console logger of the runs the daemon starts (schedules, the bank-sync sensor): INFO and
# up reach the daemon's log, a refresh's one summary line and its warnings; Dagster's ~70 DEBUG
# events a run stay in the run's event log (`centsync ui`). The CLI sets its own (runner.py).
DAEMON_RUN_LOGGERS = {"console": {"config": {"log_level": "INFO"}}}

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.assets(outbox, refresh_assets),
    description="One warehouse refresh: the write-back outbox first, so posted rows come back in the same run.",
)
# No schedule or sensor starts it: `centsync writeback` (or the UI) does.
writeback_job = dg.define_asset_job(
    WRITEBACK_JOB,
    selection=dg.AssetSelection.assets(outbox),
    description="Post the inbox's and ops.outbox_requests' rows to the service, each exactly once.",
)
# By key, not by object: the bank_sync module imports refresh_job from here.
bank_sync_job = dg.define_asset_job(
    "bank_sync_job", selection=dg.AssetSelection.assets("bank_sync")
)
