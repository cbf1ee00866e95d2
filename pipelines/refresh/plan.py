"""The refresh's plan: which months to read and which to prove, from plain values (no I/O).

Requests are the scarce resource (docs/refresh.md, the request budget): every choice here is
how a refresh spends the fewest of them. The steps (steps.py) ask the service and the warehouse
for the facts; this module decides from them, so it is unit-tested on its own
(tests/pipelines/test_plan.py).
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from centsync.pipelines.settings import memory_bytes
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
from centsync.transform.contract import RefreshMode, key_expires_soon
from centsync.warehouse.instances import ROW_GROUP_ROWS
from centsync.warehouse.session import ONE_THREAD_ROWS

PAGE = 200
# Rows per read window: big windows waste fewer partial pages; this bounds memory. A window is
# one commit of core.transactions and raw.transactions, which DuckDB writes as whole row groups
# (ROW_GROUP_ROWS) and one part-filled group of the rest; each checkpoint after a window merges
# neighbouring groups wherever t + 1 of them fit in t (t up to 3), rewriting and compressing
# them again. A rest of more than half a row group is never merged (tests/warehouse/
# test_row_groups.py), so a big ledger's windows aim here, at 1.63 row groups (a rest of 77,000
# rows): at 1,000,000 rows the 170,000-row windows this replaced (a rest of 47,000, merged
# every second window) spent 1.4 CPU-s more for a higher peak (docs/benchmarks.md).
WINDOW_ROWS = 200_000
# Pages per streamed batch and batches the reader may run ahead of the loader. Validation has
# a fixed cost per call; at 1,000,000 rows with 200,000-row windows, 100 pages (20,000 rows)
# peaked 17-50 MB lower than 150 for 0.1-0.15 s more (docs/benchmarks.md, seventh round).
STREAM_BATCH_PAGES = 100
# What the pages of a window requested ahead may hold while the loader is busy (a window
# committing): they wait as their records cut into lines, compressed, about an eighth of
# their size, so a 200,000-row window's pages (67 MB as sent) wait in about 9 MB. At 1,000,000
# rows the next window is then read while the last commits: 8.19 -> 7.45 s at the same peak
# (docs/benchmarks.md, ninth round).
WAIT_AHEAD_BYTES = 16 * 1024 * 1024
# DuckDB's memory limit while a first sync's windows land, when the refresh's own is higher:
# each window appends new months (nothing is diffed), and what DuckDB keeps of its inserts
# up to its limit is memory the process holds. At 1,000,000 rows 96MB peaked 50-60 MB lower
# than 160MB in the same time; 64MB was 0.1-0.3 s slower, 32MB three to five times slower
# (docs/benchmarks.md, eighth round). The refresh's own limit is back for what follows.
WINDOW_MEMORY = "96MB"
# Requests per fingerprint: the summary, spending by category, spending by merchant.
FINGERPRINT_REQUESTS = 3

# The reasons of a first sync, and of one read on from where a stopped one stopped.
FIRST_SYNC = "first sync"
FIRST_SYNC_RESUMED = "first sync, read on from where it stopped"

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
    resuming: bool = False,
) -> tuple[RefreshMode, str]:
    """(mode, reason): forced months, a full read, the hot window only, or incremental;
    `resuming`: a first sync stopped before its end, read on from where it stopped."""
    if forced is not None:
        return "months", f"months {forced[0]}..{forced[1]} forced"
    if requested == "full":
        return "full", "--full"
    if timezone_changed:
        return "full", f"timezone changed from {previous_timezone} to {timezone}"
    if resuming:
        return "full", FIRST_SYNC_RESUMED
    if not has_local_rows:
        return "full", FIRST_SYNC
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
    """Whether DuckDB runs on one thread for a ledger of `rows` rows (the warehouse's
    ONE_THREAD_ROWS)."""
    return rows < ONE_THREAD_ROWS


def window_memory(limit: str) -> str | None:
    """The memory limit a first sync's windows land under when `limit` (the refresh's, a
    DuckDB size) is higher than WINDOW_MEMORY; None keeps `limit` (a lower one, or a share of
    memory)."""
    size, window = memory_bytes(limit), memory_bytes(WINDOW_MEMORY)
    return WINDOW_MEMORY if size is not None and window is not None and size > window else None


def batch_pages(minute_limit: int) -> int:
    """Pages per streamed batch. A stop keeps every page read whatever the batch (read.py);
    under a rate limit pages come slowly, so a batch is about 15 s of the allowance (10 to
    STREAM_BATCH_PAGES pages) and lands while the next is read."""
    if minute_limit <= 0:
        return STREAM_BATCH_PAGES
    return max(10, min(STREAM_BATCH_PAGES, minute_limit // 4))


def pack(oldest: dt.date, newest: dt.date, total: int) -> list[tuple[dt.date, dt.date]]:
    """Month-aligned windows of about WINDOW_ROWS rows each, sized from the ledger's span."""
    months = months_between(oldest, newest)
    return _chunks(months, months_per_window(max(1.0, total / len(months)), len(months)))


