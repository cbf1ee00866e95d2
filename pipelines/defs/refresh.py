"""The refresh as assets: one per endpoint it reads, and a monthly asset for backfills."""

import contextlib
import datetime as dt
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg
from tqdm import tqdm

from centsync.pipelines import failures as errors
from centsync.pipelines.clients import api_client
from centsync.pipelines.defs import OWNERS, checks, marts
from centsync.pipelines.defs.failures import known_failures
from centsync.pipelines.outputs.verdict_words import run_line
from centsync.pipelines.refresh.run import (
    RefreshOptions,
    RefreshSummary,
    parse_month_range,
    run_refresh,
)
from centsync.pipelines.refresh.summary import verification_settings
from centsync.pipelines.results import RESULT_KEY, RefreshResult
from centsync.pipelines.settings import Settings

# seconds between progress lines when stderr is not a terminal (a log, CI, cron)
PROGRESS_LINE_EVERY = 10.0


@contextlib.contextmanager
def interrupts_as_keyboard() -> Iterator[None]:
    """Ctrl-C reaches the refresh as KeyboardInterrupt (Dagster would raise its own error
    type), so the warehouse keeps what was read and marks the refresh 'interrupted'."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, errors.on_sigterm)  # Dagster routes it to its SIGINT handler
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])


class _Lines:
    """A file for tqdm that turns its carriage-return redraws into whole lines (for logs)."""

    def __init__(self, out: Any) -> None:
        self.out = out

    def write(self, text: str) -> None:
        line = text.replace("\r", "").strip()
        if line:
            self.out.write(line + "\n")

    def flush(self) -> None:
        self.out.flush()


class _LazyBar:
    """A progress bar that appears with the first rows (a refused refresh shows none)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.total = 0

    def _get(self) -> Any:
        if self.bar is None:
            self.bar = _new_bar(enabled=self.enabled, total=self.total or None)
        return self.bar

    def update(self, rows: int) -> None:
        self._get().update(rows)

    def set_postfix_str(self, text: str) -> None:
        self._get().set_postfix_str(text)

    def expect(self, rows: int) -> None:
        self.total += rows
        if self.bar is None:
            self._get()
            return
        self.bar.total = self.total
        self.bar.refresh()

    def __enter__(self) -> "_LazyBar":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def progress_bar(*, enabled: bool) -> _LazyBar:
    """Rows read, against the rows expected once known, with an ETA: a bar on a terminal,
    a line every PROGRESS_LINE_EVERY seconds elsewhere."""
    return _LazyBar(enabled)


def _new_bar(*, enabled: bool, total: int | None = None) -> tqdm:
    if sys.stderr.isatty():
        return tqdm(
            desc="transactions", unit=" rows", total=total, disable=not enabled, file=sys.stderr
        )
    return tqdm(
        desc="transactions",
        total=total,
        unit=" rows",
        disable=not enabled,
        file=_Lines(sys.stderr),
        mininterval=PROGRESS_LINE_EVERY,
        maxinterval=PROGRESS_LINE_EVERY,
        dynamic_ncols=False,
        ncols=100,
    )


class RefreshConfig(dg.Config):
    mode: str = "auto"  # auto (fingerprint-checked), full, hot (hot window only)
    months: str = ""  # "2024-01..2024-06": force-read these months
    hot_months: int = 2
    rebind: bool = False  # a warehouse bound to another source is kept as a backup, not refused
    report: bool = (
        False  # write the HTML report next to the warehouse (one there is always rewritten)
    )
    # rolling verification (docs/refresh.md): unset = the settings' (CENTSYNC_VERIFY_DAYS / _PAGES)
    verify_days: float | None = None
    verify_pages: int | None = None


class Endpoint(NamedTuple):
    """One GET endpoint the refresh reads, as an asset: its group, request and what it lands."""

    group: str
    endpoint: str
    description: str


