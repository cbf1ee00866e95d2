"""The drift-safe transaction reader: list pages, date windows, verified streaming reads."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import deque
from collections.abc import AsyncGenerator, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from ._errors import (
    DriftError,
)
from ._frames import (
    TRANSACTION_WIRE,
    PageChunk,
    cut_page,
    frame_from_chunks,
)
from ._models import SurfaceUnavailable, TransactionsSummary
from ._paging import (
    PAGE_LIMIT,
    Tally,
    TransactionBatch,
    Window,
    WindowCheck,
    WindowDone,
    WindowEvent,
    WindowReport,
    WindowRows,
    WindowVoid,
    group_windows,
    month_windows,
    split_window,
)
from ._requests import REQUESTS_PER_WINDOW, RequestCore
from ._transport import _as_date, _date_param

log = logging.getLogger("centsync.extract")

LIST_FILTERS = frozenset({"type", "account_id", "category_id", "expense_goal_id", "search", "sort"})
# Pages parsed together while a window is read: one NDJSON parse per batch, bodies then freed.
PARSE_BATCH_PAGES = 100
# Page requests started ahead of the page being awaited (the slots bound those in flight).
READ_AHEAD_PAGES = 16


@dataclass(frozen=True)
class _WindowTooBig:
    """Internal event: the window holds more than the reader may hold at once."""

    halves: list[Window]
    total: int


class WindowReader(RequestCore):
    """Reads of ``GET /v1/transactions``: pages, windows, and the drift-safe stream."""

    if TYPE_CHECKING:  # defined by AsyncApiClient (_client.py)

        async def transactions_summary(
            self,
            from_: dt.date | str | None = None,
            to: dt.date | str | None = None,
            **filters: str,
        ) -> TransactionsSummary: ...

    @staticmethod
    def _list_params(
        from_: dt.date | str | None, to: dt.date | str | None, filters: Mapping[str, str]
    ) -> dict[str, str | None]:
        unknown = set(filters) - LIST_FILTERS
        if unknown:
            raise TypeError(f"unknown transaction filter(s): {sorted(unknown)}")
        params: dict[str, str | None] = {"from": _date_param(from_), "to": _date_param(to)}
        params.update({k: str(v) for k, v in filters.items() if v is not None})
        return params

    async def transactions_page(
        self,
        page: int = 1,
        *,
        limit: int = PAGE_LIMIT,
        from_: dt.date | str | None = None,
        to: dt.date | str | None = None,
        raw: bool = True,
        **filters: str,
    ) -> tuple[pl.DataFrame, dict[str, Any]]:
        """One page of ``GET /v1/transactions`` and its envelope (total, page, pages)."""
        chunk = await self._list_page(page, limit, self._list_params(from_, to, filters))
        return frame_from_chunks([chunk], TRANSACTION_WIRE, raw=raw), chunk.envelope

    async def _list_page(
        self, page: int, limit: int, params: Mapping[str, str | None]
    ) -> PageChunk:
        response = await self.request(
            "GET", "/v1/transactions", params={**params, "page": str(page), "limit": str(limit)}
        )
        return cut_page(response.content)

    async def transaction_date_range(self, **filters: str) -> tuple[dt.date, dt.date] | None:
        """Oldest and newest ``booked_at`` matching the filters (two requests), or None."""
        params = self._list_params(None, None, filters)
        params["sort"] = "booked_at"
        newest = await self._list_page(1, 1, params)
        total = self._last_total = newest.total or 0
        if total == 0:
            return None
        oldest = await self._list_page(total, 1, params)
        dates = []
        for chunk in (oldest, newest):
            frame = frame_from_chunks([chunk], TRANSACTION_WIRE, raw=False)
            if frame.height == 0:  # the ledger shrank in between: read it all
                return None
            dates.append(frame.get_column("booked_at")[0])
        return dates[0], dates[1]

    async def read_transactions(
        self,
        windows: Iterable[tuple[dt.date | str | None, dt.date | str | None]],
        *,
        concurrency: int | None = None,
        raw: bool = True,
        verify: bool = True,
        **filters: str,
    ) -> AsyncGenerator[TransactionBatch, None]:
        """Read date windows drift-safely; yields one verified batch per (sub-)window, in order.

        A window whose ``total`` exceeds ``max_window_rows`` is halved by date (bounded windows
        only), so memory stays bounded by that size times ``concurrency``.
        """
        self._list_params(None, None, filters)  # reject unknown filters before any request
        async for batch in self._read_windows(windows, filters, concurrency, raw, verify):
            yield batch

    async def _read_windows(
        self,
        windows: Iterable[tuple[dt.date | str | None, dt.date | str | None]],
        filters: Mapping[str, str],
        concurrency: int | None,
        raw: bool,
        verify: bool,
    ) -> AsyncGenerator[TransactionBatch, None]:
        queue = deque((_as_date(a), _as_date(b)) for a, b in windows)
        width = max(1, concurrency or self.concurrency)
        # list requests in flight, shared by the windows: a lone window still uses every slot
        # two requests per window in flight: the next page is on its way while the client is
        # busy with the last one (measured 10-20 % faster than one per window at 1M rows)
        slots = asyncio.Semaphore(width * REQUESTS_PER_WINDOW)
        running: deque[asyncio.Task[list[TransactionBatch]]] = deque()

        def start_next() -> None:
            if queue:
                window = queue.popleft()
                running.append(
                    asyncio.create_task(
                        self._read_window(window, filters, raw, verify, None, slots)
                    )
                )

        try:
            for _ in range(width):
                start_next()
            while running:
                batches = await running.popleft()
                start_next()
                for batch in batches:
                    yield batch
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)

    async def read_all_transactions(
        self, *, raw: bool = True, verify: bool = True, **filters: str
    ) -> tuple[pl.DataFrame, list[WindowReport]]:
        """Every transaction matching the filters, read by calendar month, as one frame."""
        frames, reports = [], []
        windows = await self.default_windows(window_rows=20_000, **filters)
        self._list_params(None, None, filters)
        async for batch in self._read_windows(windows, filters, None, raw, verify):
            frames.append(batch.frame)
            reports.append(batch.report)
        if not frames:
            return frame_from_chunks([], TRANSACTION_WIRE, raw=raw), reports
        return pl.concat(frames, how="vertical", rechunk=True), reports

    async def default_windows(self, *, window_rows: int = 20_000, **filters: str) -> list[Window]:
        """Windows over the ledger's date range (two requests), open at both ends.

        Whole calendar months, several to a window when months are small, so that a window
        holds about ``window_rows`` rows: few partial pages and summaries, bounded memory.
        """
        span = await self.transaction_date_range(**filters)
        if span is None:
            return [(None, None)]
        months = month_windows(span[0], span[1], open_ends=True)
        total = self._last_total or 0
        per_window = max(1, window_rows * len(months) // max(total, 1))
        return group_windows(months, per_window)

    async def stream_window(
        self,
        window: tuple[dt.date | str | None, dt.date | str | None],
        *,
        raw: bool = True,
        verify: bool = True,
        concurrency: int | None = None,
        batch_pages: int | None = None,
        start_page: int = 1,
        expect_total: int | None = None,
        ahead_bytes: int = 0,
        **filters: str,
    ) -> AsyncGenerator[WindowEvent, None]:
        """Read one window drift-safely as a stream, for loaders that must not hold it whole.

        Yields ``WindowRows`` (a parsed batch of pages, in page order) as pages arrive. When the
        window changed under the reader it yields ``WindowVoid``: every row of the pass so far
        is void and the window is read again from page 1. ``WindowDone`` (with the report)
        comes last, once the pass passed every check, so a loader stages rows and commits them
        only on ``WindowDone``. Memory holds a few batches (``batch_pages`` pages each),
        whatever the window's size. A read stopped by an error (a spent allowance) yields every
        page it read, in order, before the error: each ``WindowRows`` names its last page.

        ``start_page`` resumes a stopped read past the pages kept (``expect_total``: the total
        its first page said): the window is then unverified by its summary (the rows before
        are not in this pass); should its total have moved, the pass is void and the window
        is read again from page 1. A read stopped after its last page asks that page again,
        for the total only, and yields no rows.
        """
        bounds = (_as_date(window[0]), _as_date(window[1]))
        self._list_params(None, None, filters)
        slots = asyncio.Semaphore(max(1, concurrency or self.concurrency))
        report = WindowReport(window=bounds, filters=dict(filters))
        read = _WindowRead(
            bounds,
            filters,
            raw,
            verify and start_page <= 1,
            slots,
            None,
            max(1, batch_pages or PARSE_BATCH_PAGES),
            max(1, start_page),
            expect_total,
            max(0, ahead_bytes),
        )
        events = self._stream_window(read, report)
        async for event in events:
            if not isinstance(event, _WindowTooBig):  # never split here (no row cap)
                yield event

    async def _read_window(
        self,
        window: Window,
        filters: Mapping[str, str],
        raw: bool,
        verify: bool,
        parent: Window | None,
        slots: asyncio.Semaphore,
    ) -> list[TransactionBatch]:
        """A whole window as one frame (split in halves by date when it is too big)."""
        report = WindowReport(window=window, filters=dict(filters), split_from=parent)
        parts: list[pl.DataFrame] = []
        read = _WindowRead(
            window, filters, raw, verify, slots, self.max_window_rows, PARSE_BATCH_PAGES
        )
        events = self._stream_window(read, report)
        async for event in events:
            if isinstance(event, WindowRows):
                parts.append(event.frame)
            elif isinstance(event, WindowVoid):
                parts.clear()
            elif isinstance(event, _WindowTooBig):
                log.debug("window %s holds %s rows: splitting", window, event.total)
                out: list[TransactionBatch] = []
                for half in event.halves:
                    out.extend(
                        await self._read_window(half, filters, raw, verify, parent or window, slots)
                    )
                return out
        # an accepted pass always yields rows (an empty window yields one empty batch)
        frame = parts[0] if len(parts) == 1 else pl.concat(parts, rechunk=False)
        return [TransactionBatch(frame, report)]

    async def _stream_window(
        self, read: _WindowRead, report: WindowReport
    ) -> AsyncGenerator[WindowEvent | _WindowTooBig, None]:
        """Passes over a window until one passes every check (re-reads on drift)."""
        started = time.monotonic()
        params = self._list_params(read.window[0], read.window[1], read.filters)
        repeated: frozenset[int] = frozenset()  # ids read twice by the previous pass (hashed)
        for _ in range(self.max_rereads + 1):
            one = _WindowPass(self, read, report, params)
            try:
                async for event in one.rows():
                    yield event
                    if isinstance(event, _WindowTooBig):
                        return
                repeated = await one.verdict(repeated)
            finally:
                await one.close()
            reason = one.reason
            if reason is None:
                check = one.check
                report.total = check.total or 0
                report.rows = check.rows
                report.pages = check.pages
                report.elapsed_s = time.monotonic() - started
                yield WindowDone(report)
                return
            if read.start_page > 1:  # the pages before are unproven now: read from page 1
                read = replace(read, start_page=1, expect_total=None)
            report.rereads += 1
            report.reasons.append(reason)
            self.stats.add("GET /v1/transactions", rereads=1)
            log.info("window %s changed while read (%s): reading it again", read.window, reason)
            yield WindowVoid(reason)
        report.elapsed_s = time.monotonic() - started
        raise DriftError(
            f"window {read.window} kept changing after {report.rereads} re-reads: "
            + "; ".join(report.reasons[-3:])
        )


@dataclass(frozen=True)
class _WindowRead:
    """How one window is read: its bounds and filters, and the reader's limits for it."""

    window: Window
    filters: Mapping[str, str]
    raw: bool
    verify: bool
    slots: asyncio.Semaphore  # list requests in flight (shared by concurrent windows)
    max_rows: int | None  # more than this and the window is split (None: never)
    batch_pages: int  # pages parsed together
    start_page: int = 1  # a resumed read's first page (those before were kept)
    expect_total: int | None = None  # the total a resumed read's window had when it stopped
    ahead_bytes: int = 0  # what pages answered and not yet taken may hold (_WindowPass.top_up)


