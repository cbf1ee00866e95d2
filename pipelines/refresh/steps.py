"""The steps of one refresh: ask the service and the warehouse, let the plan decide, read.

Plain Python over the extract client and the warehouse, so the Dagster assets, the CLI and the
tests all run the same code. Requests are the scarce resource: every step below is chosen to
spend the fewest of them (see docs/refresh.md for the request budget); the choices themselves
are plan.py's.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from centsync.extract import ApiClient, Me, SurfaceUnavailable
from centsync.pipelines.contract_book import ContractBook, load_pins
from centsync.pipelines.refresh import binding, learn, plan
from centsync.pipelines.refresh import fingerprints as fp
from centsync.pipelines.refresh.plan import Range, Window
from centsync.pipelines.refresh.read import RESUME_KEY, FirstSync, WindowRead, WindowReader
from centsync.pipelines.refresh.summary import RefreshOptions, RefreshSummary
from centsync.transform import bisection, shapes
from centsync.transform.calendar import contiguous, month_key, parse_month
from centsync.warehouse import SettingsResult, Warehouse
from centsync.warehouse import reads as warehouse_reads
from centsync.warehouse.fingerprints import local_spending_by_month, local_totals

log = logging.getLogger("centsync.refresh")

# the far end of a range open above: later than any booked_at
FAR_FUTURE = dt.date(2999, 12, 31)


class Refresher:
    """Runs one refresh of `warehouse` (a working copy) from `client`."""

    def __init__(
        self,
        client: ApiClient,
        warehouse: Warehouse,
        options: RefreshOptions,
        *,
        me: Me | None = None,
        source: str = "",
        written_months: Sequence[dt.date] = (),
        ledger_final: Callable[[], None] | None = None,
    ) -> None:
        self.me = me
        # called once the ledger is read and landed, before the accounts and aggregates
        self.ledger_final = ledger_final
        self.source = source
        self.client = client
        self.warehouse = warehouse
        self.options = options
        # months the write-back changed on the service and no refresh has read since: re-read
        # even where the fingerprints cannot see the change
        self.written_months = list(written_months)
        self.summary = RefreshSummary(refresh_id=warehouse.refresh_id or "", source=source)
        # the service's answers, landed in server.* for reconciliation
        self.summaries: list[dict[str, Any]] = []
        self.history: plan.HistoryPlan | None = None  # the cost-based plan, when one was made
        self.spendings: list[dict[str, Any]] = []
        # how each answer the API document leaves "not shown" is read (ops.contract)
        self.book = ContractBook(
            warehouse.contract_rows(),
            load_pins(options.contract_file),
            warehouse.refresh_number(),
        )
        client.async_client.reading = self.book.reading
        self.started: learn.Start | None = None  # the service's clock and settings, at the start
        # a first sync stopped before its end (read on from where it stopped), when one was
        self.resume = FirstSync.from_json(warehouse.get_meta(RESUME_KEY))
        self.reader = WindowReader(
            client,
            warehouse,
            batch_pages=plan.batch_pages(me.minute_limit if me is not None else 0),
            progress=options.progress,
        )

    # ---- the steps ---------------------------------------------------------------------------
    def run(self) -> RefreshSummary:
        """Every step, in order; returns what the refresh did."""
        started = time.monotonic()
        me = self.me or self.client.me()
        self._note_owner(me)
        previous = {
            "timezone": self.warehouse.get_meta("timezone"),
            "currency": self.warehouse.get_meta("source.currency"),
        }
        started_with = self.started = learn.start(self.client, self.book, previous)
        row = started_with.settings_row(self.book, None) if started_with.currency else None
        if row is not None:
            settings_result = self.warehouse.snapshot_settings(row)
        else:  # a first refresh lands them with the accounts' currency, after the ledger
            settings_result = SettingsResult(previous["timezone"], started_with.timezone)
        self.summary.timezone = started_with.timezone
        self._bind(me.account_id, started_with.currency or "", started_with.timezone)
        # "Today" is the service's, read off net worth's as_of, in the settings timezone.
        now = started_with.now
        # every month read is verified at the service's "now", and the versions this refresh
        # sees are valid from it (history.refresh_clock)
        self.warehouse.note_service_clock(now)
        today = started_with.today
        hot_start = plan.hot_window_start(today, self.options.hot_months)
        self.summary.asked = "months" if self.options.months is not None else self.options.mode
        self.summary.mode, self.summary.reason = plan.choose_mode(
            forced=self.options.months,
            requested=self.options.mode,
            timezone_changed=settings_result.timezone_changed,
            previous_timezone=settings_result.previous_timezone,
            timezone=settings_result.timezone,
            has_local_rows=bool(self.warehouse.months_present()),
            resuming=self.resume is not None,
        )
        if self.summary.reason != plan.FIRST_SYNC_RESUMED:
            self.resume = None
        if self.options.months is not None:
            self._read([plan.forced_window(self.options.months)], reason="forced")
        elif self.summary.mode == "full":
            self._full(today, hot_start)
        else:
            self._incremental(today, hot_start, now)
        if self.ledger_final is not None:
            self.ledger_final()
        # Snapshots and aggregates after the ledger: balances then include every row the
        # ledger read saw. They are independent of each other: asked for at once.
        self._after_ledger(today)
        oldest = self.warehouse.verification_order().filter(pl.col("month") < month_key(hot_start))
        if oldest.height and oldest.item(0, "verified_at") is not None:
            self.summary.oldest_verified = oldest.item(0, "verified_at").date().isoformat()
        self.summary.seconds = time.monotonic() - started
        return self.summary

    def _note_owner(self, me: Me) -> None:
        """Whose data this is, and the key's expiry (a warning when it is soon)."""
        self.summary.owner = me.account_id
        expires = me.key_expires_at
        self.summary.key_expires_at = expires.isoformat() if expires else None
        warning = plan.key_warning(expires, dt.datetime.now(dt.UTC))
        if warning is not None:
            self.summary.warnings.append(warning)

    def _incremental(self, today: dt.date, hot_start: dt.date, now: dt.datetime) -> None:
        """Prove the history by fingerprints (not in `hot` mode), read back what the write-back
        changed, verify the months verified longest ago, and read the hot window."""
        incremental = self.summary.mode == "incremental"
        if incremental and not self._provable():
            # not learned yet (a first sync stopped before the end): learned on a month read
            # whole (4 requests); else the history is re-read instead of proven
            learn.from_a_month(self.client, self.warehouse, self.book, hot_start)
        if incremental and not self._provable():
            self.summary.reason = learn.why_not_provable(self.book)
            self._full(today, hot_start)
            return
        if incremental:
            history = self._history_plan(hot_start, now)
            if history.everything:
                self._read_everything(history, today, hot_start)
                return
            try:
                self._follow(history)
            except SurfaceUnavailable as exc:  # its shape changed since the last refresh
                self.summary.reason = f"{exc}: the history is re-read instead of proven"
                self._full(today, hot_start)
                return
        for window in plan.written_windows(self.written_months, hot_start):
            self._read([window], reason="written back")
        if incremental:
            self._verify_oldest(hot_start, now)
        self._read([(hot_start, None)], reason="hot window")

    def _verify_oldest(self, hot_start: dt.date, now: dt.datetime) -> None:
        """Rolling verification: re-read the months verified longest ago (DESIGN 2, docs/refresh.md).

        Some edits change no aggregate the API offers (a date moved within its month, a renamed
        income, two amounts swapped within one merchant). Every month is re-read at least once
        per ``verify_days`` of the service's clock: a month older than that is always read, and
        each refresh reads the oldest others within its page budget (plan.verification_budget).
        """
        if self.options.verify_days <= 0:
            return
        period = dt.timedelta(days=self.options.verify_days)
        order = self.warehouse.verification_order()
        months = order.filter(pl.col("month") < month_key(hot_start))
        if months.height == 0:
            return
        last = self.warehouse.get_meta("verify.last_at")
        budget = plan.verification_budget(
            int(months.get_column("rows").sum()),
            least_pages=self.options.verify_pages,
            last_at=dt.datetime.fromisoformat(last) if last else None,
            now=now,
            period=period,
        )
        chosen = plan.months_to_verify(
            months.iter_rows(), budget=budget, due_before=now - period, read=self._months_read()
        )
        self.warehouse.set_meta("verify.last_at", now.isoformat())
        for window in plan.month_windows(chosen):
            self._read([window], reason="verification (verified longest ago)")
        self.summary.months_verified = len(chosen)

    def _bind(self, account_id: str, currency: str, timezone: str) -> None:
        """Record the warehouse's source (its first binding time is kept)."""
        if not self.source:
            return
        first = self.warehouse.get_meta("source.bound_at")
        values = binding.meta(self.source, account_id, currency, timezone)
        if first:
            values.pop("source.bound_at", None)
        self.warehouse.set_metas({**values, "key.expires_at": self.summary.key_expires_at})

    def _full(self, today: dt.date, hot_start: dt.date) -> None:
        """Read the whole ledger in a few big windows, then prove it against the server's totals.

        Windows are not verified one by one (a summary request each): the whole-ledger summary
        before and after the read must both equal the rows landed. If the server changed while
        it was read, the per-year fingerprints find the years that moved and those are re-read.
        """
        before = learn.summary(self.client) if self._provable() else None
        total = before.count if before is not None else learn.list_total(self.client)
        self.warehouse.refresh_settings(single_thread=plan.single_thread(total))
        if self.options.expect is not None:
            self.options.expect(total)
        # a first sync is read on by the next refresh from where a stop leaves it (read.py)
        first = self.summary.reason == plan.FIRST_SYNC
        if self.resume is None:
            self._forget_resume()  # a full read from the start: where one stopped is moot
        # a first sync's windows land under a lower DuckDB limit (plan.WINDOW_MEMORY)
        landing = first or self.resume is not None
        lower = plan.window_memory(self.options.duckdb_memory) if landing else None
        if lower is not None:
            self.warehouse.refresh_settings(memory=lower)
        if total == 0:
            self._replace_everything_with_nothing()
        elif self.resume is not None:
            windows, planned = self.resume.rest()
            self._read(windows, reason=self.resume.reason, planned=planned, verify=False,
                       first_sync=self.resume)  # fmt: skip
            self._empty_uncovered(self.resume.planned)
        elif total <= plan.WINDOW_ROWS:
            # A small ledger is one window: no dates needed, one partial page in all.
            sync = FirstSync([(None, None)], reason=self.summary.reason) if first else None
            self._read([(None, None)], reason=self.summary.reason, verify=False, first_sync=sync)
        else:
            self._read_packed(today, first=first)
        if lower is not None:  # the refresh's own limit for what follows
            self.warehouse.refresh_settings(memory=self.options.duckdb_memory)
        self._forget_resume()  # read whole
        local = local_totals(self.warehouse.con, None, FAR_FUTURE)
        if before is not None:
            after = self._whole_summary()
            moved = after is None or {
                (before.count, before.income, before.expense, before.transfer),
                (after.count, after.income, after.expense, after.transfer),
            } != {local}
        else:  # the totals are learned from the rows just read (the same request as a proof)
            moved, whole = learn.moved(self.client, self.book, self.warehouse, total)
            if whole is not None:
                self._record_summary("all", None, None, whole)
        if moved and before is None:
            log.info("the ledger's count moved while it was read: reading it again")
            self.summary.reason += "; changed during the read, read again"
            if total <= plan.WINDOW_ROWS:
                self._read([(None, None)], reason="changed during the read", verify=False)
            else:
                self._read_packed(today)
        elif moved:
            log.info("the ledger changed while it was read: checking every year's fingerprint")
            self.summary.reason += "; changed during the read, repaired by fingerprints"
            present = self.warehouse.months_present()
            if present:
                self._check_history(present, hot_start)
            self._read([(hot_start, None)], reason="hot window")

    def _read_packed(self, today: dt.date, *, first: bool = False) -> None:
        """A big ledger: windows packed from its span, then local months none covered emptied
        (`first`: a first sync's)."""
        span = fp.span(self.client)
        if span is None:
            self._replace_everything_with_nothing()
            return
        oldest, newest, total = span
        windows = plan.pack(oldest, max(newest, today), total)
        planned: list[Window] = list(windows)
        reading = plan.open_ends(windows)
        sync = (
            FirstSync(reading, planned, reason=self.summary.reason, rows=total) if first else None
        )
        self._read(
            reading, reason=self.summary.reason, planned=planned, verify=False, first_sync=sync
        )
        self._empty_uncovered(planned)

    def _forget_resume(self) -> None:
        if self.warehouse.get_meta(RESUME_KEY) is not None:
            self.warehouse.set_meta(RESUME_KEY, None)
        self.resume = None

    def _empty_uncovered(self, windows: Sequence[Window] | None) -> None:
        """Empty the local months no packed window covered and this refresh did not read."""
        if not windows:  # one window, open both ends: it covered every month
            return
        seen = plan.months_covered((lo, hi) for lo, hi in windows if lo and hi)
        read = self._months_read()
        stale = [
            m
            for m in self.warehouse.months_present()
            if parse_month(m) not in seen and not plan.already_read(m, read)
        ]
        if stale:
            self.warehouse.replace_months(stale, self._empty(), reason=self.summary.reason)

    def _whole_summary(self) -> Any:
        whole = learn.summary(self.client)
        if whole is not None:
            self._record_summary("all", None, None, whole)
        return whole

    def _provable(self) -> bool:
        """Whether the service's totals and spending can be read (learned from the data, or
        pinned): else a range is counted with the list's total and re-read, not proven."""
        book = self.book
        return book.complete(shapes.TRANSACTIONS_SUMMARY) and book.complete(shapes.SPENDING)

    def _record_summary(
        self, scope: str, lo: dt.date | None, hi: dt.date | None, summary: Any
    ) -> None:
        """Keep a fetched summary for server.transactions_summary."""
        sums = {k: getattr(summary, k) for k in ("count", "income", "expense", "transfer", "net")}
        self.summaries.append({"scope": scope, "from": lo, "to": hi, **sums})

    def _check_history(self, present: list[str], hot_start: dt.date) -> None:
        """Fingerprints of every part of the history before the hot window (the plan's parts,
        each proven: a year that holds rows, or a run of years that hold none); drill into
        parts that differ."""
        parts = plan.plan_history(
            self.warehouse.verification_order().iter_rows(),
            hot_start,
            share=0.0,
            due_before=dt.datetime.min.replace(tzinfo=dt.UTC),
            plan="fingerprints",
            verify_pages=-1,
        ).parts
        self._prove([(p.label, p.range) for p in parts], parse_month(present[0]))

    def _prove(self, parts: list[tuple[str, Range]], first_local: dt.date) -> None:
        """Prove parts of the history by their fingerprints, all asked for at once (one round
        trip); a part that differs is re-read whole when that is cheaper than drilling into its
        months, else only its differing months are."""
        found = self._fingerprints([part_range for _, part_range in parts], "year")
        for (label, part_range), server in zip(parts, found, strict=True):
            months = plan.month_ranges(part_range, first_local)
            self.summary.months_checked += len(months)
            if server == fp.local(self.warehouse.con, *part_range):
                continue
            count = server[0][0]
            # Locating the difference costs a few requests per halving; re-reading, the pages.
            # Years that held nothing locally are read whole: what the service holds there is
            # all new.
            if plan.is_gap(part_range) or plan.read_rather_than_bisect(count, len(months)):
                if self.options.expect is not None:
                    self.options.expect(count)
                self._read([part_range], reason=f"year {label} differs")
                continue
            self._locate(label, months, server)

    def _locate(self, label: str, months: list[Range], server: fp.Fingerprint) -> None:
        """Find the months of a differing part and re-read them: spending by month first when
        its expenses differ (one request places every changed expense), then bisection on what
        still differs (one request per differing component and halving; the other half is the
        difference). Should the part still differ after that, it is re-read whole."""
        lo, hi = plan.span(months)
        local = fp.local(self.warehouse.con, lo, hi)
        if server[0][0] != local[0][0] or server[0][2] != local[0][2]:  # count or expenses
            found = plan.spending_months(
                months,
                fp.server_spending_by_month(self.client, lo, hi),
                local_spending_by_month(self.warehouse.con, lo, hi),
            )
            for window in contiguous(found):
                self._read([window], reason=f"month differs in {label}")
        self._bisect(label, months, server)
        if fp.local(self.warehouse.con, lo, hi) != server:
            self._read([(lo, hi)], reason=f"year {label} differs")

    def _bisect(self, label: str, months: list[Range], server: fp.Partial) -> None:
        """Re-read the months of `months` whose rows differ from `server` (their fingerprint,
        the components known): the one halving search (transform/bisection.py) asking for the
        differing components' fingerprints, a run of months read whole when that costs no
        more (plan.read_rather_than_bisect). Each is read as it is found, before the next."""
        for found in bisection.locate(
            months,
            server,
            differs=lambda part, there: fp.differing(
                there, fp.local(self.warehouse.con, *plan.span(part))
            ),
            ask=lambda older, parts: fp.server_parts(self.client, *plan.span(older), parts),
            rest=fp.subtract,
            settle=lambda part, there, parts: plan.read_rather_than_bisect(
                there[0][0] if there[0] is not None else None, len(part), len(parts)
            ),
            cost=len,
        ):
            self._read([plan.span(found.leaves)], reason=f"month differs in {label}")

    # ---- the cost-based plan (issue 26) ------------------------------------------------------
    def _history_plan(self, hot_start: dt.date, now: dt.datetime) -> plan.HistoryPlan:
        """The plan of this incremental refresh, priced from the local months (no request)."""
        months = list(self.warehouse.verification_order().iter_rows())
        last = self.warehouse.get_meta("verify.last_at")
        self.history = history_plan(months, last, self.options, hot_start=hot_start, now=now)
        return self.history

    def _read_everything(
        self, history: plan.HistoryPlan, today: dt.date, hot_start: dt.date
    ) -> None:
        """Every part of the history costs no more to re-read than to prove: read the whole
        ledger as a first sync does (exact at once, and no dearer than one)."""
        rows = history.hot_rows + sum(p.rows for p in history.parts)
        self.summary.reason = (
            f"re-reading everything is cheapest (about {-(-rows // plan.PAGE)} pages)"
        )
        self._full(today, hot_start)

    def _follow(self, history: plan.HistoryPlan) -> None:
        """Re-read the parts that are cheapest to read, prove the others by fingerprints."""
        for window in history.read_windows():
            self._read([window], reason="cheaper to re-read than to prove")
        proven = history.proven()
        if proven:
            first = proven[0].range[0] or parse_month(self.warehouse.months_present()[0])
            self._prove([(p.label, p.range) for p in proven], first)

    def _fingerprints(self, ranges: list[Range], scope: str) -> list[fp.Fingerprint]:
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
        windows: Sequence[Window],
        *,
        reason: str,
        planned: Sequence[Window] | None = None,
        verify: bool = True,
        first_sync: FirstSync | None = None,
    ) -> None:
        """Read windows (read.py) and account for them in the summary."""
        for window in self.reader.read(
            windows, reason=reason, planned=planned, verify=verify, first_sync=first_sync
        ):
            self._account(window)

    def _account(self, window: WindowRead) -> None:
        self.summary.floor += window.floor
        self.summary.rereads += window.rereads
        if window.changed is not None:
            self.summary.months_reread.append(
                {
                    "from": window.months[0],
                    "to": window.months[-1],
                    "months": len(window.months),
                    "rows": window.rows,
                    "changed": window.changed,
                    "reason": window.reason,
                }
            )

    def _months_read(self) -> list[tuple[str, str]]:
        """The (first, last) month ranges this refresh has read whole so far."""
        return [(r["from"], r["to"]) for r in self.summary.months_reread]

    def _empty(self) -> pl.DataFrame:
        from centsync.extract import TRANSACTION_SCHEMA

        return pl.DataFrame(schema=TRANSACTION_SCHEMA)

    def _replace_everything_with_nothing(self) -> None:
        present = self.warehouse.months_present()
        if present:
            self.warehouse.replace_months(
                present, self._empty(), reason="the server has no transactions"
            )

    def _after_ledger(self, today: dt.date) -> None:
        """Accounts, connections, sync status and the service's own aggregates (landed for
        reconciliation), every request made at once; each "not shown" answer learned or
        re-checked against the rows and accounts just landed (refresh/learn.py)."""
        first, last = warehouse_reads.booked_range(self.warehouse.con)
        lo = first or today
        hi = max(last or today, today)
        book = self.book
        whole = not any(r["scope"] == "all" for r in self.summaries)
        # every request at once, the sync status's once the connections are read (it is
        # learned from them): two round trips, not three; each answer learned once all are in
        accounts, (connections, sync), *asked = self.client.gather(
            lambda a: a.accounts(),
            learn.connections_then_sync(book),
            *learn.aggregate_calls((lo, hi), whole),
        )
        found = learn.aggregates(
            self.client,
            self.warehouse,
            book,
            accounts,
            self.started.net_worth if self.started else ({}, "{}"),
            (lo, hi),
            asked,
        )
        self.spendings.extend(found.spendings)
        if found.whole is not None:
            self._record_summary("all", None, None, found.whole)
        started = self.started
        if started is not None and started.currency is None:  # first refresh: the accounts'
            row = started.settings_row(book, found.currency)
            if row is not None:
                self.warehouse.snapshot_settings(row)
            self.warehouse.set_metas({"source.currency": started.currency or ""})
        with self.warehouse.together():  # what the answers say lands whole, in one commit
            self.warehouse.snapshot_accounts(accounts)
            if connections is not None:
                self.warehouse.snapshot_connections(connections)
            if sync is not None:
                self.warehouse.snapshot_sync_status(sync)
            if found.accounts_summary is not None:
                self.warehouse.load_accounts_summary(found.accounts_summary)
            if found.net_worth is not None:
                self.warehouse.load_net_worth(found.net_worth)
            self.warehouse.load_transactions_summaries(self.summaries)
            self.warehouse.load_spending(self.spendings)
            learn.land_unread(self.warehouse, book)
        self.summary.contract = {
            "unavailable": book.unavailable(),
            "notes": list(book.notes),
        }
        self.summary.warnings.extend(book.notes)
        self.summary.transactions = warehouse_reads.transaction_count(self.warehouse.con)


def history_plan(
    months: list[tuple[str, int, dt.datetime | None]],
    last_verified_at: str | None,
    options: RefreshOptions,
    *,
    hot_start: dt.date,
    now: dt.datetime,
) -> plan.HistoryPlan:
    """The cost-based plan of an incremental refresh at the service's `now`, from the local
    months (month, rows, verified_at) and when rolling verification last ran (ISO, or None)."""
    period = dt.timedelta(days=options.verify_days)
    verifying = options.verify_days > 0
    last = dt.datetime.fromisoformat(last_verified_at) if last_verified_at else None
    return plan.plan_history(
        months,
        hot_start,
        share=plan.verification_share(last, now, period) if verifying else 0.0,
        due_before=now - period if verifying else dt.datetime.min.replace(tzinfo=dt.UTC),
        plan=options.plan,
        verify_pages=options.verify_pages if verifying else -1,
    )