def repack(
    rest: Sequence[tuple[dt.date, dt.date]], month_rows: Sequence[int], left: int | None = None
) -> list[tuple[dt.date, dt.date]]:
    """The windows still to read, packed again over the same months from the rows each month of
    the window just read held (`month_rows`, oldest first). `pack` can only size windows from
    the ledger's average; a ledger that grew over the years has fewer rows a month in its old
    windows and more in its new ones, and windows sized from the average leave their commits'
    rests where DuckDB merges them (WINDOW_ROWS). The next months' rows are projected from the
    window's by a straight line (least squares; its mean when it has under TREND_MONTHS
    months), so a ledger that keeps growing is not always a window behind; scaled to the rows
    `left` to read when known (the ledger's count less those read), so a window of quiet
    months (a dormant year) does not make the next window the whole rest of the ledger."""
    months = months_between(rest[0][0], rest[-1][1])
    line, read = _line(month_rows), len(month_rows)
    scale = 1.0
    if left is not None and left > 0:
        scale = left / sum(line(read + x) for x in range(len(months)))
    return _chunks(months, _months_for(_cumulative(lambda x: line(read + x) * scale, len(months))))


# Months a window must hold before its rows a month are projected by their trend, not their mean
TREND_MONTHS = 6


def _line(month_rows: Sequence[int]) -> Callable[[int], float]:
    """Rows in the x-th month counted from a window's first (0), by the window's trend, at least 1."""
    n = len(month_rows)
    mean = sum(month_rows) / max(n, 1)
    if n < TREND_MONTHS:
        return lambda x: max(1.0, mean)
    middle = (n - 1) / 2
    slope = sum((x - middle) * (r - mean) for x, r in enumerate(month_rows)) / sum(
        (x - middle) ** 2 for x in range(n)
    )
    return lambda x: max(1.0, mean + slope * (x - middle))


def _chunks(months: list[dt.date], size: int) -> list[tuple[dt.date, dt.date]]:
    return [(months[i], month_end(months[i : i + size][-1])) for i in range(0, len(months), size)]


def months_per_window(per_month: float, months: int | None = None) -> int:
    """Months a window holds at `per_month` rows a month (`_months_for`), at most `months`."""
    return _months_for(_cumulative(lambda _: per_month, months))


def _cumulative(month: Callable[[int], float], months: int | None) -> list[float]:
    """The rows of the first n months ahead (`month(x)`: the x-th's, from 0), n = 1, 2, ...
    while under two row groups (the first month always) and, given, at most `months` months."""
    out: list[float] = []
    total = 0.0
    for x in itertools.count():
        if months is not None and x >= months:
            break
        total += month(x)
        if out and total >= 2 * ROW_GROUP_ROWS:
            break
        out.append(total)
    return out


def _months_for(cumulative: Sequence[float]) -> int:
    """Months a window holds, n months holding `cumulative[n - 1]` rows: of the counts under
    two row groups, the one nearest WINDOW_ROWS among those whose commit leaves DuckDB nothing
    to merge (whole row groups, or a rest over half a row group: WINDOW_ROWS); one month when a
    month is more."""

    def merged(rows: float) -> bool:
        rest = rows % ROW_GROUP_ROWS
        return rows < ROW_GROUP_ROWS or 0 < rest <= ROW_GROUP_ROWS / 2

    best = min(
        range(len(cumulative)),
        key=lambda i: (merged(cumulative[i]), abs(cumulative[i] - WINDOW_ROWS)),
    )
    return best + 1


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


def is_gap(year_range: Range) -> bool:
    """A part of the history that spans more than one year (a run of years without data)."""
    lo, hi = year_range
    return lo is not None and hi is not None and hi.year > lo.year


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


# ---- the cost-based plan (issue 26): per part of the history, read it or prove it -------------

# The chance that a year proven by fingerprints differs and must be drilled into. An assumption,
# not a measurement of a user's edits: old years rarely change (bank feeds land in the hot
# window), and one edit a month somewhere in ten years makes about one year in ten differ.
DRILL_CHANCE = 0.1
# Requests every refresh spends whatever the plan: me, settings, net worth, accounts,
# connections, sync status, accounts summary, spending by category, merchant and month, and the
# whole-ledger summary landed for reconciliation.
FIXED_REQUESTS = 11
# The plans a refresh may follow: priced (the cheapest way to be sure of each part), or every
# part proven by fingerprints (fewest pages, some edits left to rolling verification).
PLANS = ("cost", "fingerprints")


