"""One refresh as a session: bind, open a working copy, run the steps, reconcile, publish.

`run_refresh` is what the Dagster assets, the CLI and the tests call. It checks the warehouse's
binding before writing anything, sizes DuckDB for the refresh, runs the steps (steps.py) on a
working copy, confirms the write-back's outbox, reconciles (pipelines/reconcile.py) and
publishes; it assembles the run's RefreshSummary from what each part returned.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Literal

import duckdb
import polars as pl

from centsync.extract import ApiClient
from centsync.pipelines.reconcile import reconcile
from centsync.pipelines.refresh import binding
from centsync.pipelines.refresh.plan import single_thread
from centsync.pipelines.refresh.steps import Refresher
from centsync.pipelines.refresh.summary import (
    DEFAULT_DUCKDB_MEMORY,
    RefreshOptions,
    RefreshSummary,
)
from centsync.pipelines.writeback import confirm as writeback_confirm
from centsync.transform.calendar import parse_month_range
from centsync.transform.contract import RefreshMode
from centsync.warehouse import Warehouse
from centsync.warehouse import damaged as warehouse_damaged
from centsync.warehouse import history as transaction_history
from centsync.warehouse import marts as marts_store
from centsync.warehouse import reads as warehouse_reads
from centsync.warehouse.outbox import Outbox, outbox_path

log = logging.getLogger("centsync.refresh")


def size_threads(warehouse: Warehouse, rows: int) -> None:
    """One DuckDB thread for a small ledger, DuckDB's default for a big one (ONE_THREAD_ROWS)."""
    warehouse.refresh_settings(single_thread=single_thread(rows))


def run_refresh(
    client: ApiClient, warehouse_path: str | os.PathLike[str], options: RefreshOptions
) -> RefreshSummary:
    """Run one refresh into a working copy of the warehouse and publish it when it succeeds.

    Refuses (`binding.SourceMismatch`) before writing anything when the warehouse holds another
    service's or owner's data, unless `options.rebind` sets the old file aside first.
    """
    mode: Literal["full", "incremental"] = "full" if options.mode == "full" else "incremental"
    before = _snapshot_counts(client)
    published = Path(warehouse_path)
    source = binding.normalise(options.source or str(client.async_client.base_url))
    me = client.me()
    backup = None
    if options.rebind:
        try:
            binding.check(published, source, me.account_id)
        except binding.SourceMismatch:
            backup = binding.set_aside(published)
            log.warning("rebinding: the old warehouse is kept as %s", backup)
        except Exception as exc:
            # a warehouse whose bytes are damaged: kept aside, named, and the recovery said
            damage = warehouse_damaged(published, exc)
            if damage is None:
                raise
            raise damage from exc

    def bound(con: duckdb.DuckDBPyConnection) -> None:
        # on the working copy, before anything is written (one open of the file, not two); a
        # damaged file fails to open and is set aside by the session, as a failed check was
        binding.check_open(con, published, source, me.account_id)

    # the write-back posts nothing while this refresh reads (its own rows would look like a
    # service changing under the reader)
    drains = Outbox(outbox_path(published)).draining(by="refresh")
    check = None if options.rebind else bound
    with (
        drains,
        Warehouse.refreshing(published, mode=mode, check=check) as warehouse,
        contextlib.ExitStack() as ahead,
    ):
        copy = _CopyAhead(warehouse, ahead) if options.reconcile else None

        # DuckDB would otherwise keep up to 80 % of RAM as cache; a refresh streams, it needs little.
        warehouse.refresh_settings(
            memory=options.duckdb_memory,
            single_thread=single_thread(warehouse_reads.transaction_count(warehouse.con)),
        )
        refresher = Refresher(
            client,
            warehouse,
            options,
            me=me,
            source=source,
            written_months=writeback_confirm.written_months(warehouse.con, published),
            ledger_final=copy,
        )
        summary = refresher.run()
        _count(client, warehouse, before, summary)
        summary.backup = str(backup) if backup else None
        # write-back rows this refresh read back are confirmed; the warehouse gets the outbox
        _outbox(warehouse, published, summary)
        marts: dict[str, pl.DataFrame] = {}
        if options.reconcile:
            # before publishing: the marts and their proof land with the data they describe
            marts = _reconcile(client, warehouse, summary, copy.made if copy else None)
        warehouse.finish_refresh(
            requests=summary.requests,
            months_checked=summary.months_checked,
            # what it did: full (asked, or the timezone changed, nothing local), hot, months
            mode=_recorded_mode(summary.mode),
        )
        # the one duration a person reads, here and in `status`: as ops.refreshes records it
        summary.took = warehouse_reads.latest_refresh_seconds(warehouse.con)
        if options.finished is not None:
            options.finished(warehouse.con, marts)
    return summary


class _CopyAhead:
    """Called once the ledger is final: a big ledger's copy for the marts is then made while
    the accounts and aggregates are asked for and landed (marts_store.LedgerCopy), in `stack`."""

    def __init__(self, warehouse: Warehouse, stack: contextlib.ExitStack) -> None:
        self.warehouse, self.stack = warehouse, stack
        self.made: marts_store.LedgerCopy | None = None

    def __call__(self) -> None:
        self.made = self.stack.enter_context(marts_store.ledger_copy(self.warehouse.con))


