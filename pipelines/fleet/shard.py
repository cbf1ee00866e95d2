"""A shard of owners refreshed in one process: each owner's refresh (its own client, key,
pacing and warehouse), a few at a time, then its publish into the shared lake.

What a Dagster shard run does (`pipelines/fleet/definitions.py`) and what `bench/owners.py`
measures: one process per owner costs more than a household's refresh (docs/scale.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from centsync.pipelines.settings import Settings

log = logging.getLogger("centsync.fleet")


@dataclass
class OwnerResult:
    """One owner's refresh in a shard: its verdict and spend, or the error that stopped it."""

    owner: str
    verdict: str = ""
    mode: str = ""
    rows: int = 0
    requests: int = 0
    seconds: float = 0.0
    publish_seconds: float = 0.0
    error: str = ""
    lake: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None)}


def refresh_owner(
    base: Settings, owner: str, mode: Literal["auto", "full", "hot"] = "auto"
) -> OwnerResult:
    """Refresh one owner in this process, then publish it into the lake; never raises."""
    from centsync.pipelines.defs.resources import api_client
    from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
    from centsync.pipelines.refresh.summary import verification_settings
    from centsync.warehouse.lake import publish

    result = OwnerResult(owner)
    started = time.monotonic()
    try:
        config = base.for_owner(owner)
        options = RefreshOptions(
            mode=mode,
            duckdb_memory=config.duckdb_memory,
            plan=config.plan,
            **verification_settings(None, None, config),
        )
        with api_client(config) as client:
            summary = run_refresh(client, config.warehouse, options)
        result.verdict, result.mode = summary.verdict, summary.mode
        result.rows, result.requests = summary.transactions, summary.requests_total
        result.seconds = round(time.monotonic() - started, 3)
        published = publish(config.warehouse, config.lake, owner)
        result.lake, result.publish_seconds = published.to_json(), published.seconds
    except Exception as exc:  # one owner's failure is its result, never the shard's
        # the class and message only: a key is never in them (extract's errors say so)
        result.error = f"{type(exc).__name__}: {exc}"
        log.warning("owner %s: %s", owner, result.error)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def refresh_shard(
    base: Settings,
    owners: Sequence[str],
    concurrency: int = 4,
    mode: Literal["auto", "full", "hot"] = "auto",
) -> list[OwnerResult]:
    """Refresh a shard of owners, `concurrency` at a time in this process (threads: the work is
    the network, DuckDB and Polars, which run outside the GIL)."""
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="owner") as pool:
        return list(pool.map(lambda o: refresh_owner(base, o, mode), owners))
