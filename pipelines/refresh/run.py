"""One refresh: reconcile the warehouse with the service, then repair what differs (DESIGN 2).

Plain Python over the extract client and the warehouse, so the Dagster assets, the CLI and the
tests all run the same code. Requests are the scarce resource: every step below is chosen to
spend the fewest of them (see docs/refresh.md for the request budget).
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import orjson
import polars as pl

from centsync.extract import ApiClient, Me, WindowRows, WindowStream, WindowVoid
from centsync.pipelines.reconcile import reconcile
from centsync.pipelines.refresh import binding
from centsync.pipelines.refresh import fingerprints as fp
from centsync.pipelines.refresh.summary import Mode, RefreshOptions, RefreshSummary
from centsync.pipelines.writeback import confirm as writeback_confirm
from centsync.transform.calendar import (
    add_months,
    contiguous,
    month_end,
    month_start,
    months_between,
    pages,
    parse_month,
    parse_month_range,
)
from centsync.warehouse import Warehouse, default_path
from centsync.warehouse import marts as marts_store
from centsync.warehouse.session import is_interrupt

log = logging.getLogger("centsync.refresh")

PAGE = 200
# Rows per read window: big windows waste fewer partial pages; this bounds memory.
WINDOW_ROWS = 170_000
PUBLISH_EVERY_S = 30.0
# DuckDB's buffer pool for the refresh (it spills past it). At 1,000,000 rows 160 MB gave the
# same speed as 256 MB with 75 MB less peak RSS; 64 MB ran out of memory.
DUCKDB_MEMORY = os.environ.get("CENTSYNC_DUCKDB_MEMORY", "160MB")
# Below this many rows (in the warehouse, or announced by the server for a full read) DuckDB
# runs the refresh on one thread: its statements are small and many (about 40 in a household
# refresh), and waking a second worker for each cost more than it gave (2.04 -> 2.00 s, median
# of 10, docs/benchmarks.md). A bigger ledger gets DuckDB's default, all cores.
ONE_THREAD_ROWS = 100_000
# List requests in flight while reading one window (2-3 measured fastest against one server core).
PAGE_CONCURRENCY = 3
# Pages per streamed batch and batches the reader may run ahead of the loader. Validation has
# a fixed cost per call; at 1,000,000 rows 150 pages (30,000 rows) ran at 88-90k rows/s with a
# 520 MB peak, 250 pages 90-95k rows/s at 590 MB, 100 pages 77-80k rows/s at 483 MB.
STREAM_BATCH_PAGES = 150
STREAM_DEPTH = 1


class Refresher:
    """Runs one refresh of `wh` (a working copy) from `client`."""

    def __init__(
        self,
        client: ApiClient,
        wh: Warehouse,
        options: RefreshOptions,
        *,
        me: Me | None = None,
        source: str = "",
    ) -> None:
        self.me = me
        self.source = source
        self.client = client
        self.wh = wh
        self.opt = options
        self.summary = RefreshSummary(refresh_id=wh.refresh_id or "")
        self.summaries: list[dict[str, Any]] = []
        self.spendings: list[dict[str, Any]] = []
        self.rows_read = 0
        self._published = time.monotonic()

    # ---- the steps ---------------------------------------------------------------------------
    def run(self) -> RefreshSummary:
        started = time.monotonic()
        c, wh, s = self.client, self.wh, self.summary
        me = self.me or c.me()
        s.owner = me.account_id
        s.key_expires_at = me.key_expires_at.isoformat() if me.key_expires_at else None
        if me.key_expires_at is not None:
            left = me.key_expires_at - dt.datetime.now(dt.UTC)
            if left < dt.timedelta(days=30):
                s.warnings.append(
                    f"the API key expires in {max(0, left.days)} days ({me.key_expires_at:%Y-%m-%d}): create a new one"
                )
        settings, nw = c.gather(lambda a: a.settings(), lambda a: a.net_worth())
        sres = wh.snapshot_settings(orjson.loads(settings.raw))
        s.timezone = settings.timezone
        self._bind(me.account_id, settings.currency, settings.timezone)
        wh.load_net_worth(orjson.loads(nw.raw))
        # "Today" is the service's, read off net worth's as_of, in the settings timezone.
        now = nw.as_of or dt.datetime.now(dt.UTC)
        # every month read is recorded as verified at the service's "now"
        wh.service_now = now
        today = now.astimezone(ZoneInfo(settings.timezone)).date()
        hot_start = add_months(month_start(today), -(max(1, self.opt.hot_months) - 1))
        present = wh.months_present()

        if self.opt.months is not None:
            s.mode, s.reason = "months", f"months {self.opt.months[0]}..{self.opt.months[1]} forced"
            a, b = (parse_month(m) for m in self.opt.months)
            self._read([(a, month_end(b))], reason="forced")
        elif self.opt.mode == "full" or sres.timezone_changed or not present:
            s.mode = "full"
            s.reason = (
                "--full"
                if self.opt.mode == "full"
                else f"timezone changed from {sres.previous_timezone} to {sres.timezone}"
                if sres.timezone_changed
                else "first sync"
            )
            self._full(today, hot_start)
        else:
            s.mode = "hot" if self.opt.mode == "hot" else "incremental"
            s.reason = "hot window" if s.mode == "hot" else "fingerprints checked"
            if s.mode == "incremental":
                self._check_history(present, hot_start)
            # an edit the write-back sent (a renamed concept) changes no fingerprint: read it back
            written = sorted({m for m in self.opt.written_months if m < hot_start})
            for lo, hi in contiguous((m, month_end(m)) for m in written):
                self._read([(lo, hi)], reason="written back")
            if s.mode == "incremental":
                self._verify_oldest(hot_start, now)
            self._read([(hot_start, None)], reason="hot window")

        # Snapshots and aggregates after the ledger: balances then include every row the
        # ledger read saw. They are independent of each other: asked for at once.
        self._after_ledger(today)
        oldest = wh.verification_order().filter(pl.col("month") < hot_start.strftime("%Y-%m"))
        if oldest.height and oldest.item(0, "verified_at") is not None:
            s.oldest_verified = oldest.item(0, "verified_at").date().isoformat()
        s.seconds = time.monotonic() - started
        return s

    def _verify_oldest(self, hot_start: dt.date, now: dt.datetime) -> None:
        """Rolling verification: re-read the months verified longest ago (DESIGN 2, docs/refresh.md).

        Some edits change no aggregate the API offers (a date moved within its month, a renamed
        income, two amounts swapped within one merchant). Every month is re-read at least once
        per ``verify_days`` of the service's clock: a month older than that is always read, and
        each refresh reads the oldest others within its page budget, which is ``verify_pages``
        or, when more, the share of the ledger the time since the last refresh calls for (so a
        daily refresh with a 7-day period reads a seventh of the ledger, never all of it at once).
        """
        if self.opt.verify_days <= 0:
            return
        period = dt.timedelta(days=self.opt.verify_days)
        order = self.wh.verification_order()
        months = order.filter(pl.col("month") < hot_start.strftime("%Y-%m"))
        if months.height == 0:
            return
        total_pages = math.ceil(int(months.get_column("rows").sum()) / PAGE)
        last = self.wh.get_meta("verify.last_at")
        share = 0
        if last:
            elapsed = (now - dt.datetime.fromisoformat(last)).total_seconds()
            share = math.ceil(total_pages * max(0.0, elapsed) / period.total_seconds())
        budget = max(self.opt.verify_pages, min(share, total_pages))
        due_before = now - period
        chosen: dict[str, int] = {}
        for month, rows, verified_at in months.iter_rows():
            if self._months_done(month):
                continue  # read whole by this refresh already (a differing fingerprint)
            due = verified_at is None or verified_at <= due_before
            if not due and pages({**chosen, month: rows}, PAGE) > budget:
                break  # oldest first: what is left was verified more recently
            chosen[month] = rows
        self.wh.set_meta("verify.last_at", now.isoformat())
        windows = contiguous((parse_month(m), month_end(parse_month(m))) for m in sorted(chosen))
        for lo, hi in windows:
            self._read([(lo, hi)], reason="verification (verified longest ago)")
        self.summary.months_verified = len(chosen)

    def _batch_pages(self) -> int:
        """Pages per streamed batch: a batch is what an interrupted read can keep, so under a
        rate limit a batch is about 15 s of the allowance (10 to STREAM_BATCH_PAGES pages)."""
        per_minute = self.me.minute_limit if self.me is not None else 0
        if per_minute <= 0:
            return STREAM_BATCH_PAGES
        return max(10, min(STREAM_BATCH_PAGES, per_minute // 4))

    def _bind(self, account_id: str, currency: str, timezone: str) -> None:
        """Record the warehouse's source (its first binding time is kept)."""
        if not self.source:
            return
        first = self.wh.get_meta("source.bound_at")
        for key, value in binding.meta(self.source, account_id, currency, timezone).items():
            if key == "source.bound_at" and first:
                continue
            self.wh.set_meta(key, value)
        self.wh.set_meta("key.expires_at", self.summary.key_expires_at)

    def _full(self, today: dt.date, hot_start: dt.date) -> None:
        """Read the whole ledger in a few big windows, then prove it against the server's totals.

        Windows are not verified one by one (a summary request each): the whole-ledger summary
        before and after the read must both equal the rows landed. If the server changed while
        it was read, the per-year fingerprints find the years that moved and those are re-read.
        """
        before = self.client.transactions_summary()
        total = before.count
        _size_threads(self.wh, total)
        if self.opt.expect is not None:
            self.opt.expect(total)
        if total == 0:
            self._replace_everything_with_nothing()
        elif total <= WINDOW_ROWS:
            # A small ledger is one window: no dates needed, one partial page in all.
            self._read([(None, None)], reason=self.summary.reason, verify=False)
        else:
            span = self._span()
            if span is None:
                self._replace_everything_with_nothing()
            else:
                oldest, newest, total = span
                windows = self._pack(oldest, max(newest, today), total)
                seen: set[dt.date] = set()
                for lo, hi in windows:
                    seen.update(months_between(lo, hi))
                # The first window is open below and the last open above, to catch rows the range missed.
                bounds = [
                    (None if i == 0 else lo, None if i == len(windows) - 1 else hi)
                    for i, (lo, hi) in enumerate(windows)
                ]
                self._read(bounds, reason=self.summary.reason, planned=windows, verify=False)
                stale = [
                    m
                    for m in self.wh.months_present()
                    if parse_month(m) not in seen and not self._months_done(m)
                ]
                if stale:
                    self.wh.replace_months(stale, self._empty(), reason=self.summary.reason)
        after = self._whole_summary()
        server = {
            (before.count, before.income, before.expense, before.transfer),
            (after.count, after.income, after.expense, after.transfer),
        }
        local = fp.local_totals(self.wh, None, dt.date(2999, 12, 31))
        if server != {local}:
            log.info("the ledger changed while it was read: checking every year's fingerprint")
            self.summary.reason += "; changed during the read, repaired by fingerprints"
            present = self.wh.months_present()
            if present:
                self._check_history(present, hot_start)
            self._read([(hot_start, None)], reason="hot window")

    def _whole_summary(self) -> Any:
        whole = self.client.transactions_summary()
        self._record_summary("all", None, None, whole)
        return whole

    def _record_summary(
        self, scope: str, lo: dt.date | None, hi: dt.date | None, summ: Any
    ) -> None:
        """Keep a fetched summary for server.transactions_summary."""
        self.summaries.append(
            {
                "scope": scope,
                "from": lo,
                "to": hi,
                "count": summ.count,
                "income": summ.income,
                "expense": summ.expense,
                "transfer": summ.transfer,
                "net": summ.net,
            }
        )

    def _span(self) -> tuple[dt.date, dt.date, int] | None:
        """Newest and oldest booked_at and the row count: two one-row pages."""
        newest, env = self.client.transactions_page(1, limit=1, raw=False)
        total = int(env.get("total") or 0)
        if total == 0 or newest.height == 0:
            return None
        oldest, _ = self.client.transactions_page(total, limit=1, raw=False)
        last = (
            oldest.get_column("booked_at")[0]
            if oldest.height
            else newest.get_column("booked_at")[0]
        )
        return last, newest.get_column("booked_at")[0], total

    def _pack(self, oldest: dt.date, newest: dt.date, total: int) -> list[tuple[dt.date, dt.date]]:
        """Month-aligned windows of about WINDOW_ROWS rows each, sized from the ledger's span."""
        months = months_between(oldest, newest)
        per_month = max(1.0, total / len(months))
        size = max(1, math.floor(WINDOW_ROWS / per_month))
        out = []
        for i in range(0, len(months), size):
            chunk = months[i : i + size]
            out.append((chunk[0], month_end(chunk[-1])))
        return out

    def _check_history(self, present: list[str], hot_start: dt.date) -> None:
        """Per-year fingerprints of everything before the hot window; drill into years that differ.

        Every year's fingerprint is asked for at once (one round trip), then compared in order.
        """
        first_local = parse_month(present[0])
        years: list[tuple[int, dt.date | None, dt.date]] = []
        for i, year in enumerate(range(first_local.year, hot_start.year + 1)):
            lo = None if i == 0 else dt.date(year, 1, 1)
            hi = min(dt.date(year, 12, 31), hot_start - dt.timedelta(days=1))
            if lo is None or hi >= lo:
                years.append((year, lo, hi))
        found = self._fingerprints([(lo, hi) for _, lo, hi in years], "year")
        for (year, lo, hi), server in zip(years, found, strict=True):
            months = months_between(lo or first_local, hi)
            self.summary.months_checked += len(months)
            if server == fp.local(self.wh, lo, hi):
                continue
            count = server[0][0]
            # Drilling costs three requests a month; re-reading the year costs its pages.
            cheaper_to_read = math.ceil(count / PAGE) + 1 <= fp.REQUESTS * len(months)
            if self.opt.expect is not None and cheaper_to_read:
                self.opt.expect(count)
            if cheaper_to_read:
                self._read([(lo, hi)], reason=f"year {year} differs")
                continue
            ranges = [
                (None if (lo is None and j == 0) else m, month_end(m)) for j, m in enumerate(months)
            ]
            per_month = self._fingerprints(ranges, "month")
            differing = [
                (mlo, mhi)
                for (mlo, mhi), got in zip(ranges, per_month, strict=True)
                if got != fp.local(self.wh, mlo, mhi)
            ]
            for lo_, hi_ in contiguous(differing):
                self._read([(lo_, hi_)], reason=f"month differs in {year}")

    def _fingerprints(
        self, ranges: list[tuple[dt.date | None, dt.date]], scope: str
    ) -> list[fp.Fingerprint]:
        """The service's fingerprints of `ranges`, asked at once; responses kept for `server.*`."""
        out = []
        for (lo, hi), (found, summary, spendings) in zip(
            ranges, fp.server(self.client, ranges), strict=True
        ):
            self._record_summary(scope, lo, hi, summary)
            self.spendings.extend(spendings)
            out.append(found)
        return out

    def _read(
        self,
        windows: list[tuple[dt.date | None, dt.date | None]],
        *,
        reason: str,
        planned: list[tuple[dt.date, dt.date]] | None = None,
        verify: bool = True,
    ) -> None:
        """Read windows drift-safely and replace exactly the months each covers.

        A window streams: each parsed batch of pages is validated and staged in DuckDB while the
        next pages are read; the window's months are replaced in one transaction once the read
        is accepted. Memory holds a few batches, not a window.
        """

        def open_stream(window: tuple[dt.date | None, dt.date | None]) -> WindowStream:
            return self.client.stream_window(
                window,
                concurrency=PAGE_CONCURRENCY,
                verify=verify,
                depth=STREAM_DEPTH,
                batch_pages=self._batch_pages(),
            )

        stream = open_stream(windows[0]) if windows else None
        for i, window in enumerate(windows):
            assert stream is not None
            rows = rereads = 0
            with self.wh.stage_transactions() as stage, stream:
                try:
                    for event in stream:
                        if isinstance(event, WindowRows):
                            stage.add(event.frame)
                            rows += event.frame.height
                            if self.opt.progress is not None:
                                self.opt.progress("", event.frame.height)
                        elif isinstance(event, WindowVoid):
                            stage.reset()
                            rereads += 1
                            if self.opt.progress is not None:
                                self.opt.progress("", -rows)
                            rows = 0
                except BaseException as exc:
                    if not is_interrupt(exc):
                        raise
                    # stopped mid-window: the months read whole are kept (the next refresh's
                    # fingerprints prove them or re-read them)
                    if stage.commit_complete(reason=f"{reason} (interrupted)") is not None:
                        log.warning("interrupted: kept the months read completely")
                    if isinstance(exc, KeyboardInterrupt):
                        raise
                    raise KeyboardInterrupt("a query was interrupted") from exc
                # the next window is read while this one commits (DuckDB releases the GIL)
                stream = open_stream(windows[i + 1]) if i + 1 < len(windows) else None
                try:
                    lo, hi = planned[i] if planned is not None else window
                    months = self._window_months(lo, hi, stage.booked_range)
                    result = stage.commit(months, reason=reason) if months else None
                except BaseException:
                    if stream is not None:
                        stream.close()
                    raise
            self.rows_read += rows
            self.summary.floor += math.ceil(rows / PAGE) if rows else 1
            self.summary.rereads += rereads
            if result is not None:
                self.summary.months_reread.append(
                    {
                        "from": months[0],
                        "to": months[-1],
                        "months": len(months),
                        "rows": rows,
                        "changed": result.changed,
                        "reason": reason,
                    }
                )
            if self.opt.progress is not None:
                self.opt.progress(f"{months[0]}..{months[-1]}" if months else "", 0)
            if time.monotonic() - self._published > PUBLISH_EVERY_S:
                # A long first sync keeps what it read: a stopped refresh resumes from here.
                self.wh.publish_progress()
                self._published = time.monotonic()

    def _window_months(
        self,
        lo: dt.date | None,
        hi: dt.date | None,
        booked: Callable[[], tuple[dt.date, dt.date] | None],
    ) -> list[str]:
        """Every month a window covers: its bounds, and for open ends the rows read (``booked``
        gives their date range) and the local months."""
        if lo is not None and hi is not None:
            return [m.strftime("%Y-%m") for m in months_between(lo, hi)]
        seen = booked()
        dates: list[dt.date] = list(seen) if seen is not None else []
        local = [parse_month(m) for m in self.wh.months_present()]
        if lo is None:
            lo = min([*dates, *[m for m in local if hi is None or m <= hi]], default=None)
        if hi is None:
            hi = max(
                [*dates, *[month_end(m) for m in local if lo is None or m >= month_start(lo)]],
                default=None,
            )
        if lo is None or hi is None:
            return []
        return [m.strftime("%Y-%m") for m in months_between(lo, hi)]

    def _months_done(self, month: str) -> bool:
        return any(r["from"] <= month <= r["to"] for r in self.summary.months_reread)

    def _empty(self) -> pl.DataFrame:
        from centsync.extract import TRANSACTION_SCHEMA

        return pl.DataFrame(schema=TRANSACTION_SCHEMA)

    def _replace_everything_with_nothing(self) -> None:
        present = self.wh.months_present()
        if present:
            self.wh.replace_months(present, self._empty(), reason="the server has no transactions")

    def _after_ledger(self, today: dt.date) -> None:
        """Accounts, connections, sync status and the server's own aggregates (landed for
        reconciliation), every request made at once."""
        c, wh = self.client, self.wh
        oldest = wh.query(
            "SELECT min(booked_at) AS d, max(booked_at) AS e FROM core.transactions"
        ).row(0)
        lo = oldest[0] or today
        hi = max(oldest[1] or today, today)
        whole = not any(r["scope"] == "all" for r in self.summaries)
        groups = ("category", "merchant", "month")
        got = c.gather(
            lambda a: a.accounts(),
            lambda a: a.connections(),
            lambda a: a.sync_status(),
            lambda a: a.accounts_summary(),
            *(lambda a, g=g: a.spending(lo, hi, group_by=g) for g in groups),
            *([lambda a: a.transactions_summary()] if whole else []),
        )
        accounts, connections, sync, accounts_summary = got[:4]
        wh.snapshot_accounts(accounts)
        wh.snapshot_connections(connections)
        wh.snapshot_sync_status(sync)
        wh.load_accounts_summary(orjson.loads(accounts_summary.raw))
        self.spendings.extend(orjson.loads(sp.raw) for sp in got[4 : 4 + len(groups)])
        if whole:
            self._record_summary("all", None, None, got[-1])
        wh.load_transactions_summaries(self.summaries)
        wh.load_spending(self.spendings)
        self.summary.transactions = int(wh.query("SELECT count(*) FROM core.transactions").item())


