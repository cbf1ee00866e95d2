"""A shard of owners refreshed in one process: each owner's refresh (its own client, key,
pacing and warehouse), a few at a time, then its publish into the shared lake.

What a Dagster shard run does (`pipelines/fleet/definitions.py`) and what `bench/owners.py`
measures: one process per owner costs more than a household's refresh (docs/scale.md).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from centsync.pipelines.settings import Settings

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from centsync.warehouse.lake import Collected

log = logging.getLogger("centsync.fleet")

# owners per shard run and per lake commit: one process per household costs more than its
# refresh, and a shard is one lake partition (docs/scale.md)
SHARD = 25


def batches(owners: Sequence[str], lake: Path, size: int = SHARD) -> list[list[str]]:
    """The owners, in order, in batches of at most `size` consecutive owners that share a lake
    shard (or are all new to the lake), so a batch's commit touches one partition.

    Owners keep the shard they were first published in; when some leave the owners file, the
    plain chunks of `size` would straddle two shards and rewrite both partitions each day.
    """
    from centsync.warehouse.lake import shards

    known = shards(lake, owners)
    out: list[list[str]] = []
    for owner in owners:
        last = out[-1] if out else None
        if last is None or len(last) >= size or known[owner] != known[last[0]]:
            out.append([owner])
        else:
            last.append(owner)
    return out


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
    # what the refresh read for the lake, published with its shard's (not in the JSON)
    collected: Collected | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in ("", None) and k != "collected"}


def _refresh(base: Settings, owner: str, mode: Literal["auto", "full", "hot"]) -> OwnerResult:
    """Refresh one owner in this process (its lake publish comes after); never raises."""
    from centsync.pipelines.defs.resources import api_client
    from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
    from centsync.pipelines.refresh.summary import verification_settings
    from centsync.warehouse.lake import collect

    result = OwnerResult(owner)
    started = time.monotonic()

    lake_failed: list[str] = []

    def for_the_lake(con: duckdb.DuckDBPyConnection, marts: Mapping[str, pl.DataFrame]) -> None:
        # the working copy holds what is about to be published: read the lake's share now
        # (the marts from the frames just written); the lake's trouble never stops the owner's
        # own refresh from being published
        try:
            result.collected = collect(con, base.lake, owner, marts)
        except Exception as exc:
            lake_failed.append(f"lake: {type(exc).__name__}: {exc}")

    try:
        config = base.for_owner(owner)
        options = RefreshOptions(
            mode=mode,
            duckdb_memory=config.duckdb_memory,
            plan=config.plan,
            contract_file=config.contract_file,
            finished=for_the_lake,
            **verification_settings(None, None, config),
        )
        with api_client(config) as client:
            summary = run_refresh(client, config.warehouse, options)
        result.verdict, result.mode = summary.verdict, summary.mode
        result.rows, result.requests = summary.transactions, summary.requests_total
        result.error = "; ".join(lake_failed)
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
    the network, DuckDB and Polars, which run outside the GIL), then publish the refreshed ones
    into the lake together: one commit per changed table for the whole shard."""
    from centsync.warehouse.lake import publish_many

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="owner") as pool:
        results = list(pool.map(lambda o: _refresh(base, o, mode), owners))
    done = [r for r in results if not r.error and r.collected is not None]
    if not done:
        return results
    try:
        published = publish_many([r.collected for r in done if r.collected], base.lake)
    except Exception as exc:  # the refreshes stand; the lake keeps their last publish
        for r in done:
            r.error = f"lake publish: {type(exc).__name__}: {exc}"
        log.warning("shard publish: %s", exc)
        return results
    for r, p in zip(done, published, strict=True):
        r.lake, r.publish_seconds, r.collected = p.to_json(), p.seconds, None
    return results
