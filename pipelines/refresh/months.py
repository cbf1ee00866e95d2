"""Calendar months: the unit a refresh reads and replaces, and the `--months` syntax."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping


def _month(d: dt.date) -> dt.date:
    return d.replace(day=1)


def _add_months(d: dt.date, n: int) -> dt.date:
    y, m = divmod(d.year * 12 + d.month - 1 + n, 12)
    return dt.date(y, m + 1, 1)


def _months_between(a: dt.date, b: dt.date) -> list[dt.date]:
    out, m = [], _month(a)
    while m <= b:
        out.append(m)
        m = _add_months(m, 1)
    return out


def _month_end(m: dt.date) -> dt.date:
    return _add_months(m, 1) - dt.timedelta(days=1)


def _contiguous(
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


def _pages(rows_by_month: Mapping[str, int], page: int) -> int:
    """List requests to read these months ('YYYY-MM': rows), each run of adjacent months as
    one window (at least one request a window)."""
    total = run = 0
    previous: dt.date | None = None
    for key in sorted(rows_by_month):
        month = _parse_month(key)
        if previous is not None and _add_months(previous, 1) != month:
            total += max(1, math.ceil(run / page))
            run = 0
        run += rows_by_month[key]
        previous = month
    return total + (max(1, math.ceil(run / page)) if previous is not None else 0)


def _parse_month(text: str) -> dt.date:
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
    now = _month(today or dt.date.today() + dt.timedelta(days=1))  # a day of timezone slack
    first, sep, last = text.strip().partition("..")
    if sep and not first.strip():
        raise ValueError(f"{text!r} has no first month: write YYYY-MM..YYYY-MM (or YYYY-MM..)")
    a = _parse_month(first)
    b = _parse_month(last) if last.strip() else (now if sep else a)
    if a > b:
        raise ValueError(f"month range {text!r} ends before it starts")
    if b > now:
        raise ValueError(f"{b:%Y-%m} is in the future (the current month is {now:%Y-%m})")
    return a.strftime("%Y-%m"), b.strftime("%Y-%m")