class _WindowPass:
    """One pass over a window's pages: requested ahead, parsed in batches, checked as they
    come, and the verdict (the check's and the server's summary's) at the end."""

    def __init__(
        self,
        reader: WindowReader,
        read: _WindowRead,
        report: WindowReport,
        params: Mapping[str, str | None],
    ) -> None:
        self.reader, self.read, self.report, self.params = reader, read, report, params
        self.check = WindowCheck(PAGE_LIMIT)
        self.reason: str | None = None
        self.ahead: deque[asyncio.Task[PageChunk]] = deque()
        self.taken = read.start_page - 1  # the last page taken
        self.following = 0  # the next page to request (0: none before the first is read)
        self.in_flight = 0  # requests not answered yet
        self.held = 0  # what pages answered and not yet taken hold (PageChunk.held)
        self.stopped = False  # no more requests (the pass is closed, or a request failed)
        # parses in flight, with the last page each holds
        self.parsing: deque[tuple[asyncio.Task[tuple[pl.DataFrame, Tally]], int]] = deque()
        # The server's summary is one more observation of the window: taken alongside the
        # pages (off the critical path), it must agree with the rows read, whatever moved.
        window = read.window
        self.summary_task = (
            asyncio.create_task(reader.transactions_summary(window[0], window[1], **read.filters))
            if read.verify
            else None
        )

    def top_up(self) -> None:
        """Request the next pages: READ_AHEAD_PAGES ahead of the one taken, and beyond them,
        while the pages answered and not yet taken hold under the read's `ahead_bytes`.

        Called as pages are taken and as each is answered, so the requests go on while the
        caller is busy and takes nothing (a first sync's window committing: DuckDB releases
        the GIL, and the loop thread has a core to itself). At most READ_AHEAD_PAGES are in
        flight either way.
        """
        last, budget = self.check.pages or 0, self.read.ahead_bytes
        while (
            not self.stopped
            and 0 < self.following <= last
            and self.in_flight < READ_AHEAD_PAGES
            and (len(self.ahead) < READ_AHEAD_PAGES or self.held < budget)
        ):
            task = asyncio.create_task(self.fetch(self.following))
            self.following += 1
            self.in_flight += 1
            task.add_done_callback(self._answered)
            self.ahead.append(task)

    def _answered(self, task: asyncio.Task[PageChunk]) -> None:
        self.in_flight -= 1
        if task.cancelled() or task.exception() is not None:
            self.stopped = True  # the failure is raised where the page is awaited
            return
        self.held += task.result().held
        self.top_up()

    async def fetch(self, number: int) -> PageChunk:
        async with self.read.slots:
            chunk = await self.reader._list_page(number, PAGE_LIMIT, self.params)
        if number > self.taken + READ_AHEAD_PAGES:
            return chunk.pack()  # beyond the usual look-ahead: it waits for the caller
        return chunk

    def parse(self, chunks: list[PageChunk]) -> asyncio.Task[tuple[pl.DataFrame, Tally]]:
        raw = self.read.raw

        def parse_and_tally(chunks: list[PageChunk]) -> tuple[pl.DataFrame, Tally]:
            frame = frame_from_chunks(chunks, TRANSACTION_WIRE, raw=raw)
            return frame, Tally.of(frame)

        # Polars releases the GIL: parsing (and the check's tallies) overlap the requests
        # still going, and keep the event loop free to send them
        return asyncio.create_task(self.reader._in_parse_pool(parse_and_tally, chunks))

    async def drain(self, keep: int) -> AsyncGenerator[WindowRows, None]:
        """Parsed batches, in page order, until ``keep`` are left parsing."""
        while len(self.parsing) > keep:
            task, page = self.parsing.popleft()
            part, tally = await task
            self.check.add(part, tally)
            yield WindowRows(part, page, self.check.total)

    async def rows(self) -> AsyncGenerator[WindowRows | _WindowTooBig, None]:
        """The pass's rows as they are parsed (or the news that the window is too big)."""
        check, report, start = self.check, self.report, self.read.start_page
        expected = self.read.expect_total
        # a pass stopped after its last page (every page kept, not yet committed): no page
        # past the end is asked for (a service may refuse one); the last is asked again to
        # prove the total, and its rows, kept already, are not handed on
        whole = expected is not None and start > 1 and (start - 1) * check.limit >= expected
        if whole:
            assert expected is not None
            start = max(1, -(-expected // check.limit))
            self.taken = start - 1
        first = await self.fetch(start)
        report.requests += 1
        self.reason = check.first(first)
        check.skipped = (check.total or 0) if whole else (start - 1) * check.limit
        if self.reason is None and expected is not None and check.total != expected:
            self.reason = f"total moved from {expected} to {check.total} since the read stopped"
        max_rows = self.read.max_rows
        if (
            self.reason is None
            and max_rows is not None
            and (check.total or 0) > max_rows
            and (halves := split_window(self.read.window)) is not None
        ):
            yield _WindowTooBig(halves, check.total or 0)
            return
        # Pages are parsed a batch at a time as they arrive and their bytes dropped; a bounded
        # number of pages is requested ahead of the one awaited.
        batch: list[PageChunk] = [] if whole else [first]
        number = self.taken = start
        self.following = start + 1
        while self.reason is None and number < check.pages:
            self.top_up()
            try:
                chunk = await self.ahead.popleft()
            except Exception:
                # stopped (a spent allowance, a service that went away): every page read so
                # far goes to the loader first, so a stopped read keeps all it read
                if batch:
                    self.parsing.append((self.parse(batch), number))
                del batch
                async for rows in self.drain(0):
                    yield rows
                raise
            number = self.taken = number + 1
            self.held -= chunk.held
            report.requests += 1
            self.reason = check.page(chunk, number)
            batch.append(chunk)
            if self.reason is None and len(batch) >= self.read.batch_pages:
                self.parsing.append((self.parse(batch), number))
                batch = []
                async for rows in self.drain(1):
                    yield rows
        if self.reason is None:
            if batch:
                self.parsing.append((self.parse(batch), number))
            del batch
            async for rows in self.drain(0):
                yield rows

    async def verdict(self, repeated: frozenset[int]) -> frozenset[int]:
        """Judge the pass once every page is read (sets ``reason``); returns the ids read
        twice, for the next pass to compare."""
        check = self.check
        if self.reason is None:
            self.reason = await self.reader._in_parse_pool(check.done)
            if self.reason is not None and check.rows == check.total:
                # the same ids twice in two passes, with every row of `total` read: the
                # service itself sends them so. Accepted: the warehouse rejects the copies
                # with a reason, and the count and sums still prove the rest
                twice = await self.reader._in_parse_pool(check.duplicated)
                if twice and twice == repeated:
                    log.warning(
                        "window %s: the service sends %d id(s) twice", self.read.window, len(twice)
                    )
                    self.reason = None
                repeated = twice
        if self.summary_task is not None:
            try:
                summary = await self.summary_task
            except SurfaceUnavailable:  # its totals cannot be read: the window stays unproven
                self.report.requests += 1
                return repeated
            self.report.requests += 1
            if self.reason is None:
                self.reason = check.agrees(summary)
                self.report.verified = self.reason is None
        return repeated

    async def close(self) -> None:
        """Cancel what the pass still has in flight (it may have stopped early)."""
        self.stopped = True
        for task in self.ahead:
            task.cancel()
        await asyncio.gather(*self.ahead, return_exceptions=True)
        self.report.requests += sum(
            1 for t in self.ahead if not t.cancelled() and t.exception() is None
        )
        if self.summary_task is not None and not self.summary_task.done():
            self.summary_task.cancel()
            await asyncio.gather(self.summary_task, return_exceptions=True)
        # a thread cannot be stopped: let abandoned parses end, then drop them
        await asyncio.gather(*(task for task, _ in self.parsing), return_exceptions=True)
