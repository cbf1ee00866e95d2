"""Properties of the marts on random ledgers (hypothesis): the spending rules hold in every grouping."""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from centsync.transform import balances, marts, spending

ACCOUNTS = ["a0000000-0000-0000-0000-000000000001", "a0000000-0000-0000-0000-000000000002"]
CATEGORIES = [None, "c0000000-0000-0000-0000-000000000001", "c0000000-0000-0000-0000-000000000002"]
TODAY = dt.date(2026, 11, 15)
CONCEPTS = st.sampled_from(
    [
        "Coffee",
        " coffee ",
        "COFFEE\tshop",
        "Coffee  Shop",
        "Rent",
        "Ünïcode  Café",
        "x\u00a0y",
        "a\x1cb",
    ]
)

rows = st.lists(
    st.fixed_dictionaries(
        {
            "account_id": st.sampled_from(ACCOUNTS),
            "concept": CONCEPTS,
            "amount": st.integers(-(10**9), 10**9),
            "booked_at": st.dates(dt.date(2023, 1, 1), TODAY),
            "type": st.sampled_from(["expense", "income", "transfer"]),
            "category_id": st.sampled_from(CATEGORIES),
        }
    ),
    max_size=60,
)


def ledger(items: list[dict[str, object]]) -> pl.LazyFrame:
    frame = pl.DataFrame(
        [{"id": f"t{i:06d}", **r} for i, r in enumerate(items)],
        schema={
            "id": pl.String,
            "account_id": pl.String,
            "concept": pl.String,
            "amount": pl.Int64,
            "booked_at": pl.Date,
            "type": pl.String,
            "category_id": pl.String,
        },
    )
    return frame.lazy()


def categories() -> pl.LazyFrame:
    return pl.LazyFrame({"id": [CATEGORIES[1]], "name": ["Food"]})


def expense_sum(items: list[dict[str, object]]) -> int:
    return sum(int(r["amount"]) for r in items if r["type"] == "expense")  # type: ignore[call-overload]


@settings(max_examples=60, deadline=None)
@given(rows)
def test_spending_equals_the_sum_of_expense_rows_in_every_grouping(
    items: list[dict[str, object]],
) -> None:
    tx = ledger(items)
    by_cat = spending.spending_by_month_category(tx, categories()).collect()
    by_merchant = spending.spending_by_month_merchant(tx).collect()
    by_type = spending.transactions_by_month_type(tx).collect()
    flow = spending.cash_flow_by_month(spending.transactions_by_month_type(tx)).collect()
    want = expense_sum(items)
    assert by_cat["amount_cents"].sum() == want
    assert by_merchant["amount_cents"].sum() == want
    assert by_type.filter(pl.col("type") == "expense")["amount_cents"].sum() == want
    assert flow["spending_cents"].sum() == want
    n_expense = sum(1 for r in items if r["type"] == "expense")
    assert by_cat["transactions"].sum() == n_expense == by_merchant["transactions"].sum()
    # every grouping of every row sums to the ledger's total
    assert by_type["amount_cents"].sum() == sum(int(r["amount"]) for r in items)  # type: ignore[call-overload]
    assert (flow["net_cents"] == flow["income_cents"] + flow["spending_cents"]).all()


@settings(max_examples=60, deadline=None)
@given(rows)
def test_each_month_and_category_is_the_sum_of_its_own_rows(items: list[dict[str, object]]) -> None:
    by_cat = spending.spending_by_month_category(ledger(items), categories()).collect()
    for row in by_cat.iter_rows(named=True):
        mine = [
            r
            for r in items
            if r["type"] == "expense"
            and r["category_id"] == row["category_id"]
            and dt.date(r["booked_at"].year, r["booked_at"].month, 1) == row["month"]  # type: ignore[union-attr]
        ]
        assert row["amount_cents"] == sum(int(r["amount"]) for r in mine)  # type: ignore[call-overload]
        assert row["transactions"] == len(mine)
        assert row["category_name"] == (
            "Uncategorized" if row["category_id"] is None else
            "Food" if row["category_id"] == CATEGORIES[1] else
            f"unnamed category {row['category_id'][:8]} (never in spending)"
        )  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(rows, st.integers(1, 10**9), st.dates(dt.date(2023, 1, 1), TODAY))
def test_a_transfer_between_own_accounts_changes_no_spending_or_income(
    items: list[dict[str, object]], amount: int, day: dt.date
) -> None:
    before = spending.cash_flow_by_month(
        spending.transactions_by_month_type(ledger(items))
    ).collect()
    legs = [
        {"account_id": ACCOUNTS[0], "concept": "To savings", "amount": -amount, "booked_at": day, "type": "transfer", "category_id": None},
        {"account_id": ACCOUNTS[1], "concept": "From current", "amount": amount, "booked_at": day, "type": "transfer", "category_id": None},
    ]  # fmt: skip
    after_tx = ledger(items + legs)
    after = spending.cash_flow_by_month(spending.transactions_by_month_type(after_tx)).collect()
    cols = ["month", "income_cents", "spending_cents", "net_cents"]
    joined = before.select(cols).join(after.select(cols), on="month", how="full", coalesce=True)
    for row in joined.iter_rows(named=True):
        for c in cols[1:]:
            assert (row[c] or 0) == (row[f"{c}_right"] or 0)
    assert (
        after["transfers_cents"].sum() == before["transfers_cents"].sum()
    )  # both legs net to zero
    spend = spending.spending_by_month_merchant(after_tx).collect()["amount_cents"].sum()
    assert spend == expense_sum(items)