# One spec per GET endpoint the refresh reads: each shows in the UI with what the run landed.
ENDPOINT_ASSETS: dict[str, Endpoint] = {
    "me": Endpoint(
        "identity",
        "GET /v1/me",
        "Key identity, scopes, allowance and expiry (checked every refresh).",
    ),
    "settings": Endpoint(
        "snapshots",
        "GET /v1/settings",
        "core.settings: timezone and currency; a timezone change makes the refresh full.",
    ),
    "accounts": Endpoint(
        "snapshots",
        "GET /v1/accounts",
        "core.accounts and history.accounts (one row per refresh).",
    ),
    "connections": Endpoint(
        "snapshots",
        "GET /v1/connections",
        "core.connections and history.connections.",
    ),
    "sync_status": Endpoint(
        "snapshots",
        "GET /v1/sync/status",
        "core.sync_status and history.sync_status.",
    ),
    "transactions": Endpoint(
        "ledger",
        "GET /v1/transactions",
        "core.transactions and raw.transactions: exactly the server's ledger.",
    ),
    "transactions_summary": Endpoint(
        "server_aggregates",
        "GET /v1/transactions/summary",
        "server.transactions_summary: per-year/month fingerprints and totals.",
    ),
    "accounts_summary": Endpoint(
        "server_aggregates",
        "GET /v1/accounts/summary",
        "server.accounts_summary.",
    ),
    "net_worth": Endpoint(
        "server_aggregates",
        "GET /v1/analytics/net-worth",
        "server.net_worth and history.net_worth.",
    ),
    "spending": Endpoint(
        "server_aggregates",
        "GET /v1/analytics/spending",
        "server.spending by category, merchant and month.",
    ),
}


def _specs() -> list[dg.AssetSpec]:
    return [
        dg.AssetSpec(
            key,
            group_name=group,
            description=f"{desc} Source: {endpoint}.",
            owners=OWNERS,
            kinds={"duckdb", "python"},
            metadata={"endpoint": endpoint},
            # the write-back runs first, so the rows it posts come back in this refresh
            deps=["outbox"] if key == "transactions" else [],
        )
        for key, (group, endpoint, desc) in ENDPOINT_ASSETS.items()
    ]


def _metadata(summary: RefreshSummary, key: str, result: RefreshResult) -> dict[str, Any]:
    endpoint = ENDPOINT_ASSETS[key].endpoint
    md: dict[str, Any] = {
        "requests": summary.requests.get(endpoint, 0),
        "refresh_id": summary.refresh_id,
    }
    if key == "transactions":
        md.update(
            {
                "rows": summary.transactions,
                # the transactions changed, as the summary's line counts them; rows_changed
                # counts the rows of every entity
                "transactions_new": summary.transactions_new,
                "transactions_updated": summary.transactions_updated,
                "transactions_removed": summary.transactions_removed,
                "seconds": round(summary.took, 2),
                "rows_changed": summary.rows_changed,
                "rows_rejected": summary.rows_rejected,
                "mode": f"{summary.mode} ({summary.reason})",
                "months_checked": summary.months_checked,
                "months_reread": len(summary.months_reread),
                "months_verified": summary.months_verified,
                "oldest_verified": summary.oldest_verified or "",
                "requests_total": summary.requests_total,
                "requests_floor": summary.floor,
                "rereads": summary.rereads,
                "preview": dg.MetadataValue.md(_markdown(summary)),
                # what `centsync refresh` prints: the typed result, one entry
                RESULT_KEY: dg.MetadataValue.json(result.to_json()),
            }
        )
    return md


def _markdown(summary: RefreshSummary) -> str:
    lines = ["| months | rows | changed | reason |", "| - | - | - | - |"]
    for r in summary.months_reread[:50]:
        lines.append(f"| {r['from']}..{r['to']} | {r['rows']} | {r['changed']} | {r['reason']} |")
    lines.append("")
    lines.append("| endpoint | requests |")
    lines.append("| - | - |")
    for k, v in sorted(summary.requests.items()):
        lines.append(f"| {k} | {v} |")
    return "\n".join(lines)


