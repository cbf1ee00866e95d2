"""Drift-safe paging of one date window of ``GET /v1/transactions``.

Page-number paging of a live ledger skips a row when an earlier one is deleted and repeats a
row when one is inserted. ``WindowCheck`` is the strategy object of the window reader (the
request loop knows nothing of it): it notes ``total`` on the first page and flags the pass as
drifted when ``total`` moves, an id repeats, the distinct ids differ
from ``total``, or the server's own ``/v1/transactions/summary`` for the window (count and sums
per type, taken after the last page) disagrees with the rows read. A drifted pass is read
again from page 1, a bounded number of times.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from ._frames import PageChunk
from ._models import TransactionsSummary

PAGE_LIMIT = 200
# the documented transaction types; the service may add more (the API's section 9)
TYPES = ("expense", "income", "transfer")

Window = tuple[dt.date | None, dt.date | None]


@dataclass
class WindowReport:
    """What reading one window took and found."""

    window: Window
    filters: dict[str, str] = field(default_factory=dict)
    total: int = 0  # rows the server reported for the accepted pass
    rows: int = 0  # rows returned (== total when the window was read cleanly)
    pages: int = 0  # pages in the accepted pass
    requests: int = 0  # list and summary requests, every pass (retries not included)
    rereads: int = 0  # passes thrown away because the window changed under the reader
    verified: bool = False  # the server's summary for the window agreed with the rows
    reasons: list[str] = field(default_factory=list)  # why each re-read happened
    split_from: Window | None = None  # the requested window, when it was split for size
    elapsed_s: float = 0.0

    def to_json(self) -> dict[str, object]:
        return {
            "from": None if self.window[0] is None else self.window[0].isoformat(),
            "to": None if self.window[1] is None else self.window[1].isoformat(),
            "filters": dict(self.filters),
            "total": self.total,
            "rows": self.rows,
            "pages": self.pages,
            "requests": self.requests,
            "rereads": self.rereads,
            "verified": self.verified,
            "reasons": list(self.reasons),
            "elapsed_s": round(self.elapsed_s, 3),
        }


@dataclass
class TransactionBatch:
    """A verified window's rows (``frame``, the transaction schema) and its report."""

    frame: pl.DataFrame
    report: WindowReport

    @property
    def window(self) -> Window:
        return self.report.window


@dataclass(frozen=True)
class WindowRows:
    """A batch of the current pass's rows, in page order: through page ``page`` (absolute:
    a resumed pass starts past 1) of a window whose first page said ``total`` rows."""

    frame: pl.DataFrame
    page: int = 0
    total: int | None = None


@dataclass(frozen=True)
class WindowVoid:
    """The window changed under the reader: drop every row of this pass; it is read again."""

    reason: str


@dataclass(frozen=True)
class WindowDone:
    """The pass passed every check: the rows since the last ``WindowVoid`` are the window."""

    report: WindowReport


WindowEvent = WindowRows | WindowVoid | WindowDone


@dataclass(frozen=True)
class Tally:
    """What a window check needs of a part: its ids, row count and amount sums per type.

    The ids are kept as their 64-bit hashes (Polars' `hash`, the same value for the same id
    within a process): 8 bytes an id. Kept as text, each part's id column also kept alive the
    string buffers of the batch it was parsed from: a 1,000,000-row pass peaked about 110 MB
    higher (docs/benchmarks.md, issue 46, seventeenth round). Equal ids have equal hashes, so
    an id read twice is always seen; two ids with one hash (about 1 in 10^9 for a 200,000-row
    window) read as an id twice, and the window is read again: a needless re-read, never a
    wrong pass accepted.
    """

    ids: pl.Series  # UInt64: the ids' hashes
    rows: int
    sums: dict[str, int]
    unreadable: int = 0  # rows whose amount or type is not what the API documents
    new_types: int = 0  # rows of a type the API does not document yet (their amounts read)

    @staticmethod
    def of(frame: pl.DataFrame) -> Tally:
        ids = frame.get_column("id").hash()
        if not frame.height:
            return Tally(ids, 0, {})
        if frame.schema["amount"] == pl.Int64:
            grouped = frame.group_by("type").agg(pl.col("amount").sum())
            sums = dict(grouped.iter_rows())
            new = 0
            if any(kind not in TYPES for kind in sums):  # count rows, not types
                new = frame.height - int(frame.get_column("type").is_in(TYPES).sum())
            return Tally(ids, frame.height, sums, new_types=new)
        # a batch read as text (some record broke the documented types): sum what reads
        amount = pl.col("amount").cast(pl.Int64, strict=False)
        readable = amount.is_not_null() & pl.col("type").is_in(TYPES)
        good = frame.filter(readable)
        grouped = good.with_columns(amount=amount).group_by("type").agg(pl.col("amount").sum())
        sums = {k: int(a) for k, a in grouped.iter_rows()}
        return Tally(ids, frame.height, sums, frame.height - good.height)


