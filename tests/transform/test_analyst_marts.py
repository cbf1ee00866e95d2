"""The analysts' own marts on data whose truth is known: the sandbox's household with its
`noise` option records which rows are which recurring series and transfer pair
(sandbox/household_truth.py). The floors sit a little under bench/analyst_marts.py's figures:
they measure correctness, the bench measures the figures."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from centsync.sandbox.household import Household, generate
from centsync.sandbox.household_truth import ledger_columns, pair_score, series_score
from centsync.transform import analyst_marts, transfers
from helpers import START

NOW_MS = int(START.timestamp() * 1000)


def _inputs(hh: Household, renames: dict[str, str] | None = None) -> analyst_marts.LedgerFrames:
    tx = pl.DataFrame(ledger_columns(hh), schema_overrides={"amount": pl.Int64})
    visible = [a for a in hh.accounts if not a.hidden]
    accounts = pl.DataFrame(
        {
            "id": [a.id for a in visible],
            "name": [a.name for a in visible],
            "type": [a.type for a in visible],
        }
    )
    return analyst_marts.LedgerFrames(tx.lazy(), accounts.lazy(), START.date(), renames or {})


@pytest.fixture(scope="module")
def noisy() -> tuple[Household, dict[str, pl.DataFrame]]:
    hh = generate(3, NOW_MS, years=3, noise=True)
    return hh, analyst_marts.build(_inputs(hh))


@pytest.mark.parametrize(("seed", "years"), [(1, 3), (2, 2), (4, 6)])
def test_series_and_pairs_match_the_truth(seed: int, years: int) -> None:
    hh = generate(seed, NOW_MS, years=years, noise=True)
    marts = analyst_marts.build(_inputs(hh))
    members = marts["recurring_transactions"].select("transaction_id", "series_id").rows()
    pairs = marts["transfer_pairs"].select("out_transaction_id", "in_transaction_id").rows()
    s, p = series_score(hh.truth, members), pair_score(hh.truth, pairs)
    assert s.true > 100 * years and p.true > 50 * years  # the truth is there to be found
    assert s.precision >= 0.96 and s.recall >= 0.95, s
    assert p.precision >= 0.99 and p.recall >= 0.97, p


def test_the_noise_leaves_the_pinned_household_alone() -> None:
    plain = generate(3, NOW_MS, years=3)
    again = generate(3, NOW_MS, years=3, noise=False)
    assert [t.id for t in plain.transactions] == [t.id for t in again.transactions]
    assert plain.truth.series and plain.truth.pairs and not plain.truth.card_as_expense


def test_a_series_knows_its_cadence_price_rise_and_end(noisy: tuple[Household, dict]) -> None:
    _hh, marts = noisy
    series = {r["merchant"]: r for r in marts["recurring_series"].to_dicts()}
    assert series["acme corp payroll"]["cadence"] == "monthly"
    assert series["acme corp payroll"]["type"] == "income"
    assert series["dividend vwce"]["cadence"] == "quarterly"
    # the noise ends Spotify 6 to 10 months before today: due, overdue, ended
    spotify = series["spotify ab"]
    assert spotify["status"] == "ended" and spotify["next_expected_on"] < START.date()
    assert series["netflix.com"]["status"] == "active"
    assert series["netflix.com"]["merchant_name"] == "Netflix"
    # a price rise: the last change of amount, and when
    rent = series["rent - calle colon 12"]
    if rent["previous_amount_cents"] is not None:
        assert rent["last_amount_cents"] < rent["previous_amount_cents"]  # more money out
        assert rent["first_booked_at"] < rent["changed_on"] <= rent["last_booked_at"]
    # the next occurrence is one cadence after the last
    payroll = series["acme corp payroll"]
    assert payroll["next_expected_on"] > payroll["last_booked_at"]
    assert (payroll["next_expected_on"] - payroll["last_booked_at"]).days in range(28, 32)


def test_one_off_purchases_at_a_recurring_merchant_are_not_members(
    noisy: tuple[Household, dict],
) -> None:
    hh, marts = noisy
    members = set(marts["recurring_transactions"]["transaction_id"])
    netflix = [t for t in hh.transactions if t.concept.lower() == "netflix.com"]
    one_offs = [t.id for t in netflix if t.id not in hh.truth.series]
    assert one_offs, "the noise adds one-off purchases at Netflix"
    assert not members & set(one_offs)


def test_transfers_pair_one_to_one_and_the_rest_have_a_reason(
    noisy: tuple[Household, dict],
) -> None:
    hh, marts = noisy
    pairs, unpaired = marts["transfer_pairs"], marts["unpaired_transfers"]
    legs = pl.concat([pairs["out_transaction_id"], pairs["in_transaction_id"]])
    assert legs.n_unique() == legs.len()  # never one leg in two pairs
    assert (pairs["amount_cents"] > 0).all()
    assert not set(legs) & set(unpaired["transaction_id"])
    # the card payments the noise typed as an expense: both legs, with their reason
    card = unpaired.filter(pl.col("reason") == transfers.CARD_PAYMENT_AS_EXPENSE)
    want = {leg for pair in hh.truth.card_as_expense for leg in pair}
    assert want and set(card["transaction_id"]) == want
    # the lone legs (their other side not visible) are unmatched, not paired
    lone = [t.id for t in hh.transactions if t.concept == "Transfer from joint account"]
    assert lone
    reasons = dict(unpaired.select("transaction_id", "reason").iter_rows())
    assert {reasons[i] for i in lone} <= {transfers.NO_MATCH, transfers.AMBIGUOUS}


def test_equal_legs_at_the_same_distance_are_ambiguous_not_guessed() -> None:
    day = dt.date(2026, 1, 5)
    tx = pl.DataFrame(
        {
            "id": ["o1", "i1", "i2"],
            "account_id": ["a", "b", "c"],
            "concept": ["to b", "from a", "from a?"],
            "amount": [-5000, 5000, 5000],
            "booked_at": [day, day, day],
            "type": ["transfer"] * 3,
            "expense_goal_id": [None, None, None],
        },
        schema_overrides={"expense_goal_id": pl.String},
    )
    accounts = pl.DataFrame(
        {"id": ["a", "b", "c"], "name": list("abc"), "type": ["depository"] * 3}
    )
    marts = analyst_marts.build(analyst_marts.LedgerFrames(tx.lazy(), accounts.lazy(), day))
    assert marts["transfer_pairs"].is_empty()
    assert set(marts["unpaired_transfers"]["reason"]) == {transfers.AMBIGUOUS}


def test_expenses_drawn_down_run_over_the_months(noisy: tuple[Household, dict]) -> None:
    hh, marts = noisy
    goals = marts["expense_goals_by_month"]
    hidden = {a.id for a in hh.accounts if a.hidden}
    for goal in hh.expenses:
        rows = [t for t in hh.transactions if t.expense_goal_id == goal.id]
        rows = [t for t in rows if t.account_id not in hidden]
        mine = goals.filter(pl.col("expense_goal_id") == goal.id).sort("month")
        assert mine["transactions"].sum() == len(rows)
        assert mine["running_assigned_cents"].to_list()[-1] == sum(t.amount for t in rows)
        assert (
            mine["running_assigned_cents"].to_list() == mine["assigned_cents"].cum_sum().to_list()
        )


def test_merchant_names_group_feed_variants_and_obey_renames() -> None:
    hh = generate(3, NOW_MS, years=1)
    names = dict(analyst_marts.build(_inputs(hh))["merchant_names"].iter_rows())
    assert names["mercadona 0412 valencia"] == names["mercadona"] == "Mercadona"
    assert names["amzn mktp es"] == names["amazon.es"] == "Amazon"
    assert names["starbucks #1182"] == "Starbucks"
    assert names["uber *trip"] == "Uber"
    renamed = {"amzn mktp es": "Amazon Marketplace", "mercadona": "Mercadona (super)"}
    names = dict(analyst_marts.build(_inputs(hh, renamed))["merchant_names"].iter_rows())
    assert names["amzn mktp es"] == "Amazon Marketplace" and names["amazon.es"] == "Amazon"
    # a rename of a cleaned name (a group) renames every key of the group
    assert names["mercadona 0412 valencia"] == "Mercadona (super)"


@pytest.mark.parametrize("engine", ["in-memory", "streaming"])
def test_every_engine_builds_the_same_marts(
    noisy: tuple[Household, dict[str, pl.DataFrame]], engine: str
) -> None:
    """A household's marts run on the in-memory engine (pipelines/mart_build.py `engine`):
    the same rows, row for row, as the default engine's (issue 46)."""
    hh, default = noisy
    built = analyst_marts.build(_inputs(hh), engine=engine)  # type: ignore[arg-type]
    assert set(built) == set(default)
    for name, frame in default.items():
        assert frame.height, name
        if name == "unpaired_transfers":  # its plan has no order (a left join): as a set
            frame, built[name] = frame.sort(pl.all()), built[name].sort(pl.all())
        assert built[name].equals(frame), name
