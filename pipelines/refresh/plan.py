"""The refresh's plan: which months to read and which to prove, from plain values (no I/O).

Requests are the scarce resource (docs/refresh.md, the request budget): every choice here is
how a refresh spends the fewest of them. The steps (steps.py) ask the service and the warehouse
for the facts; this module decides from them, so it is unit-tested on its own
(tests/pipelines/test_plan.py).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Iterable, Sequence

from centsync.transform.calendar import (
    add_months,
    contiguous,
    month_end,
    month_key,
    month_start,
    months_between,
    pages,
    parse_month,
)
from centsync.transform.contract import key_expires_soon

PAGE = 200
# Rows per read window: big windows waste fewer partial pages; this bounds memory.
WINDOW_ROWS = 170_000
# Below this many rows (in the warehouse, or announced by the server for a full read) DuckDB
# runs the refresh on one thread: its statements are small and many (about 40 in a household
# refresh), and waking a second worker for each cost more than it gave (2.04 -> 2.00 s, median
# of 10, docs/benchmarks.md). A bigger ledger gets DuckDB's default, all cores.
ONE_THREAD_ROWS = 100_000
# Pages per streamed batch and batches the reader may run ahead of the loader. Validation has
# a fixed cost per call; at 1,000,000 rows 150 pages (30,000 rows) ran at 88-90k rows/s with a
# 520 MB peak, 250 pages 90-95k rows/s at 590 MB, 100 pages 77-80k rows/s at 483 MB.
STREAM_BATCH_PAGES = 150
# Requests per fingerprint: the summary, spending by category, spending by merchant.
FINGERPRINT_REQUESTS = 3

# A read window: first and last day, either end open (None).
Window = tuple[dt.date | None, dt.date | None]
# A range a fingerprint covers: open below only for the ledger's first year.
Range = tuple[dt.date | None, dt.date]


def key_warning(expires_at: dt.datetime | None, now: dt.datetime) -> str | None:
    """The warning a refresh gives when the API key expires soon (transform.contract)."""
    if expires_at is None or not key_expires_soon(expires_at, now):
        return None
    left = expires_at - now
    return (
        f"the API key expires in {max(0, left.days)} days ({expires_at:%Y-%m-%d}): create a new one"
    )


def hot_window_start(today: dt.date, hot_months: int) -> dt.date:
    """The first month of the hot window: `hot_months` months ending with today's (at least 1)."""
    return add_months(month_start(today), -(max(1, hot_months) - 1))


def choose_mode(
    *,
    forced: tuple[str, str] | None,
    requested: str,
    timezone_changed: bool,
    previous_timezone: str | None,
    timezone: str | None,
    has_local_rows: bool,
) -> tuple[str, str]:
    """(mode, reason): forced months, a full read, the hot window only, or incremental."""
    if forced is not None:
        return "months", f"months {forced[0]}..{forced[1]} forced"
    if requested == "full":
        return "full", "--full"
    if timezone_changed:
        return "full", f"timezone changed from {previous_timezone} to {timezone}"
    if not has_local_rows:
        return "full", "first sync"
    if requested == "hot":
        return "hot", "hot window"
    return "incremental", "fingerprints checked"


def forced_window(months: tuple[str, str]) -> tuple[dt.date, dt.date]:
    """The window of a forced `--months first..last` range: first day to last day."""
    first, last = (parse_month(m) for m in months)
    return first, month_end(last)


def written_windows(written: Iterable[dt.date], hot_start: dt.date) -> list[Range]:
    """Windows of the months the write-back changed before the hot window, adjacent ones merged
    (an edit the write-back sent, a renamed concept, changes no fingerprint: read it back)."""
    before = sorted({month_start(m) for m in written if m < hot_start})
    return contiguous((m, month_end(m)) for m in before)


def single_thread(rows: int) -> bool:
    """Whether DuckDB runs on one thread for a ledger of `rows` rows (ONE_THREAD_ROWS)."""
    return rows < ONE_THREAD_ROWS


