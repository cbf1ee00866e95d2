"""The cost-based plan (issue 26), on plain values: each part of the history re-read or proven,
whichever costs fewer requests; the estimate; locating a difference (spending by month, bisection)."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from centsync.pipelines.refresh import fingerprints as fp
from centsync.pipelines.refresh import plan
from centsync.transform.bisection import halves

D = dt.date
NOW = dt.datetime(2026, 11, 15, 12, tzinfo=dt.UTC)
HOT = D(2026, 10, 1)
DUE = NOW - dt.timedelta(days=7)
FRESH = NOW - dt.timedelta(days=1)  # verified a day ago: not due


def _months(
    first: str, last: str, rows: int, verified: dt.datetime | None = FRESH
) -> list[tuple[str, int, dt.datetime | None]]:
    """Every month first..last ('YYYY-MM') with `rows` rows each."""
    lo, hi = plan.parse_month(first), plan.parse_month(last)
    return [(plan.month_key(m), rows, verified) for m in plan.months_between(lo, hi)]


def _plan(months: list[tuple[str, int, dt.datetime | None]], **given: object) -> plan.HistoryPlan:
    values: dict[str, object] = {"share": 1 / 7, "due_before": DUE, "verify_pages": 4}
    values.update(given)
    return plan.plan_history(months, HOT, **values)  # type: ignore[arg-type]


def _covers_the_history_once(history: plan.HistoryPlan) -> None:
    """The parts run from open below to the day before the hot window, without gap or overlap."""
    assert history.parts[0].range[0] is None
    assert history.parts[-1].range[1] == HOT - dt.timedelta(days=1)
    for before, after in zip(history.parts, history.parts[1:], strict=False):
        assert after.range[0] == before.range[1] + dt.timedelta(days=1)


def test_a_household_rereads_everything_at_the_cost_of_a_first_sync() -> None:
    # about 50 rows a month over 10 years: a year is 3 pages, its fingerprints 3 requests plus
    # the chance of a difference and the verification share: re-reading is never dearer
    history = _plan(_months("2016-11", "2026-11", 48))
    _covers_the_history_once(history)
    assert [p.label for p in history.parts] == [str(y) for y in range(2016, 2027)]
    assert history.everything and not history.proven()
    rows = 48 * 121
    assert history.hot_rows == 48 * 2
    assert history.estimate() == plan.full_read_requests(rows)
    assert plan.full_read_requests(rows) == 11 + 1 + math.ceil(rows / 200)  # 41
    assert history.read_windows() == [(None, HOT - dt.timedelta(days=1))]


def test_a_big_ledger_proves_its_years_and_the_estimate_counts_what_it_spends() -> None:
    history = _plan(_months("2017-01", "2026-11", 1_700), share=0.0)
    assert not history.everything and not history.read_windows()
    assert len(history.proven()) == 10
    # fixed 11, 3 a year, the hot window (3,400 rows: 17 pages) and its check; no month is due
    # and none (9 pages) fits the 4-page minimum of rolling verification
    assert history.verify == {}
    assert history.estimate() == 11 + 30 + 18
    # a month due is always verified: its pages and its check
    due = _plan([("2017-01", 1_700, None), *_months("2017-02", "2026-11", 1_700)], share=0.0)
    assert due.verify == {"2017-01": 1_700}
    assert due.estimate() == 11 + 30 + 18 + 9 + 1
    # verification off: nothing is verified, due or not
    off = _plan([("2017-01", 1_700, None), *_months("2017-02", "2026-11", 1_700)], verify_pages=-1)
    assert off.verify == {} and off.estimate() == 11 + 30 + 18


@pytest.mark.parametrize(("rows", "read"), [(600, True), (601, False)])
def test_a_part_is_reread_when_its_pages_cost_no_more_than_its_fingerprints(
    rows: int, read: bool
) -> None:
    # no chance of a difference and no verification share: proving costs exactly 3 requests;
    # 600 rows are 3 pages (a tie: re-read, and exact), 601 rows are 4
    part = plan.price(
        "2024", (D(2024, 1, 1), D(2024, 12, 31)), [(rows, False)], share=0.0, drill_chance=0.0
    )
    assert part.read_cost == math.ceil(rows / 200)
    assert part.prove_cost == plan.FINGERPRINT_REQUESTS
    assert part.read is read


def test_a_year_due_for_verification_is_reread_rather_than_proven_and_then_read() -> None:
    # 4,000 rows (20 pages) proven cost 3 + ... when fresh; when every month is due, rolling
    # verification would read it all anyway, so proving it first only adds requests
    fresh = _plan(_months("2024-01", "2024-12", 333) + _months("2025-01", "2026-11", 400))
    assert fresh.parts[0].read is False
    due = _plan(
        _months("2024-01", "2024-12", 333, verified=NOW - dt.timedelta(days=30))
        + _months("2025-01", "2026-11", 400)
    )
    assert due.parts[0].read is True
    assert due.parts[0].prove_cost > due.parts[0].read_cost


def test_a_single_row_in_1900_costs_one_window_not_127_years_of_fingerprints() -> None:
    history = _plan([("1900-03", 1, FRESH), *_months("2017-01", "2026-11", 1_700)])
    _covers_the_history_once(history)
    labels = [p.label for p in history.parts]
    assert labels[:2] == ["1900", "1901..2016"]
    assert len(history.parts) == 12
    assert len(history.proven()) == 10  # the years holding the ledger
    # the old row and the empty years are read as one window, open below
    assert history.read_windows() == [(None, D(2016, 12, 31))]


def test_years_without_rows_between_and_after_are_one_part_each() -> None:
    months = _months("2017-01", "2017-12", 2_000) + _months("2021-01", "2021-06", 2_000)
    history = _plan(months)
    _covers_the_history_once(history)
    assert [p.label for p in history.parts] == ["2017", "2018..2020", "2021", "2022..2026"]
    empty = [p for p in history.parts if p.rows == 0]
    assert all(p.read for p in empty)  # nothing to read: cheaper than any fingerprint


def test_no_history_before_the_hot_window_is_one_empty_part() -> None:
    history = _plan(_months("2026-10", "2026-11", 30))
    assert [(p.label, p.range, p.rows) for p in history.parts] == [
        ("2026", (None, D(2026, 9, 30)), 0)
    ]
    assert history.everything and history.hot_rows == 60


def test_the_fingerprints_plan_proves_every_part() -> None:
    history = _plan(_months("2016-11", "2026-11", 48), plan="fingerprints")
    assert not history.read_windows() and len(history.proven()) == 11
    assert plan.describe(history.parts[0])["read_cost"] is None  # JSON has no infinity
    # what the refresh spent before issue 26 on a 10-year household, a refresh a day (52-53
    # measured): fixed 11, 3 x 11 years, a seventh of 5,808 rows (5 pages) and a check, the hot
    # window's page and check
    assert history.estimate() == 11 + 33 + 6 + 2


def test_the_verification_share_is_the_time_since_the_last_over_the_period() -> None:
    week = dt.timedelta(days=7)
    assert plan.verification_share(None, NOW, week) == 0.0
    assert plan.verification_share(NOW - dt.timedelta(days=1), NOW, week) == pytest.approx(1 / 7)
    assert plan.verification_share(NOW - dt.timedelta(days=30), NOW, week) == 1.0
    assert plan.verification_share(NOW + dt.timedelta(days=1), NOW, week) == 0.0


def test_a_full_read_costs_a_summary_its_pages_and_for_a_big_ledger_its_span() -> None:
    assert plan.full_read_requests(0) == 13
    assert plan.full_read_requests(1_763) == 21
    assert plan.full_read_requests(plan.WINDOW_ROWS) == 11 + 1 + plan.WINDOW_ROWS // 200
    # two windows: the span's two one-row pages and the second window's partial page
    assert plan.full_read_requests(300_000) == 11 + 1 + 1_500 + 2 + 1


# ---- locating a difference -------------------------------------------------------------------

YEAR = plan.month_ranges((None, D(2024, 12, 31)), D(2024, 1, 1))


def test_spending_by_month_places_changed_expenses_and_older_rows_in_the_first_month() -> None:
    local = {"2024-01": (-100, 2), "2024-05": (-50, 1), "2024-09": (-70, 1)}
    server = {"2023-12": (-5, 1), "2024-01": (-100, 2), "2024-05": (-51, 1), "2024-07": (-9, 1)}
    found = plan.spending_months(YEAR, server, local)
    # 2023-12 (older than anything local: the open first month), 2024-05 (amount), 2024-07
    # (added), 2024-09 (deleted)
    assert [plan.month_key(hi) for _, hi in found] == ["2024-01", "2024-05", "2024-07", "2024-09"]
    assert found[0][0] is None


@pytest.mark.parametrize(
    ("rows", "months", "components", "read"),
    [
        (20_000, 12, 3, False),  # 101 requests to read; 12 + 9 + 1 to bisect
        (2_400, 12, 3, True),  # 13 to read; 12 + 1 + 1 to bisect
        (20_000, 12, 1, False),
        (5_000, 1, 3, True),  # one month: nothing left to halve
        (None, 6, 1, False),  # the count unknown: bisect
    ],
)
def test_a_differing_range_is_read_when_that_costs_no_more_than_bisecting_it(
    rows: int | None, months: int, components: int, read: bool
) -> None:
    assert plan.read_rather_than_bisect(rows, months, components) is read


def test_bisection_halves_keep_the_months_in_order() -> None:
    older, newer = halves(YEAR)
    assert len(older) == 6 and len(newer) == 6
    assert plan.span(older) == (None, D(2024, 6, 30))
    assert plan.span(newer) == (D(2024, 7, 1), D(2024, 12, 31))
    assert plan.bisect_cost(20_000, 12) == 3 * 4 + 9 + 1


def test_the_other_half_of_a_bisection_is_the_difference_of_fingerprints() -> None:
    whole: fp.Fingerprint = (
        (10, 500, -300, 0),
        frozenset({("food", -200, 4), ("rent", -100, 1)}),
        frozenset({("shop", -300, 5)}),
    )
    older: fp.Partial = (
        (4, 500, -120, 0),
        frozenset({("food", -120, 3)}),
        None,  # not asked for: stays unknown
    )
    rest = fp.subtract(whole, older)
    assert rest == ((6, 0, -180, 0), frozenset({("food", -80, 1), ("rent", -100, 1)}), None)
    local: fp.Fingerprint = (
        (6, 0, -180, 0),
        frozenset({("food", -80, 1), ("rent", -99, 1)}),
        frozenset(),
    )
    assert fp.differing(rest, local) == (1,)  # the unknown merchant part is not compared
