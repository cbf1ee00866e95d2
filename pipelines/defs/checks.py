"""Asset checks on what a refresh landed."""

import dagster as dg

from centsync.pipelines.settings import Settings
from centsync.warehouse import reading, reads


@dg.asset_check(
    asset="transactions",
    blocking=True,
    description="No landed row was rejected by validation in the latest refresh.",
)
def no_rejected_rows(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    with reading(settings.warehouse) as con:
        n, reason = reads.rejected_in_latest_refresh(con)
    return dg.AssetCheckResult(
        passed=n == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"rejected_rows": int(n), "example_reason": str(reason or "")},
        description=None if n == 0 else f"{n} rows were rejected: see raw.rejected_rows",
    )
