"""Calendar months: the unit a refresh reads and replaces, and the `--months` syntax; and the
IANA time zone names.

The one implementation of month arithmetic in centsync (part of the shared kernel, with
`contract` and `money`): the warehouse, the refresh and reconciliation all use these.
A month is the date of its first day; its key is 'YYYY-MM', the form the API uses.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import zoneinfo
from collections.abc import Iterable, Mapping

MonthLike = str | dt.date


def month_start(month: MonthLike) -> dt.date:
    """The first day of a month given as 'YYYY-MM', a date, or a datetime."""
    if isinstance(month, dt.date):
        return dt.date(month.year, month.month, 1)
    return parse_month(month)


def month_key(day: dt.date) -> str:
    """'YYYY-MM' of a date: the form months take in this API (and the server's month keys)."""
    return f"{day.year:04d}-{day.month:02d}"


def add_months(day: dt.date, n: int) -> dt.date:
    """The first day of the month `n` months after `day`'s month (n may be negative)."""
    y, m = divmod(day.year * 12 + day.month - 1 + n, 12)
    return dt.date(y, m + 1, 1)


def month_end(month: dt.date) -> dt.date:
    """The last day of `month`'s month."""
    return add_months(month, 1) - dt.timedelta(days=1)


def months_between(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every month from `first`'s to `last`'s, both included (empty when first > last)."""
    out, m = [], month_start(first)
    while m <= last:
        out.append(m)
        m = add_months(m, 1)
    return out


def contiguous(
    windows: Iterable[tuple[dt.date | None, dt.date]],
) -> list[tuple[dt.date | None, dt.date]]:
    """Date ranges in order, each run of adjacent ranges merged into one."""
    out: list[tuple[dt.date | None, dt.date]] = []
    for lo, hi in windows:
        if out and lo is not None and out[-1][1] + dt.timedelta(days=1) == lo:
            out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return out


def pages(rows_by_month: Mapping[str, int], page: int) -> int:
    """List requests to read these months ('YYYY-MM': rows), each run of adjacent months as
    one window (at least one request a window)."""
    total = run = 0
    previous: dt.date | None = None
    for key in sorted(rows_by_month):
        month = parse_month(key)
        if previous is not None and add_months(previous, 1) != month:
            total += max(1, math.ceil(run / page))
            run = 0
        run += rows_by_month[key]
        previous = month
    return total + (max(1, math.ceil(run / page)) if previous is not None else 0)


def parse_month(text: str) -> dt.date:
    """The first day of the month written 'YYYY-MM'; ValueError says how to write one."""
    try:
        y, m = text.strip().split("-")
        if len(y) != 4 or len(m) != 2:
            raise ValueError
        return dt.date(int(y), int(m), 1)
    except ValueError:
        raise ValueError(f"not a month: {text!r} (write YYYY-MM, e.g. 2024-01)") from None


def parse_month_range(text: str, today: dt.date | None = None) -> tuple[str, str]:
    """A checked (first, last) month pair from `YYYY-MM`, `YYYY-MM..YYYY-MM` or `YYYY-MM..`.

    `YYYY-MM..` runs to the current month. `..YYYY-MM` is refused (an open start would mean
    "since whenever"; say the first month). Months after the current one are refused.
    """
    now = month_start(today or dt.date.today() + dt.timedelta(days=1))  # a day of slack
    first, sep, last = text.strip().partition("..")
    if sep and not first.strip():
        raise ValueError(f"{text!r} has no first month: write YYYY-MM..YYYY-MM (or YYYY-MM..)")
    a = parse_month(first)
    b = parse_month(last) if last.strip() else (now if sep else a)
    if a > b:
        raise ValueError(f"month range {text!r} ends before it starts")
    if b > now:
        raise ValueError(f"{b:%Y-%m} is in the future (the current month is {now:%Y-%m})")
    return a.strftime("%Y-%m"), b.strftime("%Y-%m")


@functools.cache
def iana_zones() -> frozenset[str]:
    """Every IANA time zone name this machine knows (`zoneinfo.available_timezones`): read once
    a process, when first asked, as listing them walks the zone files (~10 ms). The settings'
    validation and the learner of the settings' answer both ask it (issue 46)."""
    return frozenset(zoneinfo.available_timezones())
