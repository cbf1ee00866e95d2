"""The refresh's plan, on plain values: month ranges, windows, the verification budget, drilling."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from centsync.pipelines.refresh import plan
from centsync.transform.calendar import month_key, months_between, parse_month_range
from centsync.warehouse.instances import ROW_GROUP_ROWS
from centsync.warehouse.session import ONE_THREAD_ROWS

D = dt.date
NOW = dt.datetime(2024, 6, 15, 12, tzinfo=dt.UTC)


# ---- --months ranges (transform.calendar, as `centsync refresh --months` parses them) --------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-03", ("2024-03", "2024-03")),
        ("2023-11..2024-02", ("2023-11", "2024-02")),
        (" 2024-01 .. 2024-01 ", ("2024-01", "2024-01")),
        ("2024-04..", ("2024-04", "2024-06")),  # open above: to the current month
        ("2024-06", ("2024-06", "2024-06")),  # the current month itself
    ],
)
def test_month_ranges_parse(text: str, expected: tuple[str, str]) -> None:
    assert parse_month_range(text, today=D(2024, 6, 15)) == expected


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("..2024-02", "no first month"),
        ("2024-03..2024-01", "ends before it starts"),
        ("2024-07", "in the future"),
        ("2024-05..2024-08", "in the future"),
        ("2024-1", "write YYYY-MM"),
        ("24-01", "write YYYY-MM"),
        ("2024-13", "write YYYY-MM"),
        ("january", "write YYYY-MM"),
    ],
)
def test_bad_month_ranges_say_why(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_month_range(text, today=D(2024, 6, 15))


def test_a_forced_range_is_read_from_its_first_day_to_its_last() -> None:
    assert plan.forced_window(("2023-11", "2024-02")) == (D(2023, 11, 1), D(2024, 2, 29))
    assert plan.forced_window(("2023-02", "2023-02")) == (D(2023, 2, 1), D(2023, 2, 28))


# ---- the mode and the hot window -------------------------------------------------------------


def _mode(**given: object) -> tuple[str, str]:
    values: dict[str, object] = {
        "forced": None,
        "requested": "auto",
        "timezone_changed": False,
        "previous_timezone": "Europe/Madrid",
        "timezone": "Europe/Madrid",
        "has_local_rows": True,
    }
    values.update(given)
    return plan.choose_mode(**values)  # type: ignore[arg-type]


def test_the_mode_follows_what_was_asked_and_what_the_warehouse_holds() -> None:
    assert _mode() == ("incremental", "fingerprints checked")
    assert _mode(requested="hot") == ("hot", "hot window")
    assert _mode(requested="full") == ("full", "--full")
    assert _mode(has_local_rows=False) == ("full", "first sync")
    assert _mode(requested="hot", has_local_rows=False) == ("full", "first sync")
    assert _mode(timezone_changed=True, timezone="America/New_York") == (
        "full",
        "timezone changed from Europe/Madrid to America/New_York",
    )
    # forced months win over everything, even a timezone change
    assert _mode(forced=("2024-01", "2024-02"), timezone_changed=True, requested="full") == (
        "months",
        "months 2024-01..2024-02 forced",
    )


@pytest.mark.parametrize(
    ("today", "hot_months", "start"),
    [
        (D(2024, 6, 15), 2, D(2024, 5, 1)),
        (D(2024, 6, 15), 1, D(2024, 6, 1)),
        (D(2024, 6, 15), 0, D(2024, 6, 1)),  # at least the current month
        (D(2024, 1, 31), 3, D(2023, 11, 1)),  # across a new year
    ],
)
def test_the_hot_window_ends_with_the_current_month(
    today: dt.date, hot_months: int, start: dt.date
) -> None:
    assert plan.hot_window_start(today, hot_months) == start


def test_written_months_before_the_hot_window_are_read_back_in_merged_windows() -> None:
    written = [D(2024, 2, 1), D(2024, 1, 1), D(2024, 1, 1), D(2023, 10, 1), D(2024, 5, 1)]
    assert plan.written_windows(written, D(2024, 5, 1)) == [
        (D(2023, 10, 1), D(2023, 10, 31)),
        (D(2024, 1, 1), D(2024, 2, 29)),
    ]
    assert plan.written_windows([], D(2024, 5, 1)) == []


def test_the_key_warning_comes_30_days_before_expiry() -> None:
    assert plan.key_warning(None, NOW) is None
    assert plan.key_warning(NOW + dt.timedelta(days=31), NOW) is None
    soon = plan.key_warning(NOW + dt.timedelta(days=10, hours=1), NOW)
    assert soon == "the API key expires in 10 days (2024-06-25): create a new one"
    gone = plan.key_warning(NOW - dt.timedelta(days=2), NOW)
    assert gone is not None and gone.startswith("the API key expires in 0 days (2024-06-13)")


# ---- DuckDB threads and batches ---------------------------------------------------------------


def test_a_small_ledger_runs_on_one_thread() -> None:
    assert plan.single_thread(0)
    assert plan.single_thread(ONE_THREAD_ROWS - 1)
    assert not plan.single_thread(ONE_THREAD_ROWS)


@pytest.mark.parametrize(
    ("minute_limit", "pages"),
    [(0, 100), (-1, 100), (20, 10), (60, 15), (400, 100), (600, 100), (10_000, 100)],
)
def test_a_batch_is_about_15_seconds_of_the_rate_limit(minute_limit: int, pages: int) -> None:
    assert plan.batch_pages(minute_limit) == pages


# ---- a full read's windows --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "windows"),
    [("160MB", "96MB"), ("1GiB", "96MB"), ("96MB", None), ("64MB", None), ("50%", None)],
)
def test_a_first_syncs_windows_land_under_at_most_the_refreshs_limit(
    limit: str, windows: str | None
) -> None:
    assert plan.WINDOW_MEMORY == "96MB"
    assert plan.window_memory(limit) == windows


def test_a_small_span_is_one_window() -> None:
    assert plan.pack(D(2024, 1, 17), D(2024, 3, 2), 9_000) == [(D(2024, 1, 1), D(2024, 3, 31))]


def test_windows_hold_about_window_rows_each() -> None:
    # 10 years of 12,000 rows a month: 17 months (204,000 rows: a rest of 81,120 past one row
    # group) is the count nearest a window of 200,000 that no checkpoint merges
    windows = plan.pack(D(2015, 1, 5), D(2024, 12, 20), 120 * 12_000)
    assert len(windows) == 8  # ceil(120 / 17)
    assert windows[0] == (D(2015, 1, 1), D(2016, 5, 31))
    assert windows[1] == (D(2016, 6, 1), D(2017, 10, 31))
    assert windows[-1] == (D(2024, 12, 1), D(2024, 12, 31))
    for (_, hi), (lo, _) in itertools.pairwise(windows):
        assert lo == hi + dt.timedelta(days=1)  # adjacent, no gap, no overlap


@pytest.mark.parametrize(
    ("per_month", "months"),
    [
        (8_300, 24),  # 199,200 rows: a rest of 76,320
        (16_500, 12),  # 198,000
        (60_000, 4),  # 240,000 (a rest of 117,120), not 180,000 (a rest of 57,120: merged)
        (100_000, 2),  # 200,000
        (130_000, 1),  # two months would pass two row groups: a window of its own
        (300_000, 1),
    ],
)
def test_a_window_leaves_its_checkpoint_nothing_to_merge(per_month: int, months: int) -> None:
    assert plan.months_per_window(per_month) == months
    rows = months * per_month
    rest = rows % ROW_GROUP_ROWS
    if months > 1:
        assert rows >= ROW_GROUP_ROWS and (rest == 0 or rest > ROW_GROUP_ROWS / 2)
        assert rows < 2 * ROW_GROUP_ROWS


def test_a_dense_month_is_a_window_of_its_own() -> None:
    windows = plan.pack(D(2024, 1, 1), D(2024, 3, 31), 3 * 400_000)
    assert windows == [
        (D(2024, 1, 1), D(2024, 1, 31)),
        (D(2024, 2, 1), D(2024, 2, 29)),
        (D(2024, 3, 1), D(2024, 3, 31)),
    ]


def test_packed_windows_are_read_open_at_both_ends() -> None:
    windows = [(D(2020, 1, 1), D(2021, 12, 31)), (D(2022, 1, 1), D(2023, 12, 31))]
    assert plan.open_ends(windows) == [(None, D(2021, 12, 31)), (D(2022, 1, 1), None)]
    assert plan.open_ends([(D(2020, 1, 1), D(2020, 12, 31))]) == [(None, None)]
    assert plan.months_covered(windows[:1]) == {D(2020, m, 1) for m in range(1, 13)} | {
        D(2021, m, 1) for m in range(1, 13)
    }


def test_a_windows_months_come_from_its_bounds_or_what_was_read() -> None:
    assert plan.window_months(D(2023, 12, 1), D(2024, 2, 29)) == ["2023-12", "2024-01", "2024-02"]
    # open below: the oldest row read or local month at or before the end
    assert plan.window_months(
        None, D(2024, 2, 29), (D(2023, 11, 20), D(2024, 2, 3)), ["2023-09", "2024-06"]
    ) == ["2023-09", "2023-10", "2023-11", "2023-12", "2024-01", "2024-02"]
    # open above: the newest row read or local month from the start on
    assert plan.window_months(
        D(2024, 5, 1), None, (D(2024, 5, 2), D(2024, 5, 30)), ["2024-06"]
    ) == [
        "2024-05",
        "2024-06",
    ]
    # open at both ends with nothing read and nothing local: no month
    assert plan.window_months(None, None, None, []) == []
    assert plan.window_months(None, None, None, ["2024-01", "2024-03"]) == [
        "2024-01",
        "2024-02",
        "2024-03",
    ]


# ---- fingerprints: years, then months where cheaper -------------------------------------------


def _proven_parts(first: dt.date, hot_start: dt.date) -> list[tuple[str, plan.Range]]:
    """The parts an all-fingerprints plan proves, for a month of rows from `first` to the hot
    window (what a refresh whose data moved during a full read checks)."""
    months = [(month_key(m), 10, None) for m in months_between(first, hot_start)]
    history = plan.plan_history(
        months,
        hot_start,
        share=0.0,
        due_before=dt.datetime.min.replace(tzinfo=dt.UTC),
        plan="fingerprints",
        verify_pages=-1,
    )
    return [(p.label, p.range) for p in history.parts]


def test_history_years_run_from_the_first_local_month_to_the_hot_window() -> None:
    years = _proven_parts(D(2021, 7, 1), D(2024, 5, 1))
    assert years == [
        ("2021", (None, D(2021, 12, 31))),  # open below: rows older than the local ones count
        ("2022", (D(2022, 1, 1), D(2022, 12, 31))),
        ("2023", (D(2023, 1, 1), D(2023, 12, 31))),
        ("2024", (D(2024, 1, 1), D(2024, 4, 30))),  # ends the day before the hot window
    ]


def test_a_hot_window_starting_in_january_leaves_no_empty_year() -> None:
    years = _proven_parts(D(2022, 3, 1), D(2024, 1, 1))
    assert [year for year, _ in years] == ["2022", "2023"]


def test_drilling_ranges_keep_the_first_year_open_below() -> None:
    months = plan.month_ranges((None, D(2021, 12, 31)), D(2021, 10, 1))
    assert months == [
        (None, D(2021, 10, 31)),
        (D(2021, 11, 1), D(2021, 11, 30)),
        (D(2021, 12, 1), D(2021, 12, 31)),
    ]
    assert len(plan.month_ranges((D(2022, 1, 1), D(2022, 12, 31)), D(2021, 10, 1))) == 12


# ---- rolling verification ---------------------------------------------------------------------


def test_the_budget_is_the_least_pages_or_the_share_the_time_since_calls_for() -> None:
    week = dt.timedelta(days=7)
    # 70,000 rows = 350 pages; a day of a 7-day period is a seventh: 50 pages
    day = plan.verification_budget(
        70_000, least_pages=4, last_at=NOW - dt.timedelta(days=1), now=NOW, period=week
    )
    assert day == 50
    # never verified before: the least pages only
    assert plan.verification_budget(70_000, least_pages=4, last_at=None, now=NOW, period=week) == 4
    # a month since: never more than the whole ledger
    month = plan.verification_budget(
        70_000, least_pages=4, last_at=NOW - dt.timedelta(days=30), now=NOW, period=week
    )
    assert month == 350
    # a clock that went back counts as no time
    back = plan.verification_budget(
        70_000, least_pages=4, last_at=NOW + dt.timedelta(days=1), now=NOW, period=week
    )
    assert back == 4
    # a small ledger: the least pages even when its share is smaller
    small = plan.verification_budget(
        1_000, least_pages=4, last_at=NOW - dt.timedelta(hours=1), now=NOW, period=week
    )
    assert small == 4


def _at(days_ago: float) -> dt.datetime:
    return NOW - dt.timedelta(days=days_ago)


def test_months_due_are_always_verified_and_the_others_fit_the_budget() -> None:
    due_before = NOW - dt.timedelta(days=7)
    order = [
        ("2023-03", 500, None),  # never verified: due
        ("2023-01", 900, _at(9)),  # older than the period: due
        ("2023-05", 300, _at(5)),  # within budget with 2023-03 (separate windows)
        ("2023-04", 200, _at(4)),  # adjacent to 2023-03 and 2023-05: one window, 1,000 rows
        ("2023-06", 600, _at(3)),  # would take the pages over the budget: stop here
        ("2023-07", 1, _at(2)),
    ]
    chosen = plan.months_to_verify(order, budget=11, due_before=due_before)
    assert chosen == {"2023-03": 500, "2023-01": 900, "2023-05": 300, "2023-04": 200}
    assert plan.month_windows(chosen) == [
        (D(2023, 1, 1), D(2023, 1, 31)),
        (D(2023, 3, 1), D(2023, 5, 31)),
    ]


def test_due_months_are_verified_even_over_the_budget_and_months_read_are_skipped() -> None:
    due_before = NOW - dt.timedelta(days=7)
    order = [("2022-01", 10_000, None), ("2022-02", 10_000, _at(8)), ("2022-03", 5, _at(1))]
    assert plan.months_to_verify(order, budget=0, due_before=due_before) == {
        "2022-01": 10_000,
        "2022-02": 10_000,
    }
    read = [("2021-12", "2022-01")]
    assert plan.already_read("2022-01", read) and not plan.already_read("2022-02", read)
    assert plan.months_to_verify(order, budget=0, due_before=due_before, read=read) == {
        "2022-02": 10_000
    }


def test_windows_packed_again_cover_the_same_months_from_the_rows_a_month_read() -> None:
    windows = plan.pack(D(2015, 1, 1), D(2024, 12, 31), 120 * 8_300)  # 24 months each
    rest = windows[1:]
    # the first window held 5,000 rows a month: 40 months (200,000 rows) to a window now
    again = plan.repack(rest, [5_000] * 24)
    assert again[0] == (D(2017, 1, 1), D(2020, 4, 30))
    assert plan.months_covered(again) == plan.months_covered(rest)
    for (_, hi), (lo, _) in itertools.pairwise(again):
        assert lo == hi + dt.timedelta(days=1)
    assert plan.repack(rest, [8_300] * 24) == rest  # the rows the plan assumed: the same windows


def test_a_growing_window_is_projected_by_its_trend() -> None:
    rest = [(D(2017, 1, 1), D(2024, 12, 31))]
    # 24 months growing by 100 rows a month, from 3,000 to 5,300: the next months hold 5,400,
    # 5,500, ... rows; 29 of them hold 197,200 rows, a rest of 74,320 (by their mean, 4,150 a
    # month, the 48 months chosen would hold 413,000 rows)
    again = plan.repack(rest, [3_000 + 100 * m for m in range(24)])
    assert again[0] == (D(2017, 1, 1), D(2019, 5, 31))
    # under TREND_MONTHS months the mean: 40 months at 5,000
    assert plan.repack(rest, [4_000, 6_000])[0] == (D(2017, 1, 1), D(2020, 4, 30))


def test_a_quiet_window_is_followed_by_windows_of_the_rows_left() -> None:
    rest = [(D(2017, 1, 1), D(2020, 12, 31))]  # 48 months
    # a dormant year read: by it alone, one window of all 48 months (a row a month)
    assert plan.repack(rest, [0] * 12) == rest
    # 240,000 rows left over 48 months, 5,000 a month: 40 months, 200,000 rows
    again = plan.repack(rest, [0] * 12, left=240_000)
    assert again[0] == (D(2017, 1, 1), D(2020, 4, 30))
    # a trend keeps its shape, its level scaled to the rows left
    growing = [3_000 + 100 * m for m in range(24)]
    assert plan.repack(rest, growing, left=sum(5_400 + 100 * x for x in range(48)))[0] == (
        D(2017, 1, 1),
        D(2019, 5, 31),
    )
