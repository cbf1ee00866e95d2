"""The jobs that schedules, the sensor and the CLI start."""

import dagster as dg

from centsync.pipelines.defs.refresh import refresh_assets

refresh_job = dg.define_asset_job(
    "refresh_job",
    selection=dg.AssetSelection.assets(refresh_assets),
    description="One warehouse refresh.",
)
# By key, not by object: the bank_sync module imports refresh_job from here.
bank_sync_job = dg.define_asset_job(
    "bank_sync_job", selection=dg.AssetSelection.assets("bank_sync")
)