@dataclass(frozen=True)
class Part:
    """A part of the history before the hot window (a year holding local rows, or the years
    without any between them), with what re-reading it and proving it would cost."""

    label: str  # "2023", or "2019..2022" for years holding no local rows
    range: Range  # open below for the first part
    rows: int  # local rows
    months: int  # months holding local rows (what drilling fingerprints)
    read_cost: float  # its pages
    prove_cost: float  # fingerprints, the expected drilling and its verification share
    verify_pages: float = 0.0  # of which: what rolling verification would read of it

    @property
    def read(self) -> bool:
        """Re-read when that costs no more than proving it (it is then exact, with no bound)."""
        return self.read_cost <= self.prove_cost


@dataclass(frozen=True)
class HistoryPlan:
    """What an incremental refresh does with the history before the hot window."""

    parts: list[Part]
    hot_rows: int  # local rows in the hot window (always re-read)
    # the months rolling verification would re-read after it ('YYYY-MM': rows)
    verify: dict[str, int] = field(default_factory=dict)

    @property
    def everything(self) -> bool:
        """Every part is re-read: the refresh reads the whole ledger as a first sync would."""
        return all(p.read for p in self.parts)

    def read_windows(self) -> list[Range]:
        """The parts re-read, adjacent ones merged into one window each."""
        return contiguous((p.range[0], p.range[1]) for p in self.parts if p.read)

    def proven(self) -> list[Part]:
        """The parts proven by fingerprints."""
        return [p for p in self.parts if not p.read]

    def estimate(self) -> int:
        """Requests the refresh should spend when nothing differs (FIXED_REQUESTS included)."""
        rows = self.hot_rows + sum(p.rows for p in self.parts)
        if self.everything:
            return full_read_requests(rows)
        reads = sum(
            1 + max(1, math.ceil(sum(p.rows for p in self.parts if _within(p, w)) / PAGE))
            for w in self.read_windows()
        )
        proven = self.proven()
        proofs = FINGERPRINT_REQUESTS * len(proven)
        verification = sum(
            1
            + max(
                1,
                math.ceil(
                    sum(r for m, r in self.verify.items() if lo <= parse_month(m) <= hi) / PAGE
                ),
            )
            for lo, hi in month_windows(self.verify)
            if lo is not None
        )
        hot = 1 + max(1, math.ceil(self.hot_rows / PAGE))
        return FIXED_REQUESTS + reads + proofs + verification + hot


def full_read_requests(rows: int) -> int:
    """Requests a read of the whole ledger spends (a first sync, `--full`): FIXED_REQUESTS, the
    summary before it, its pages, and for a big ledger its span (two one-row pages) and one
    partial page per further window."""
    pages_ = max(1, math.ceil(rows / PAGE))
    if rows <= WINDOW_ROWS:
        return FIXED_REQUESTS + 1 + pages_
    return FIXED_REQUESTS + 1 + pages_ + 2 + math.ceil(rows / WINDOW_ROWS) - 1


def describe(part: Part) -> dict[str, object]:
    """A part as `refresh --plan` shows it."""
    lo, hi = part.range
    return {
        "part": part.label,
        "from": lo.isoformat() if lo is not None else None,
        "to": hi.isoformat(),
        "rows": part.rows,
        "read_cost": part.read_cost if math.isfinite(part.read_cost) else None,
        "prove_cost": round(part.prove_cost, 2),
        "choice": "re-read" if part.read else "prove",
    }


def _within(part: Part, window: Range) -> bool:
    lo, hi = window
    inside_below = lo is None or (part.range[0] is not None and part.range[0] >= lo)
    return inside_below and part.range[1] <= hi


def verification_share(
    last_at: dt.datetime | None, now: dt.datetime, period: dt.timedelta
) -> float:
    """The share of each month's pages rolling verification reads per refresh, from the time
    since the last one (0 without one, at most 1)."""
    if last_at is None or period.total_seconds() <= 0:
        return 0.0
    return min(1.0, max(0.0, (now - last_at).total_seconds() / period.total_seconds()))


def price(
    label: str,
    rng: Range,
    months: Sequence[tuple[int, bool]],
    *,
    share: float,
    drill_chance: float = DRILL_CHANCE,
) -> Part:
    """A part priced from its months holding rows, each (rows, due for verification): read, its
    pages; proved, FINGERPRINT_REQUESTS, the chance of a difference times the cheaper of locating it
    (bisect_cost) and reading the part, and the pages rolling
    verification would spend on it (a due month whole, the others their share). A part holding
    no rows costs nothing to read with a neighbour, so it is read."""
    rows = sum(r for r, _ in months)
    pages_ = math.ceil(rows / PAGE)
    drill = min(pages_ + 1, bisect_cost(rows, len(months)))
    verify = sum(r if due else r * share for r, due in months) / PAGE
    prove = FINGERPRINT_REQUESTS + drill_chance * drill + verify
    return Part(label, rng, rows, len(months), float(pages_), prove, verify)