@settings(max_examples=60, deadline=None)
@given(rows, st.lists(st.integers(-(10**10), 10**10), min_size=2, max_size=2))
def test_rolling_balances_back_then_forward_returns_the_current_balances(
    items: list[dict[str, object]], current: list[int]
) -> None:
    accounts = pl.LazyFrame(
        {
            "id": ACCOUNTS,
            "name": ["Current", "Card"],
            "type": ["depository", "credit"],
            "balance": current,
        }
    )
    daily = balances.balance_daily(accounts, ledger(items), TODAY).collect()
    for account, now in zip(ACCOUNTS, current, strict=True):
        mine = daily.filter(pl.col("account_id") == account).sort("date")
        assert mine["date"][-1] == TODAY and mine["balance_cents"][-1] == now
        own = [r for r in items if r["account_id"] == account]
        first = min((r["booked_at"] for r in own), default=TODAY)
        assert mine["date"][0] == first and mine.height == (TODAY - first).days + 1  # type: ignore[operator]
        # forward: the day before the first row plus every amount is today's balance
        opening = int(mine["balance_cents"][0]) - sum(
            int(r["amount"])
            for r in own
            if r["booked_at"] == first  # type: ignore[call-overload]
        )
        assert opening + sum(int(r["amount"]) for r in own) == now  # type: ignore[call-overload]
        steps = mine["balance_cents"].diff().drop_nulls().to_list()
        by_day = {}
        for r in own:
            by_day[r["booked_at"]] = by_day.get(r["booked_at"], 0) + int(r["amount"])  # type: ignore[call-overload]
        assert steps == [by_day.get(d, 0) for d in mine["date"].to_list()[1:]]
    worth = balances.net_worth_daily(daily.lazy()).collect()
    last = worth.filter(pl.col("date") == TODAY).row(0, named=True)
    assert last["assets_cents"] == sum(b for b in current if b > 0)
    assert last["liabilities_cents"] == -sum(b for b in current if b < 0)
    assert last["net_worth_cents"] == sum(current)


@settings(max_examples=40, deadline=None)
# Characters this Python's Unicode database does not assign (Cn) lower-case differently in
# Polars' newer tables (docs/reconciliation.md): the rule holds for every assigned one.
@given(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cn",)), max_size=30))
def test_merchant_key_is_the_contracts_rule(concept: str) -> None:
    # the contract: trimmed, lower-cased, inner whitespace runs collapsed (Python's own split)
    got = pl.select(spending.merchant_key(pl.lit(concept))).item()
    assert got == " ".join(concept.split()).lower()


def test_build_validates_every_mart_and_counts_are_integers() -> None:
    items = [
        {"account_id": ACCOUNTS[0], "concept": "Rent", "amount": -100_000, "booked_at": dt.date(2026, 10, 1), "type": "expense", "category_id": CATEGORIES[1]},
        {"account_id": ACCOUNTS[1], "concept": "Salary", "amount": 250_000, "booked_at": dt.date(2026, 10, 28), "type": "income", "category_id": CATEGORIES[2]},
    ]  # fmt: skip
    core = marts.CoreFrames(
        transactions=ledger(items),
        accounts=pl.LazyFrame({"id": ACCOUNTS, "name": ["A", "B"], "type": ["depository", "credit"], "balance": [5, -7]}),
        categories=categories(),
        net_worth_history=pl.LazyFrame(
            {"refresh_id": ["r"], "snapshot_at": [dt.datetime(2026, 11, 15, tzinfo=dt.UTC)], "currency": ["EUR"],
             "assets": [5], "liabilities": [7], "net_worth": [-2], "account_count": [2]}
        ),
        today=TODAY,
    )  # fmt: skip
    out = marts.build(core)
    assert set(out) == set(marts.MART_NAMES)
    # the refresh's validator (the warehouse's fast path, as pipelines/reconcile.py passes it)
    # gives the same marts, and every mart passed pandera's rules by its one-pass screen
    from centsync.warehouse import validation

    screened = []

    def fast(schema: Any, frame: pl.DataFrame) -> pl.DataFrame:
        screened.append(validation.passes_every_check(schema, frame))
        return validation.validated(schema, frame)

    same = marts.build(core, validate=fast)
    assert all(same[name].equals(out[name]) for name in marts.MART_NAMES)
    assert screened == [True] * len(marts.MART_NAMES)
    assert out["spending_by_month_category"]["transactions"].dtype == pl.Int64
    names = dict(out["cash_flow_by_month"].select("month", "net_cents").iter_rows())
    assert names[dt.date(2026, 10, 1)] == 150_000