def _size_threads(wh: Warehouse, rows: int) -> None:
    """One DuckDB thread for a small ledger, DuckDB's default for a big one (ONE_THREAD_ROWS)."""
    wh.con.execute("SET threads = 1" if rows < ONE_THREAD_ROWS else "RESET threads")


def run_refresh(
    client: ApiClient, warehouse_path: str | None, options: RefreshOptions
) -> RefreshSummary:
    """Run one refresh into a working copy of the warehouse and publish it when it succeeds.

    Refuses (`binding.SourceMismatch`) before writing anything when the warehouse holds another
    service's or owner's data, unless `options.rebind` sets the old file aside first.
    """
    mode: Literal["full", "incremental"] = "full" if options.mode == "full" else "incremental"
    before = _snapshot_counts(client)
    published = Path(warehouse_path) if warehouse_path else default_path()
    source = binding.normalise(options.source or str(client.async_client.base_url))
    me = client.me()
    backup = None
    try:
        binding.check(published, source, me.account_id)
    except binding.SourceMismatch:
        if not options.rebind:
            raise
        backup = binding.set_aside(published)
        log.warning("rebinding: the old warehouse is kept as %s", backup)
    with Warehouse.refreshing(warehouse_path, mode=mode) as wh:
        # DuckDB would otherwise keep up to 80 % of RAM as cache; a refresh streams, it needs little.
        wh.con.execute(f"SET memory_limit = '{DUCKDB_MEMORY}'")
        _size_threads(wh, int(wh.query("SELECT count(*) FROM core.transactions").item()))
        options.written_months = writeback_confirm.written_months(wh.con, published)
        r = Refresher(client, wh, options, me=me, source=source)
        r.summary.source = source
        summary = r.run()
        spent = _spent(client, before)
        summary.requests = spent
        summary.requests_total = sum(spent.values())
        summary.retries = sum(e.retries for e in client.stats.endpoints.values())
        st = wh.stats
        summary.rows_landed, summary.rows_changed = st.rows_landed, st.rows_changed
        summary.refresh_id = wh.refresh_id or ""
        # a row read twice (a first sync, then its month again) is one rejected row; ops.refreshes
        # records the same figure as the summary
        st.rows_rejected = marts_store.rejected_count(wh.con, summary.refresh_id)
        summary.rows_rejected = st.rows_rejected
        summary.backup = str(backup) if backup else None
        # write-back rows this refresh read back are confirmed; the warehouse gets the outbox
        _outbox(wh, published, summary)
        if options.reconcile:
            # before publishing: the marts and their proof land with the data they describe
            _reconcile(client, wh, summary)
        wh.finish_refresh(
            requests=spent,
            months_checked=summary.months_checked,
            # an incremental refresh that turned full (the timezone changed, nothing local)
            mode="full" if summary.mode == "full" else None,
        )
    return summary


