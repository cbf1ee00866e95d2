"""The fleet's one engine: a shard of owners refreshed in one process, each owner's refresh
(its own client, key, pacing and warehouse) a few at a time, then their publish into the
shared lake together.

What a Dagster shard run does (`pipelines/fleet/definitions.py`), what `centsync refresh --all`
does a shard at a time (`fleet/run_all.py`) and what `bench/owners.py` measures. Every owner
is a thread of this process, never a process of its own: starting one costs more than a
household's refresh (docs/scale.md, "One engine").
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from centsync.pipelines.results import OwnerResult
from centsync.pipelines.settings import Settings
from centsync.transform.contract import AskedMode

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from centsync.transform.contract import Verdict


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


def _failed(result: OwnerResult, error: str, code: int) -> None:
    """Record a failure of the owner's (the lake's, or the whole refresh's): the worst code
    stands (`centsync refresh`'s: 0, 1 differ, 7 rejected, or the failure's)."""
    result.error = "; ".join(e for e in (result.error, error) if e)
    result.exit_code = max(result.exit_code, code)


@dataclass(frozen=True)
class HowToRefresh:
    """What each owner's refresh does, as `centsync refresh`'s flags say."""

    mode: AskedMode = "auto"
    months: str = ""  # "YYYY-MM..YYYY-MM": force-read these months (`--months`)
    report: bool = False  # write the owner's HTML reconciliation report (`--report`)
    # drain the owner's write-back outbox first, as `centsync refresh` does (`refresh --all`);
    # a Dagster shard run does not
    writeback: bool = False


def _refresh(base: Settings, owner: str, how: HowToRefresh) -> OwnerResult:
    """Refresh one owner in this process (its lake publish comes after); never raises."""
    from centsync.pipelines import failures
    from centsync.pipelines.clients import api_client
    from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
    from centsync.pipelines.refresh.summary import verification_settings
    from centsync.warehouse.lake import collect

    result = OwnerResult(owner=owner)
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
        result.warehouse = str(config.warehouse)
        first, _, last = how.months.partition("..")
        options = RefreshOptions(
            mode=how.mode,
            months=(first, last) if how.months else None,
            duckdb_memory=config.duckdb_memory,
            plan=config.plan,
            contract_file=config.contract_file,
            finished=for_the_lake,
            **verification_settings(None, None, config),
        )
        with api_client(config) as client:
            if how.writeback:
                _writeback(client, config)
            summary = run_refresh(client, config.warehouse, options)
        result.verdict = cast("Verdict | None", summary.verdict or None)
        result.mode = summary.mode
        result.rows, result.requests = summary.transactions, summary.requests_total
        result.exit_code = (
            failures.DIFFER
            if summary.verdict == "differ"
            else failures.REJECTED
            if summary.rows_rejected
            else failures.OK
        )
        from centsync.pipelines.outputs import report

        # asked, or one is already there (a rewrite that fails is the owner's warning)
        report.keep_current(
            config.warehouse, how.report, lambda w: log.warning("owner %s: %s", owner, w)
        )
        for error in lake_failed:
            _failed(result, error, failures.WAREHOUSE)
    except Exception as exc:  # one owner's failure is its result, never the shard's
        # the class and message only: a key is never in them (extract's errors say so)
        _failed(result, f"{type(exc).__name__}: {exc}", failures.from_exception(exc).code)
        log.warning("owner %s: %s", owner, result.error)
    result.seconds = round(time.monotonic() - started, 3)
    return result


def _writeback(client: Any, config: Settings) -> None:
    """The owner's write-back outbox, drained before its refresh reads (so posted rows come
    back in it), as the `outbox` asset does first in a refresh: what cannot be sent is a
    warning, and the refresh goes on."""
    from centsync.pipelines.writeback import run as writeback
    from centsync.warehouse.outbox import OutboxBusyError

    options = writeback.WritebackOptions(
        strict=False, inbox=config.inbox, allow_future=config.allow_future
    )
    try:
        summary = writeback.run_writeback(client, Path(config.warehouse), options)
    except OutboxBusyError as e:
        log.warning("owner %s: write-back skipped: %s", config.owner, e)
        return
    for warning in summary.warnings:
        log.warning("owner %s: write-back: %s", config.owner, warning)


def refresh_shard(
    base: Settings,
    owners: Sequence[str],
    concurrency: int = 4,
    mode: AskedMode = "auto",
    how: HowToRefresh | None = None,
) -> list[OwnerResult]:
    """Refresh a shard of owners, `concurrency` at a time in this process (threads: the work is
    the network, DuckDB and Polars, which run outside the GIL), then publish the refreshed ones
    into the lake together: one commit per changed table for the whole shard.

    `how` (default: `mode` alone) says what each owner's refresh does. Interrupted (Ctrl-C,
    SIGTERM), the owners not started are not, and the ones running finish (their warehouses
    are published whole, as always) before the interrupt goes on.
    """
    from centsync.pipelines import failures
    from centsync.warehouse.lake import publish_many

    how = how or HowToRefresh(mode=mode)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="owner")
    try:
        results = list(pool.map(lambda o: _refresh(base, o, how), owners))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    done = [r for r in results if not r.error and r.collected is not None]
    if not done:
        return results
    try:
        published = publish_many([r.collected for r in done if r.collected], base.lake)
    except Exception as exc:  # the refreshes stand; the lake keeps their last publish
        for r in done:
            _failed(r, f"lake publish: {type(exc).__name__}: {exc}", failures.WAREHOUSE)
        log.warning("shard publish: %s", exc)
        return results
    for r, p in zip(done, published, strict=True):
        r.lake, r.publish_seconds, r.collected = p.to_json(), p.seconds, None
    return results
