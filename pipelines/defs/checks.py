"""The asset check on what a refresh landed, evaluated in the refresh's own step."""

from pathlib import Path

import dagster as dg

from centsync.warehouse import reading, reads

NAME = "no_rejected_rows"

# Blocking, on `transactions`: one of the refresh multi-asset's check specs (defs/refresh.py).
# It was a step of its own: its start, its events and its open of the warehouse were about
# 45 ms of a household's no-change refresh (docs/benchmarks.md); it reads the same.
SPEC = dg.AssetCheckSpec(
    NAME,
    asset="transactions",
    blocking=True,
    description="No landed row was rejected by validation in the latest refresh.",
)


def no_rejected_rows(warehouse: Path) -> dg.AssetCheckResult:
    """The check's result, read from the published warehouse as any reader would see it."""
    with reading(warehouse) as con:
        n, reason = reads.rejected_in_latest_refresh(con)
    return dg.AssetCheckResult(
        asset_key=SPEC.asset_key,
        check_name=SPEC.name,
        passed=n == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={"rejected_rows": int(n), "example_reason": str(reason or "")},
        description=None if n == 0 else f"{n} rows were rejected: see raw.rejected_rows",
    )
