"""The analysts' marts beyond the service's own numbers: recurring series, transfers paired,
Expenses drawn down and merchant display names, each validated by its pandera schema.

These are ours, not the service's: nothing in the reconciliation compares them (the spending
marts keep the service's rule; `marts.spending_without_transfers` is the view that leaves out
paired transfers and card payments). Money columns end in `_cents`, in the service's sign.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pandera.polars as pa
import polars as pl

from centsync.transform import merchants, recurring, spending, transfers
from centsync.transform.marts import MAX_CENTS, Engine, collect, collect_all


def _cents(nullable: bool = False) -> pa.Column:
    return pa.Column(pl.Int64, pa.Check.in_range(-MAX_CENTS, MAX_CENTS), nullable=nullable)


def _text(nullable: bool = False) -> pa.Column:
    return pa.Column(pl.String, nullable=nullable)


def _day(nullable: bool = False) -> pa.Column:
    return pa.Column(pl.Date, nullable=nullable)


def _schema(name: str, columns: dict[str, pa.Column], unique: list[str]) -> pa.DataFrameSchema:
    return pa.DataFrameSchema(columns, strict=True, name=name, unique=unique)


SCHEMAS: dict[str, pa.DataFrameSchema] = {
    "merchant_names": _schema(
        "merchant_names", {"merchant": _text(), "merchant_name": _text()}, ["merchant"]
    ),
    "recurring_series": _schema(
        "recurring_series",
        {
            "series_id": _text(),
            "merchant": _text(),
            "merchant_name": _text(),
            "account_id": _text(),
            "account_name": _text(nullable=True),
            "type": pa.Column(pl.String, pa.Check.isin(["expense", "income"])),
            "cadence": pa.Column(pl.String, pa.Check.isin([c.name for c in recurring.CADENCES])),
            "typical_amount_cents": _cents(),
            "last_amount_cents": _cents(),
            "occurrences": pa.Column(pl.Int64, pa.Check.ge(1)),
            "first_booked_at": _day(),
            "last_booked_at": _day(),
            "next_expected_on": _day(),
            "status": pa.Column(pl.String, pa.Check.isin(["active", "ended"])),
            "previous_amount_cents": _cents(nullable=True),
            "changed_on": _day(nullable=True),
        },
        ["series_id"],
    ),
    "recurring_transactions": _schema(
        "recurring_transactions",
        {
            "transaction_id": _text(),
            "series_id": _text(),
            "booked_at": _day(),
            "amount_cents": _cents(),
        },
        ["transaction_id"],
    ),
    "transfer_pairs": _schema(
        "transfer_pairs",
        {
            "out_transaction_id": _text(),
            "in_transaction_id": _text(),
            "from_account_id": _text(),
            "to_account_id": _text(),
            "amount_cents": pa.Column(pl.Int64, pa.Check.in_range(1, MAX_CENTS)),
            "lag_days": pa.Column(pl.Int64),
            "booked_at": _day(),
            "out_type": _text(),
            "in_type": _text(),
        },
        ["out_transaction_id"],
    ),
    "unpaired_transfers": _schema(
        "unpaired_transfers",
        {
            "transaction_id": _text(),
            "account_id": _text(),
            "booked_at": _day(),
            "amount_cents": _cents(),
            "reason": pa.Column(pl.String, pa.Check.isin(list(transfers.REASONS))),
            "other_transaction_id": _text(nullable=True),
        },
        ["transaction_id"],
    ),
    "expense_goals_by_month": _schema(
        "expense_goals_by_month",
        {
            "expense_goal_id": _text(),
            "month": _day(),
            "assigned_cents": _cents(),
            "transactions": pa.Column(pl.Int64, pa.Check.ge(0)),
            "running_assigned_cents": _cents(),
        },
        ["expense_goal_id", "month"],
    ),
}
ANALYST_MARTS = tuple(SCHEMAS)


@dataclass(frozen=True)
class LedgerFrames:
    """The inputs: transactions (id, account_id, concept, amount, booked_at, type,
    expense_goal_id) and accounts (id, name, type); the service's today; the renames."""

    transactions: pl.LazyFrame
    accounts: pl.LazyFrame
    today: dt.date
    renames: Mapping[str, str] = field(default_factory=dict)