def batch_pages(minute_limit: int) -> int:
    """Pages per streamed batch: a batch is what an interrupted read can keep, so under a rate
    limit a batch is about 15 s of the allowance (10 to STREAM_BATCH_PAGES pages)."""
    if minute_limit <= 0:
        return STREAM_BATCH_PAGES
    return max(10, min(STREAM_BATCH_PAGES, minute_limit // 4))


def pack(oldest: dt.date, newest: dt.date, total: int) -> list[tuple[dt.date, dt.date]]:
    """Month-aligned windows of about WINDOW_ROWS rows each, sized from the ledger's span."""
    months = months_between(oldest, newest)
    per_month = max(1.0, total / len(months))
    size = max(1, math.floor(WINDOW_ROWS / per_month))
    return [(months[i], month_end(months[i : i + size][-1])) for i in range(0, len(months), size)]


def open_ends(windows: Sequence[tuple[dt.date, dt.date]]) -> list[Window]:
    """The packed windows as read: the first open below and the last open above, to catch rows
    the span missed."""
    last = len(windows) - 1
    return [
        (None if i == 0 else lo, None if i == last else hi) for i, (lo, hi) in enumerate(windows)
    ]


def months_covered(windows: Iterable[tuple[dt.date, dt.date]]) -> set[dt.date]:
    """Every month (its first day) the windows cover."""
    return {m for lo, hi in windows for m in months_between(lo, hi)}


def already_read(month: str, read: Sequence[tuple[str, str]]) -> bool:
    """Whether `month` ('YYYY-MM') lies in one of the (first, last) month ranges read."""
    return any(first <= month <= last for first, last in read)


def history_years(
    first_local: dt.date, hot_start: dt.date, data_years: Collection[int] | None = None
) -> list[tuple[int, Range]]:
    """The years before the hot window whose fingerprints a refresh compares: the first open
    below (rows before the first local month), the last ending the day before the hot window.

    With `data_years` (the years the warehouse holds rows in), each run of years without data
    is one range, fingerprinted at once: one row dated 1900 costs one range for the 122 empty
    years, not 122 (a refresh's cost stays bound by the years that hold data). Such a range
    spans more than one year (`is_gap`)."""
    years: list[tuple[int, Range]] = []
    for i, year in enumerate(range(first_local.year, hot_start.year + 1)):
        lo = None if i == 0 else dt.date(year, 1, 1)
        hi = min(dt.date(year, 12, 31), hot_start - dt.timedelta(days=1))
        if lo is not None and hi < lo:
            continue
        held = data_years if data_years is not None else range(first_local.year, year + 1)
        empty = year not in held and i > 0
        if empty and years and years[-1][0] not in held and years[-1][1][0] is not None:
            years[-1] = (years[-1][0], (years[-1][1][0], hi))  # the gap grows
        else:
            years.append((year, (lo, hi)))
    return years


def is_gap(year_range: Range) -> bool:
    """A range of `history_years` that spans more than one year (years without data)."""
    lo, hi = year_range
    return lo is not None and hi is not None and hi.year > lo.year


def cheaper_to_read(rows: int, months: int) -> bool:
    """Whether re-reading a differing range (its pages) costs no more than drilling into its
    months (FINGERPRINT_REQUESTS a month)."""
    return math.ceil(rows / PAGE) + 1 <= FINGERPRINT_REQUESTS * months


def month_ranges(year: Range, first_local: dt.date) -> list[Range]:
    """The months of a year's range to drill into; the first stays open below when the year is."""
    lo, hi = year
    months = months_between(lo or first_local, hi)
    return [(None if (lo is None and i == 0) else m, month_end(m)) for i, m in enumerate(months)]


def verification_budget(
    rows: int,
    *,
    least_pages: int,
    last_at: dt.datetime | None,
    now: dt.datetime,
    period: dt.timedelta,
) -> int:
    """Pages rolling verification may spend: `least_pages`, or when more, the share of the
    ledger (`rows`) the time since the last refresh calls for (a daily refresh with a 7-day
    period reads a seventh of the ledger, never all of it at once)."""
    total_pages = math.ceil(rows / PAGE)
    share = 0
    if last_at is not None:
        elapsed = (now - last_at).total_seconds()
        share = math.ceil(total_pages * max(0.0, elapsed) / period.total_seconds())
    return max(least_pages, min(share, total_pages))


def months_to_verify(
    months: Iterable[tuple[str, int, dt.datetime | None]],
    *,
    budget: int,
    due_before: dt.datetime,
    read: Sequence[tuple[str, str]] = (),
) -> dict[str, int]:
    """The months ('YYYY-MM': rows) rolling verification re-reads, from (month, rows,
    verified_at) verified longest ago first: every month due (never verified, or not since
    `due_before`), then the others while their pages fit the budget. Months in `read` (read whole
    by this refresh already) are skipped."""
    chosen: dict[str, int] = {}
    for month, rows, verified_at in months:
        if already_read(month, read):
            continue
        due = verified_at is None or verified_at <= due_before
        if not due and pages({**chosen, month: rows}, PAGE) > budget:
            break  # oldest first: what is left was verified more recently
        chosen[month] = rows
    return chosen


def month_windows(months: Iterable[str]) -> list[Range]:
    """Windows over these months ('YYYY-MM'), adjacent ones merged."""
    return contiguous((parse_month(m), month_end(parse_month(m))) for m in sorted(months))


def window_months(
    lo: dt.date | None,
    hi: dt.date | None,
    booked: tuple[dt.date, dt.date] | None = None,
    local: Sequence[str] = (),
) -> list[str]:
    """Every month ('YYYY-MM') a window covers: its bounds, and for an open end the rows read
    (`booked`, their first and last date) and the local months (`local`)."""
    if lo is None or hi is None:
        dates: list[dt.date] = list(booked) if booked is not None else []
        local_months = [parse_month(m) for m in local]
        if lo is None:
            lo = min([*dates, *[m for m in local_months if hi is None or m <= hi]], default=None)
        if hi is None:
            ends = [month_end(m) for m in local_months if lo is None or m >= month_start(lo)]
            hi = max([*dates, *ends], default=None)
        if lo is None or hi is None:
            return []
    return [month_key(m) for m in months_between(lo, hi)]
