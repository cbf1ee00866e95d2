"""Asset checks on what a refresh landed."""

import dagster as dg

from centsync.pipelines.settings import Settings
from centsync.warehouse import connect_readonly


@dg.asset_check(
    asset="transactions",
    blocking=True,
    description="No landed row was rejected by validation in the latest refresh.",
)
def no_rejected_rows(settings: dg.ResourceParam[Settings]) -> dg.AssetCheckResult:
    con = connect_readonly(settings.warehouse)
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
