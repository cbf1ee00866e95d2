"""Every owner of the owners file refreshed by the fleet's one engine (`centsync refresh --all`),
and one owner's publish into the lake after its own refresh (`centsync --owner NAME refresh`).

`refresh_all` cuts the owners into the batches a Dagster shard run takes (`shard.batches`: up
to 25 owners who share a lake shard) and runs each with `shard.refresh_shard`, exactly as the
shard runs do: the owners of a batch refreshed a few at a time in this process, then published
into the lake in one commit per changed table.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from centsync.pipelines.fleet.shard import HowToRefresh, batches, refresh_shard
from centsync.pipelines.results import FleetResult, OwnerResult

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings


def fleet_result(results: list[OwnerResult], seconds: float) -> FleetResult:
    """Every owner's result by name (in the owners file's order), the owners that agree, those
    that failed (an exit code other than 0, 1 differ and 7 rejected), the highest exit code."""
    from centsync.pipelines import failures

    landed = (failures.OK, failures.DIFFER, failures.REJECTED)
    return FleetResult(
        owners={r.owner: r for r in results},
        agree=sum(1 for r in results if r.verdict == "agree"),
        failed=sum(1 for r in results if r.exit_code not in landed),
        seconds=seconds,
        exit_code=max((r.exit_code for r in results), default=failures.OK),
    )


def refresh_all(
    base: Settings, concurrency: int = 4, how: HowToRefresh | None = None
) -> FleetResult:
    """Refresh every owner of `base`'s owners file, a batch (a lake shard's owners) at a time,
    `concurrency` owners at once; a failed owner is its result, never the others'."""
    from centsync.pipelines import owners

    names = list(owners.load(base.owners_file).owners)
    started = time.monotonic()
    results = [
        r
        for batch in batches(names, base.lake)
        for r in refresh_shard(base, batch, concurrency, how=how or HowToRefresh())
    ]
    return fleet_result(results, round(time.monotonic() - started, 2))


def publish_owner(config: Settings) -> dict[str, Any]:
    """Publish one owner's core tables and marts into the shared lake, after its refresh."""
    from centsync.warehouse.lake import publish

    return publish(config.warehouse, config.lake, config.owner).to_json()