def _gap(lo: dt.date, hi: dt.date, share: float) -> Part:
    """Years holding no local rows, one part."""
    label = str(lo.year) if lo.year == hi.year else f"{lo.year}..{hi.year}"
    return price(label, (lo, hi), [], share=share)


def plan_history(
    months: Iterable[tuple[str, int, dt.datetime | None]],
    hot_start: dt.date,
    *,
    share: float,
    due_before: dt.datetime,
    plan: str = "cost",
    verify_pages: int = 0,
) -> HistoryPlan:
    """The plan of an incremental refresh, from the local months (month 'YYYY-MM', rows,
    verified_at; as `verification_order` gives them): the years before the hot window that hold
    rows are priced one by one, and the years between them that hold none are one part (proved
    by a zero count or read with a neighbour for nothing). With `plan="fingerprints"` every part
    is proven (the plan before issue 26). `verify_pages` is rolling verification's least budget
    (negative: verification is off), so the plan knows which months it would re-read too."""
    months = list(months)
    hot_rows = 0
    by_year: dict[int, list[tuple[int, bool]]] = {}
    for month, rows, verified_at in months:
        first = parse_month(month)
        if first >= hot_start:
            hot_rows += rows
            continue
        due = verified_at is None or verified_at <= due_before
        by_year.setdefault(first.year, []).append((rows, due))
    end = hot_start - dt.timedelta(days=1)
    parts: list[Part] = []
    day = dt.timedelta(days=1)
    cursor: dt.date | None = None  # the first day not covered yet (None: open below)
    for year in sorted(by_year) or [end.year]:
        if cursor is not None and cursor < dt.date(year, 1, 1):
            parts.append(_gap(cursor, dt.date(year, 1, 1) - day, share))
            cursor = dt.date(year, 1, 1)
        hi = min(dt.date(year, 12, 31), end)
        parts.append(price(str(year), (cursor, hi), by_year.get(year, []), share=share))
        cursor = hi + day
    if cursor is not None and cursor <= end:
        parts.append(_gap(cursor, end, share))
    if plan == "fingerprints":
        parts = [replace(p, read_cost=math.inf) for p in parts]
    history = HistoryPlan(parts, hot_rows)
    if history.everything or verify_pages < 0:
        return history
    # what rolling verification would re-read after the plan (steps._verify_oldest)
    before = [m for m in months if parse_month(m[0]) < hot_start]
    read = [
        ("0000-01" if lo is None else month_key(lo), month_key(hi))
        for lo, hi in history.read_windows()
    ]
    total = math.ceil(sum(r for _, r, _ in before) / PAGE)
    budget = max(verify_pages, min(math.ceil(total * share), total))
    # in the order given: verified longest ago first, as Fingerprints.verification_order
    verify = months_to_verify(before, budget=budget, due_before=due_before, read=read)
    return replace(history, verify=verify)


# ---- locating a difference: spending by month, then bisection (issue 26) -----------------------


def spending_months(
    months: Sequence[Range], server: dict[str, tuple[int, int]], local: dict[str, tuple[int, int]]
) -> list[Range]:
    """The month ranges whose spending (expenses per month, the service's against the
    warehouse's) differs; a month before the first range belongs to it (it is open below)."""
    keys = [month_key(hi) for _, hi in months]
    differ = set()
    for key in server.keys() | local.keys():
        if server.get(key) == local.get(key):
            continue
        differ.add(next((i for i, k in enumerate(keys) if key <= k), len(keys) - 1))
    return [months[i] for i in sorted(differ)]


def bisect_cost(rows: int, months: int, components: int = FINGERPRINT_REQUESTS) -> int:
    """Requests to place one difference among `months` months by bisection and re-read its
    month: `components` requests per halving, then the month's pages and check."""
    halvings = math.ceil(math.log2(months)) if months > 1 else 0
    return components * halvings + math.ceil(rows / max(1, months) / PAGE) + 1


def read_rather_than_bisect(
    rows: int | None, months: int, components: int = FINGERPRINT_REQUESTS
) -> bool:
    """Whether re-reading a differing range of `months` months (its pages and a check) costs
    no more than bisecting it (bisect_cost). Without a known row count (the summary was not
    asked for), bisect."""
    if months <= 1:
        return True
    if rows is None:
        return False
    return math.ceil(rows / PAGE) + 1 <= bisect_cost(rows, months, components)


def span(months: Sequence[Range]) -> Range:
    """One range from the first month's start to the last month's end."""
    return months[0][0], months[-1][1]
