"""The streaming read-and-commit loop: read windows drift-safely, replace exactly their months.

A window streams: each parsed batch of pages is validated and staged in DuckDB while the next
pages are read; the window's months are replaced in one transaction once the read is accepted.
Memory holds a few batches, not a window. Ctrl-C or SIGTERM keeps the months read whole.

A first sync keeps every page it read when it stops (a spent allowance, Ctrl-C), and records
where it stood (`FirstSync`, in ops.meta): the next refresh reads on from the next page of
the window it stopped in, the month it stopped inside staged again from the rows kept, so no
page is read twice whatever the allowances (docs/reliability.md).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import polars as pl

from centsync.extract import (
    ApiClient,
    NotFound,
    WindowRows,
    WindowStream,
    WindowVoid,
    transactions_from_payloads,
)
from centsync.pipelines.refresh import plan
from centsync.pipelines.refresh.plan import PAGE, Window
from centsync.transform.calendar import month_key, months_between, parse_month
from centsync.warehouse import Warehouse
from centsync.warehouse import reads as warehouse_reads
from centsync.warehouse.ledger import TransactionStage
from centsync.warehouse.session import checkpoint, is_interrupt, resumable
from centsync.warehouse.validation import conflicting_ids

log = logging.getLogger("centsync.refresh")

# List requests in flight while reading one window (2-3 measured fastest against one server core).
PAGE_CONCURRENCY = 3
STREAM_DEPTH = 1
PUBLISH_EVERY_S = 30.0

# (months, rows): rows after each batch staged (negative when a window is voided), then the
# window's months ("YYYY-MM..YYYY-MM") with 0 once it is committed
Progress = Callable[[str, int], None]


@dataclass(frozen=True)
class WindowRead:
    """What reading one window did."""

    months: list[str]  # the months it replaced ('YYYY-MM'), empty when none
    rows: int  # rows of the accepted read
    rereads: int  # times the window was read again (it drifted while read)
    changed: int | None  # rows the commit changed; None when nothing was committed
    reason: str

    @property
    def floor(self) -> int:
        """The fewest list requests that could have read it."""
        return math.ceil(self.rows / PAGE) if self.rows else 1


# ops.meta key of a first sync that has not finished (FirstSync as JSON)
RESUME_KEY = "resume.first_sync"


def _window_json(windows: Sequence[Window]) -> list[list[str | None]]:
    return [[d.isoformat() if d is not None else None for d in w] for w in windows]


def _window_dates(windows: list[list[str | None]]) -> list[Window]:
    lo_hi = [[dt.date.fromisoformat(d) if d else None for d in w] for w in windows]
    return [(lo, hi) for lo, hi in lo_hi]


@dataclass(frozen=True)
class FirstSync:
    """A first sync's plan and where it stands: its windows as read (`planned`: their month
    bounds, when the ones read are open-ended) and, once stopped, the window it stopped in
    (`index`), the pages of it kept (`page`), the total its first page said, and the month
    the stop fell inside (its rows kept so far are staged again when it resumes)."""

    windows: list[Window]
    planned: list[Window] | None = None
    index: int = 0
    page: int = 0
    total: int | None = None
    month: str | None = None
    reason: str = "first sync"
    rows: int | None = None  # the ledger's rows when the windows were packed

    def to_json(self) -> str:
        out: dict[str, Any] = asdict(self)
        out["windows"] = _window_json(self.windows)
        out["planned"] = _window_json(self.planned) if self.planned is not None else None
        return json.dumps(out)

    @staticmethod
    def from_json(text: str | None) -> FirstSync | None:
        """The stored plan; None when there is none or it cannot be read (a full read then)."""
        if not text:
            return None
        try:
            d = json.loads(text)
            return FirstSync(
                windows=_window_dates(d["windows"]),
                planned=_window_dates(d["planned"]) if d.get("planned") else None,
                index=int(d["index"]),
                page=int(d["page"]),
                total=d.get("total"),
                month=d.get("month"),
                reason=str(d.get("reason") or "first sync"),
                rows=int(d["rows"]) if d.get("rows") is not None else None,
            )
        except (ValueError, KeyError, TypeError):
            return None

    def rest(self) -> tuple[list[Window], list[Window] | None]:
        """The windows still to read (the one it stopped in first) and their month bounds."""
        planned = self.planned[self.index :] if self.planned is not None else None
        return self.windows[self.index :], planned


def _repack(
    i: int,
    stage: TransactionStage,
    landed: int,
    windows: list[Window],
    planned: list[Window],
    sync: FirstSync,
) -> FirstSync:
    """Pack a first sync's windows after the i-th again from the rows each month of the i-th
    held (`plan.repack`; `landed`: the rows committed before it), in `windows` and `planned`;
    the sync's stored plan follows (`sync.index` is the i-th window's). Not the last window."""
    ((lo, hi),) = _bounded(planned[i : i + 1])
    month_rows = stage.month_rows(months_between(lo, hi))
    left = sync.rows - landed - stage.rows if sync.rows is not None else None
    rest: list[Window] = list(plan.repack(_bounded(planned[i + 1 :]), month_rows, left))
    if rest == planned[i + 1 :]:
        return sync
    # the same months, the last window still open above when it was
    reading: list[Window] = [*rest[:-1], (rest[-1][0], windows[-1][1])]
    planned[i + 1 :], windows[i + 1 :] = rest, reading
    log.info(
        "windows packed again from %d rows a month: %d to read",
        sum(month_rows) // len(month_rows),
        len(rest),
    )
    done = sync.index + 1
    return replace(
        sync,
        windows=[*sync.windows[:done], *reading],
        planned=[*sync.planned[:done], *rest] if sync.planned is not None else None,
    )


def _next_window(sync: FirstSync | None) -> FirstSync | None:
    """Where a first sync stands once the window being read commits: the next one's page 1."""
    if sync is None:
        return None
    return replace(sync, index=sync.index + 1, page=0, total=None, month=None)