class WindowCheck:
    """Tracks one pass over a window and says whether (and why) it drifted."""

    def __init__(self, limit: int = PAGE_LIMIT) -> None:
        self.limit = limit
        self.total: int | None = None
        self.pages = 0
        self.rows = 0
        self.sums: dict[str, int] = {}
        self.unreadable = 0
        self.new_types = 0
        self.skipped = 0  # rows of the pages before a resumed pass's first (read before)
        self._ids: list[pl.Series] = []

    def first(self, chunk: PageChunk) -> str | None:
        total = chunk.total
        if total is None:
            return "first page without an integer 'total'"
        self.total = total
        self.pages = (total + self.limit - 1) // self.limit
        return None

    def page(self, chunk: PageChunk, number: int) -> str | None:
        if chunk.total != self.total:
            return f"total moved from {self.total} to {chunk.total} at page {number}"
        return None

    def add(self, frame: pl.DataFrame, tally: Tally | None = None) -> None:
        """Tally a part of the pass (rows in page order): its ids, count and sums per type.
        ``tally`` is ``Tally.of(frame)`` when already computed (off the event loop)."""
        tally = tally or Tally.of(frame)
        if tally.rows == 0:
            return
        self._ids.append(tally.ids)
        self.rows += tally.rows
        self.unreadable += tally.unreadable
        self.new_types += tally.new_types
        for kind, amount in tally.sums.items():
            self.sums[kind] = self.sums.get(kind, 0) + amount

    def done(self) -> str | None:
        """After the last page: every id once, and as many as ``total`` said."""
        distinct = pl.concat(self._ids).n_unique() if self._ids else 0
        if distinct != self.rows:
            return f"{self.rows - distinct} id(s) read twice"
        if self.rows + self.skipped != self.total:
            return f"read {self.skipped + self.rows} distinct rows, total says {self.total}"
        return None

    def duplicated(self) -> frozenset[int]:
        """The ids this pass read more than once (their hashes: `Tally`), to compare with the
        next pass's."""
        if not self._ids:
            return frozenset()
        ids = pl.concat(self._ids)
        return frozenset(ids.filter(ids.is_duplicated()).unique().to_list())

    def agrees(self, summary: TransactionsSummary) -> str | None:
        """The server's summary for the window against the tallied rows."""
        if self.unreadable:
            # rows that break the documented types cannot be summed (the warehouse rejects
            # them, with a reason): the count, and every id once, still prove the window
            if self.rows != summary.count:
                return f"server summary counts {summary.count} rows, {self.rows} read"
            return None
        sums = {"income": 0, "expense": 0, "transfer": 0, **self.sums}
        net = sum(sums.values())
        if self.new_types:
            # a type the client does not know yet: which of the service's sums holds it is the
            # service's business; the count and the net (every amount) still prove the window
            if (self.rows, net) != (summary.count, summary.net):
                return (
                    f"server summary counts {summary.count} rows netting {summary.net}, "
                    f"{self.rows} read netting {net}"
                )
            return None
        got = (self.rows, sums["income"], sums["expense"], sums["transfer"], net)
        want = (summary.count, summary.income, summary.expense, summary.transfer, summary.net)
        if got != want:
            return f"server summary {want} differs from rows read {got}"
        return None

    @staticmethod
    def verify(frame: pl.DataFrame, summary: TransactionsSummary) -> str | None:
        """The server's summary against one frame holding the whole window."""
        check = WindowCheck()
        check.add(frame)
        return check.agrees(summary)


def split_window(window: Window) -> list[Window] | None:
    """Halve a bounded window by date (newer half first); None when it cannot be split."""
    start, end = window
    if start is None or end is None or end <= start:
        return None
    mid = start + (end - start) // 2
    return [(mid + dt.timedelta(days=1), end), (start, mid)]


def month_windows(start: dt.date, end: dt.date, *, open_ends: bool = False) -> list[Window]:
    """Calendar months covering ``start``..``end``, newest first.

    With ``open_ends`` the oldest window has no lower bound and the newest no upper bound, so
    rows booked outside the range while reading are still covered.
    """
    if end < start:
        return []
    windows: list[Window] = []
    cursor = dt.date(end.year, end.month, 1)
    while True:
        next_month = (cursor.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        windows.append((cursor, next_month - dt.timedelta(days=1)))
        if cursor <= start:
            break
        cursor = (cursor - dt.timedelta(days=1)).replace(day=1)
    if open_ends:
        windows[0] = (windows[0][0], None)
        windows[-1] = (None, windows[-1][1])
    return windows


def group_windows(windows: list[Window], size: int) -> list[Window]:
    """Merge runs of ``size`` adjacent windows (newest first) into one window each."""
    if size <= 1:
        return list(windows)
    out: list[Window] = []
    for i in range(0, len(windows), size):
        run = windows[i : i + size]
        out.append((run[-1][0], run[0][1]))
    return out