def _recorded_mode(mode: str) -> RefreshMode | None:
    """The mode ops.refreshes records when it is not the incremental one it started as."""
    recorded: dict[str, RefreshMode] = {"full": "full", "hot": "hot", "months": "months"}
    return recorded.get(mode)


def _count(
    client: ApiClient, warehouse: Warehouse, before: dict[str, int], summary: RefreshSummary
) -> None:
    """The refresh's requests, retries and rows into its summary (and the rejected rows into
    the warehouse's counters, which ops.refreshes records)."""
    spent = _spent(client, before)
    summary.requests = spent
    summary.requests_total = sum(spent.values())
    summary.retries = sum(e.retries for e in client.stats.endpoints.values())
    stats = warehouse.stats
    summary.rows_landed, summary.rows_changed = stats.rows_landed, stats.rows_changed
    summary.transactions_new = stats.transactions_new
    summary.transactions_updated = stats.transactions_updated
    summary.transactions_removed = stats.transactions_removed
    summary.refresh_id = warehouse.refresh_id or ""
    # a row read twice (a first sync, then its month again) is one rejected row; ops.refreshes
    # records the same figure as the summary
    stats.rows_rejected = marts_store.rejected_count(warehouse.con, summary.refresh_id)
    summary.rows_rejected = stats.rows_rejected


def _outbox(warehouse: Warehouse, published: Path, summary: RefreshSummary) -> None:
    """Confirm the outbox rows this refresh read back; the summary gets the outbox's states."""
    found = writeback_confirm.after_refresh(warehouse.con, published, warehouse.refresh_id or "")
    if found is not None:
        summary.outbox_confirmed, summary.outbox = found
        # the versions of transactions this refresh saw that were our write-back's are ours
        transaction_history.attribute(warehouse.con, warehouse.refresh_id or "")


def _reconcile(
    client: ApiClient,
    warehouse: Warehouse,
    summary: RefreshSummary,
    ledger_copy: marts_store.LedgerCopy | None,
) -> dict[str, pl.DataFrame]:
    """Rebuild the marts and reconcile them; the summary gets the verdict and the checks. The
    mart frames written, by table name."""
    before = _snapshot_counts(client)
    outcome = reconcile(
        warehouse.con,
        source="refresh",
        client=client,
        refresh_id=warehouse.refresh_id,
        ledger_copy=ledger_copy,
    )
    for endpoint, spent in _spent(client, before).items():  # confirmation requests, if any
        summary.requests[endpoint] = summary.requests.get(endpoint, 0) + spent
        summary.requests_total += spent
    counts = outcome.counts()
    summary.verdict = outcome.verdict
    summary.recon_id = outcome.recon_id
    summary.recon_checked = outcome.proved  # the numbers compared with the service's own
    summary.recon_unavailable = counts["unavailable"]
    summary.recon_explained, summary.recon_differ = counts["explained"], counts["differ"]
    summary.recon_seconds = outcome.seconds
    summary.marts = outcome.marts
    differences = outcome.differences
    summary.differences = _short(differences.head(10))
    # one pass over the checks (15 filters per refresh were a household refresh's 3 %)
    first = {
        check: _short(part.head(5))
        for (check,), part in differences.group_by("check", maintain_order=True)
    }
    tally = outcome.results.group_by("check", maintain_order=True).agg(
        pl.len().alias("checked"),
        (pl.col("status") == "explained").sum().alias("explained"),
        (pl.col("status") == "differ").sum().alias("differ"),
        (pl.col("status") == "unavailable").sum().alias("unavailable"),
    )
    for check, checked, explained, differ, unavailable in tally.iter_rows():
        summary.checks[str(check)] = {
            "checked": checked - unavailable,
            "explained": explained,
            "differ": differ,
            "unavailable": unavailable,
            "first": first.get(check, []),
        }
    return outcome.mart_frames


def _short(differences: pl.DataFrame) -> list[dict[str, Any]]:
    """The differences as the summary shows them (DIFFERENCE_FIELDS)."""
    return [
        {key: value for key, value in row.items() if key in DIFFERENCE_FIELDS}
        for row in differences.to_dicts()
    ]


DIFFERENCE_FIELDS = (
    "check",
    "scope",
    "local_cents",
    "server_cents",
    "difference_cents",
    "status",
    "explanation",
)


def _snapshot_counts(client: ApiClient) -> dict[str, int]:
    """Requests made so far, per endpoint."""
    return {endpoint: stats.requests for endpoint, stats in client.stats.endpoints.items()}


def _spent(client: ApiClient, before: dict[str, int]) -> dict[str, int]:
    """Requests made since `before`, per endpoint (endpoints with none left out)."""
    out = {}
    for endpoint, stats in client.stats.endpoints.items():
        spent = stats.requests - before.get(endpoint, 0)
        if spent:
            out[endpoint] = spent
    return out


__all__ = [
    "DEFAULT_DUCKDB_MEMORY",
    "RefreshOptions",
    "RefreshSummary",
    "Refresher",
    "parse_month_range",
    "run_refresh",
    "size_threads",
]