def _bounded(windows: Sequence[Window]) -> list[tuple[dt.date, dt.date]]:
    out = [(lo, hi) for lo, hi in windows if lo is not None and hi is not None]
    assert len(out) == len(windows), "a packed window has month bounds"
    return out


@dataclass
class _Stop:
    """Where the pass being staged stands: its last page staged, the total its first page
    said, the month of its last row, and whether it still continues a stopped read."""

    page: int = 0
    total: int | None = None
    month: str | None = None
    resumed: bool = False


class WindowReader:
    """Reads windows from `client` into `warehouse`, publishing progress on long reads."""

    def __init__(
        self,
        client: ApiClient,
        warehouse: Warehouse,
        *,
        batch_pages: int,
        progress: Progress | None = None,
    ) -> None:
        self.client = client
        self.warehouse = warehouse
        self.batch_pages = batch_pages
        self.progress = progress
        self.published_at = time.monotonic()

    def read(
        self,
        windows: Sequence[Window],
        *,
        reason: str,
        planned: Sequence[Window] | None = None,
        verify: bool = True,
        first_sync: FirstSync | None = None,
    ) -> list[WindowRead]:
        """Read `windows` in order and replace the months each covers (`planned`: the windows'
        month bounds when the ones read are open-ended); the next window is read while one
        commits (DuckDB releases the GIL).

        `first_sync`: the windows are (the rest of) a first sync's, read on from where it
        stopped; where it stands is kept in ops.meta as each window commits, and on a stop.
        """
        done: list[WindowRead] = []
        # lists of this read's own: a first sync's windows still to read are packed again as
        # each is read (`_repack`), in place, so the loop below reads the new ones
        windows, planned = list(windows), list(planned) if planned is not None else None
        sync = first_sync
        stop = self._resume_point(sync)
        if sync is not None:  # a stop from here on is read on by the next refresh
            self.warehouse.set_meta(RESUME_KEY, sync.to_json())
        stream = self._open(windows[0], verify, stop) if windows else None
        for i, window in enumerate(windows):
            assert stream is not None
            with self.warehouse.stage_transactions() as stage, stream:
                # a stopped read's month: its rows kept are staged again; the newer are kept
                newest = stop.month if stop.resumed else None
                if newest is not None:
                    self._stage_kept(stage, newest)
                rows, rereads, conflicts = self._stage(stream, stage, reason, sync, stop)
                following = _Stop()
                stream, committed = None, False
                try:
                    if sync is not None and planned and i + 1 < len(planned) and not stop.resumed:
                        landed = warehouse_reads.transaction_count(self.warehouse.con)
                        sync = _repack(i, stage, landed, windows, planned, sync)
                    if i + 1 < len(windows):
                        stream = self._open(windows[i + 1], verify, following)
                    lo, hi = planned[i] if planned is not None else window
                    self._fetch_alone(conflicts, stage, lo, hi)
                    months = self._months(lo, hi, stage)
                    if stop.resumed and newest is not None:  # not voided since
                        months = [m for m in months if m <= newest]
                    # a first sync's next resume point commits with the window's rows: a stop
                    # between the two would read the window again
                    after = _next_window(sync)
                    meta = {RESUME_KEY: after.to_json()} if after is not None else None
                    result = stage.commit(months, reason=reason, meta=meta) if months else None
                    committed = True
                    if meta is not None:
                        sync = after
                        if result is None:  # nothing to commit: the point alone
                            self.warehouse.set_metas(meta)
                        # the window's rows to the file now: DuckDB holds what it loaded in
                        # memory until a checkpoint, so a first sync's memory grew with the
                        # ledger (the publish's checkpoint then has as much less to do)
                        checkpoint(self.warehouse.con)
                        # and on to the disk while the next window is read: the publish's
                        # fsync then has little left to write
                        self.warehouse.flush_ahead()
                except BaseException as exc:
                    if stream is not None:
                        stream.close()
                    # stopped before the window committed: what it read is kept, as a stop
                    # in its read keeps it (a commit a stop interrupted was rolled back)
                    if not committed and self._kept_on_stop(exc, stage, reason, sync, stop):
                        raise KeyboardInterrupt("a query was interrupted") from exc
                    raise
            changed = result.changed if result is not None else None
            done.append(WindowRead(months, rows, rereads, changed, reason))
            self._after_window(months)
            stop = following
        return done

    @staticmethod
    def _resume_point(sync: FirstSync | None) -> _Stop:
        if sync is None or sync.page <= 0:
            return _Stop()
        return _Stop(sync.page, sync.total, sync.month, resumed=True)

    def _open(self, window: Window, verify: bool, stop: _Stop) -> WindowStream:
        return self.client.stream_window(
            window,
            concurrency=PAGE_CONCURRENCY,
            verify=verify,
            depth=STREAM_DEPTH,
            batch_pages=self.batch_pages,
            start_page=stop.page + 1 if stop.resumed else 1,
            expect_total=stop.total if stop.resumed else None,
            ahead_bytes=plan.WAIT_AHEAD_BYTES,
        )

    def _stage_kept(self, stage: TransactionStage, month: str) -> None:
        """Stage again the rows a stopped read kept of the month it stopped inside (from their
        payloads as sent: no request), so the month is replaced whole once read on."""
        payloads = warehouse_reads.month_payloads(self.warehouse.con, parse_month(month))
        if payloads:
            stage.add(transactions_from_payloads(payloads))

    def _stage(
        self,
        stream: WindowStream,
        stage: TransactionStage,
        reason: str,
        sync: FirstSync | None,
        stop: _Stop,
    ) -> tuple[int, int, set[str]]:
        """Stage the window's batches as they arrive; (rows, rereads, ids sent twice with
        different content) of the accepted read. `stop` follows where the pass stands."""
        rows = rereads = 0
        conflicts: set[str] = set()
        try:
            for event in stream:
                if isinstance(event, WindowRows):
                    conflicts.update(conflicting_ids("transactions", event.frame))
                    stage.add(event.frame)
                    rows += event.frame.height
                    stop.page, stop.total = event.page, event.total
                    if event.frame.height and event.frame.schema["booked_at"] == pl.Date:
                        stop.month = month_key(event.frame.get_column("booked_at")[-1])
                    self._report("", event.frame.height)
                elif isinstance(event, WindowVoid):
                    stage.reset()  # the rows kept before are staged again by no one: all
                    conflicts.clear()  # the window's months are replaced, from page 1
                    stop.page, stop.total, stop.month, stop.resumed = 0, None, None, False
                    rereads += 1
                    self._report("", -rows)
                    rows = 0
        except BaseException as exc:
            if self._kept_on_stop(exc, stage, reason, sync, stop):
                raise KeyboardInterrupt("a query was interrupted") from exc
            raise
        return rows, rereads, conflicts

    def _kept_on_stop(
        self,
        exc: BaseException,
        stage: TransactionStage,
        reason: str,
        sync: FirstSync | None,
        stop: _Stop,
    ) -> bool:
        """Keep what the window read when `exc` is a stop (a signal, DuckDB's interrupt of a
        query, a service that stopped answering for now); True when it is DuckDB's interrupt,
        to be raised as the KeyboardInterrupt it stands for."""
        if not (is_interrupt(exc) or resumable(exc)):
            return False
        self._keep(stage, reason, sync, stop)
        return is_interrupt(exc) and not isinstance(exc, KeyboardInterrupt)

    def _keep(
        self, stage: TransactionStage, reason: str, sync: FirstSync | None, stop: _Stop
    ) -> None:
        """Stopped mid-window (a signal, or a service that stopped answering for now).

        A first sync keeps every row staged (the months before the stop are empty locally)
        and where it stopped; any other read keeps the months read whole (the next refresh's
        fingerprints prove or re-read them)."""
        if sync is None:
            if stage.commit_complete(reason=f"{reason} (interrupted)") is not None:
                log.warning("stopped: kept the months read completely")
            return
        booked = stage.booked_range()
        at = {
            RESUME_KEY: replace(sync, page=stop.page, total=stop.total, month=stop.month).to_json()
        }
        if booked is not None:  # the rows and where they stop, together
            months = plan.window_months(booked[0], booked[1])
            stage.commit(months, reason=f"{reason} (stopped, read on by the next refresh)", meta=at)
        else:
            self.warehouse.set_metas(at)
        log.warning(
            "stopped: kept the %d page(s) read of window %d; the next refresh reads on from there",
            stop.page,
            sync.index + 1,
        )

    def _fetch_alone(
        self, ids: set[str], stage: TransactionStage, lo: dt.date | None, hi: dt.date | None
    ) -> None:
        """Stage what the service says each id sent twice with different content is.

        Validation rejected every copy (an impostor may come first or second on the page);
        ``GET /v1/transactions/{id}`` names the real row. The row whose own id was hidden is
        then missing, and counted against the server's summary with the rejected rows.
        """
        for tx_id in sorted(ids):
            try:
                tx = self.client.transaction(tx_id)
            except NotFound:
                continue  # deleted since: the window holds no such row
            if (lo is not None and tx.booked_at < lo) or (hi is not None and tx.booked_at > hi):
                continue  # moved out of the window since: the next refresh reads it there
            log.warning("id %s was sent twice with different content: landed it alone", tx_id)
            stage.add(tx.to_frame(notes=False))

    def _months(self, lo: dt.date | None, hi: dt.date | None, stage: TransactionStage) -> list[str]:
        """The months the window covers; the rows read and the local months fill open ends."""
        if lo is not None and hi is not None:
            return plan.window_months(lo, hi)
        return plan.window_months(lo, hi, stage.booked_range(), self.warehouse.months_present())

    def _after_window(self, months: list[str]) -> None:
        self._report(f"{months[0]}..{months[-1]}" if months else "", 0)
        if time.monotonic() - self.published_at > PUBLISH_EVERY_S:
            # A long first sync keeps what it read: a stopped refresh resumes from here.
            self.warehouse.publish_progress()
            self.published_at = time.monotonic()

    def _report(self, months: str, rows: int) -> None:
        if self.progress is not None:
            self.progress(months, rows)