def _outbox(wh: Warehouse, published: Path, summary: RefreshSummary) -> None:
    found = writeback_confirm.after_refresh(wh.con, published, wh.refresh_id or "")
    if found is not None:
        summary.outbox_confirmed, summary.outbox = found


def _reconcile(client: ApiClient, wh: Warehouse, summary: RefreshSummary) -> None:
    before = _snapshot_counts(client)
    outcome = reconcile(wh.con, source="refresh", client=client, refresh_id=wh.refresh_id)
    for endpoint, n in _spent(client, before).items():  # confirmation requests, if any
        summary.requests[endpoint] = summary.requests.get(endpoint, 0) + n
        summary.requests_total += n
    counts = outcome.counts()
    summary.verdict = outcome.verdict
    summary.recon_id = outcome.recon_id
    summary.recon_checked = outcome.results.height
    summary.recon_explained, summary.recon_differ = counts["explained"], counts["differ"]
    summary.recon_seconds = outcome.seconds
    summary.marts = outcome.marts
    summary.differences = _short(outcome.differences.head(10))
    for (check,), part in outcome.results.group_by("check", maintain_order=True):
        summary.checks[str(check)] = {
            "checked": part.height,
            "explained": part.filter(pl.col("status") == "explained").height,
            "differ": part.filter(pl.col("status") == "differ").height,
            "first": _short(outcome.differences.filter(pl.col("check") == check).head(5)),
        }


def _short(differences: pl.DataFrame) -> list[dict[str, Any]]:
    return [{k: v for k, v in d.items() if k in DIFFERENCE_FIELDS} for d in differences.to_dicts()]


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
    return {k: v.requests for k, v in client.stats.endpoints.items()}


def _spent(client: ApiClient, before: dict[str, int]) -> dict[str, int]:
    out = {}
    for k, v in client.stats.endpoints.items():
        n = v.requests - before.get(k, 0)
        if n:
            out[k] = n
    return out


__all__ = [
    "DUCKDB_MEMORY",
    "Mode",
    "RefreshOptions",
    "RefreshSummary",
    "Refresher",
    "parse_month_range",
    "run_refresh",
]