def _service_now(timezone: str) -> dt.datetime:
    """Now on the clock of the service's time zone (UTC when it is unknown)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone: dt.tzinfo = ZoneInfo(timezone) if timezone else dt.UTC
    except (ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    return dt.datetime.now(zone)


def _run(
    context: dg.AssetExecutionContext, settings: Settings, options: RefreshOptions
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    show = sys.stderr.isatty() or settings.progress
    with progress_bar(enabled=show) as bar, api_client(settings) as client:

        def progress(months: str, rows: int) -> None:
            # rows as batches land (negative when a window is read again); months as each commits
            bar.update(rows)
            if months:
                bar.set_postfix_str(f"months {months}")

        def expect(rows: int) -> None:
            bar.expect(rows)

        options.progress = progress
        options.expect = expect
        with interrupts_as_keyboard():
            summary = run_refresh(client, str(settings.warehouse), options)
    for w in summary.warnings:
        context.log.warning(w)
    # the details at DEBUG; a scheduled run logs INFO and up (defs/schedules.py): one line
    context.log.debug(
        f"refresh {summary.refresh_id}: {summary.mode} ({summary.reason}); {summary.transactions} transactions, "
        f"{summary.rows_changed} rows changed, {summary.requests_total} requests (floor {summary.floor})"
    )
    if summary.verdict:
        context.log.debug(
            f"reconciliation {summary.recon_id}: {summary.verdict} ({summary.recon_checked} checks, "
            f"{summary.recon_explained} explained, {summary.recon_differ} differ)"
        )
    from centsync.pipelines.outputs import report

    # written when asked, rewritten when one is already there: a report never shows an older refresh
    def report_warning(text: str) -> None:
        summary.warnings.append(text)
        context.log.warning(text)

    report_path = report.keep_current(Path(settings.warehouse), options.report, report_warning)
    if report_path:
        context.log.debug(f"reconciliation report: {report_path}")
    result = summary.result(str(report_path) if report_path else None)
    context.log.info(run_line(result, _service_now(summary.timezone)))
    for key in ENDPOINT_ASSETS:
        yield dg.MaterializeResult(asset_key=key, metadata=_metadata(summary, key, result))
    yield from marts.materializations(summary, report_path)
    yield checks.no_rejected_rows(Path(settings.warehouse))
    yield from marts.check_results(summary)


@dg.multi_asset(
    specs=_specs() + marts.specs(),
    check_specs=[checks.SPEC, *marts.check_specs()],
    name="refresh",
    can_subset=False,
)
def refresh_assets(
    context: dg.AssetExecutionContext, config: RefreshConfig, settings: dg.ResourceParam[Settings]
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """One refresh: snapshots, reconcile-then-repair of the ledger, the server's aggregates,
    then the marts and their reconciliation against those aggregates."""
    months = parse_month_range(config.months) if config.months else None
    mode = config.mode if config.mode in ("auto", "full", "hot") else "auto"
    with known_failures():
        options = RefreshOptions(
            mode=mode,  # type: ignore[arg-type]
            months=months,
            hot_months=config.hot_months,
            rebind=config.rebind,
            report=config.report,
            **verification_settings(config.verify_days, config.verify_pages, settings),
            # the embedded sandbox listens on a new port each time: the CLI names it
            source=settings.source,
            duckdb_memory=settings.duckdb_memory,
            plan=settings.plan,
            contract_file=settings.contract_file,
        )
        yield from _run(context, settings, options)


def transactions_by_month(partitions_start: str) -> dg.AssetsDefinition:
    """The monthly asset for backfills, its partitions from `partitions_start` (a date)."""
    monthly = dg.MonthlyPartitionsDefinition(start_date=partitions_start, end_offset=1)

    # BackfillPolicy is beta in Dagster 1.13: its warning, printed by every run's process when
    # the code location loads, would be two more lines in each scheduled run's log
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)

        @dg.asset(
            name="transactions_by_month",
            partitions_def=monthly,
            backfill_policy=dg.BackfillPolicy.single_run(),
            group_name="ledger",
            owners=OWNERS,
            kinds={"duckdb", "python"},
            description="Force-read a range of months of GET /v1/transactions (a backfill covers many in one run).",
        )
        def _asset(
            context: dg.AssetExecutionContext, settings: dg.ResourceParam[Settings]
        ) -> dg.MaterializeResult:
            keys = context.partition_key_range
            first, last = keys.start[:7], keys.end[:7]
            with known_failures(), api_client(settings) as client:
                summary = run_refresh(
                    client,
                    str(settings.warehouse),
                    RefreshOptions(
                        months=(first, last),
                        duckdb_memory=settings.duckdb_memory,
                        contract_file=settings.contract_file,
                        **verification_settings(None, None, settings),
                    ),
                )
            return dg.MaterializeResult(
                metadata={
                    "months": f"{first}..{last}",
                    "rows": sum(r["rows"] for r in summary.months_reread),
                    "rows_changed": summary.rows_changed,
                    "requests_total": summary.requests_total,
                }
            )

    return _asset