def expense_goals_by_month(tx: pl.LazyFrame) -> pl.LazyFrame:
    """What each Expense drew per month, and its running total (the ledger's assignments)."""
    return (
        tx.filter(pl.col("expense_goal_id").is_not_null())
        .group_by("expense_goal_id", month=spending.month_of(pl.col("booked_at")))
        .agg(assigned_cents=pl.col("amount").sum(), transactions=pl.len().cast(pl.Int64))
        .sort("expense_goal_id", "month")
        .with_columns(
            running_assigned_cents=pl.col("assigned_cents").cum_sum().over("expense_goal_id")
        )
    )


def _recurring(
    tx: pl.LazyFrame,
    keys: pl.LazyFrame,
    names: pl.LazyFrame,
    accounts: pl.LazyFrame,
    today: dt.date,
    engine: Engine = "auto",
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    found = (
        recurring.members(tx, keys, engine=engine)
        .lazy()
        .with_columns(series_id=recurring.series_id(pl.col("cadence")))
    )
    account_names = accounts.select(pl.col("id").alias("account_id"), account_name="name")
    series = (
        recurring.series(found, today)
        .join(names, "merchant", "left")
        .join(account_names, "account_id", "left")
        .select(list(SCHEMAS["recurring_series"].columns))
        .sort("merchant", "account_id", "series_id")
    )
    members = found.select(
        transaction_id="id", series_id="series_id", booked_at="booked_at", amount_cents="amount"
    ).sort("series_id", "booked_at", "transaction_id")
    return series, members


def build(
    frames: LedgerFrames,
    *,
    validate: Callable[[pa.DataFrameSchema, pl.DataFrame], pl.DataFrame] | None = None,
    engine: Engine = "auto",
) -> dict[str, pl.DataFrame]:
    """Every analyst mart, collected (one plan) and validated (pandera by default), on the
    Polars `engine` (a household's ledger: "in-memory", 40 % less CPU than the default's
    plans here: docs/benchmarks.md, issue 46)."""
    # the merchant key once per distinct concept (a regular expression; a ledger holds a few
    # hundred concepts in a million rows), joined only to the rows a series may hold
    tx = frames.transactions
    concepts = tx.select("concept").unique()
    merchant = spending.merchant_key(pl.col("concept"))
    keys = concepts.with_columns(merchant=merchant).pipe(collect, engine).lazy()
    names = merchants.display_names(keys, frames.renames)
    series, members = _recurring(tx, keys, names, frames.accounts, frames.today, engine)
    pairs, unpaired = transfers.pairs_and_unpaired(tx, frames.accounts, engine=engine)
    # only the unpaired legs' rows: joined to the ledger whole, it was held as the join's
    # build side (1,000,000 rows: +80 MB)
    context = frames.transactions.select(
        transaction_id="id", account_id="account_id", booked_at="booked_at", amount_cents="amount"
    ).filter(pl.col("transaction_id").is_in(unpaired["transaction_id"].implode()))
    unpaired_full = (
        unpaired.lazy()
        .join(context, "transaction_id", "left")
        .select(list(SCHEMAS["unpaired_transfers"].columns))
    )
    lazy = {
        "merchant_names": names.sort("merchant"),
        "recurring_series": series,
        "recurring_transactions": members,
        "unpaired_transfers": unpaired_full,
        "expense_goals_by_month": expense_goals_by_month(frames.transactions),
    }
    collected = dict(zip(lazy, collect_all(list(lazy.values()), engine), strict=True))
    collected["transfer_pairs"] = pairs.rename({"out_on": "booked_at"}).with_columns(
        pl.col("lag_days").cast(pl.Int64)
    )
    check = validate or (lambda schema, frame: schema.validate(frame))
    return {name: check(SCHEMAS[name], collected[name]) for name in ANALYST_MARTS}
