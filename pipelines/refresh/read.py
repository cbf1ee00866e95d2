"""The streaming read-and-commit loop: read windows drift-safely, replace exactly their months.

A window streams: each parsed batch of pages is validated and staged in DuckDB while the next
pages are read; the window's months are replaced in one transaction once the read is accepted.
Memory holds a few batches, not a window. Ctrl-C or SIGTERM keeps the months read whole.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from centsync.extract import ApiClient, NotFound, WindowRows, WindowStream, WindowVoid
from centsync.pipelines.refresh import plan
from centsync.pipelines.refresh.plan import PAGE, Window
from centsync.warehouse import Warehouse
from centsync.warehouse.ledger import TransactionStage
from centsync.warehouse.session import is_interrupt, resumable
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
    ) -> list[WindowRead]:
        """Read `windows` in order and replace the months each covers (`planned`: the windows'
        month bounds when the ones read are open-ended); the next window is read while one
        commits (DuckDB releases the GIL)."""
        done: list[WindowRead] = []
        stream = self._open(windows[0], verify) if windows else None
        for i, window in enumerate(windows):
            assert stream is not None
            with self.warehouse.stage_transactions() as stage, stream:
                rows, rereads, conflicts = self._stage(stream, stage, reason)
                stream = self._open(windows[i + 1], verify) if i + 1 < len(windows) else None
                try:
                    lo, hi = planned[i] if planned is not None else window
                    self._fetch_alone(conflicts, stage, lo, hi)
                    months = self._months(lo, hi, stage)
                    result = stage.commit(months, reason=reason) if months else None
                except BaseException:
                    if stream is not None:
                        stream.close()
                    raise
            changed = result.changed if result is not None else None
            done.append(WindowRead(months, rows, rereads, changed, reason))
            self._after_window(months)
        return done

    def _open(self, window: Window, verify: bool) -> WindowStream:
        return self.client.stream_window(
            window,
            concurrency=PAGE_CONCURRENCY,
            verify=verify,
            depth=STREAM_DEPTH,
            batch_pages=self.batch_pages,
        )

    def _stage(
        self, stream: WindowStream, stage: TransactionStage, reason: str
    ) -> tuple[int, int, set[str]]:
        """Stage the window's batches as they arrive; (rows, rereads, ids sent twice with
        different content) of the accepted read."""
        rows = rereads = 0
        conflicts: set[str] = set()
        try:
            for event in stream:
                if isinstance(event, WindowRows):
                    conflicts.update(conflicting_ids("transactions", event.frame))
                    stage.add(event.frame)
                    rows += event.frame.height
                    self._report("", event.frame.height)
                elif isinstance(event, WindowVoid):
                    stage.reset()
                    conflicts.clear()
                    rereads += 1
                    self._report("", -rows)
                    rows = 0
        except BaseException as exc:
            if not (is_interrupt(exc) or resumable(exc)):
                raise
            # stopped mid-window (a signal, or a service that stopped answering for now): the
            # months read whole are kept (the next refresh's fingerprints prove or re-read them)
            if stage.commit_complete(reason=f"{reason} (interrupted)") is not None:
                log.warning("stopped: kept the months read completely")
            if isinstance(exc, KeyboardInterrupt) or not is_interrupt(exc):
                raise
            raise KeyboardInterrupt("a query was interrupted") from exc
        return rows, rereads, conflicts

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
