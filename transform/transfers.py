"""Transfers paired: the two legs of money moved between the owner's own accounts, pure Polars.

A pair is an outgoing leg (amount < 0) and an incoming one (amount > 0) of the same magnitude,
in two different accounts, the incoming one booked from `BEFORE` days before to `WINDOW` days
after the outgoing one, at least one of them typed `transfer` (the other may be typed
otherwise: a transfer the feed typed as an expense). Legs are matched one to one, nearest in
days first (at the same distance in days, two legs typed `transfer` before a mixed couple):
a leg and a candidate that are each other's only nearest candidate are paired, then the paired legs leave and the rest are matched again (`ROUNDS` times). Never is one leg
in two pairs.

What is left is listed with a reason (`unpaired`):

- a transfer leg with no candidate: its other side is in an account the service does not show
  (a hidden account, another person's), or it was never booked;
- a transfer leg whose nearest candidates are two or more at the same distance: ambiguous;
- an expense-typed leg paid into a credit account's transfer leg: a card payment typed as an
  expense (it counts as spending in the service's rule; our spending view leaves it out). Its
  incoming leg is listed too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from centsync.transform.marts import collect

if TYPE_CHECKING:
    from centsync.transform.marts import Engine

WINDOW = 4  # days the incoming leg may come after the outgoing one
BEFORE = 1  # days it may come before (the two banks' booking days differ)
ROUNDS = 4
CREDIT_TYPES = ("credit",)

NO_MATCH = "no_matching_leg"
AMBIGUOUS = "ambiguous"
CARD_PAYMENT_AS_EXPENSE = "card_payment_typed_as_expense"
REASONS = (NO_MATCH, AMBIGUOUS, CARD_PAYMENT_AS_EXPENSE)


def candidates(
    tx: pl.LazyFrame, accounts: pl.LazyFrame, *, engine: Engine = "auto"
) -> pl.DataFrame:
    """Every (out, in) couple that could be a pair, with its lag in days (collected on
    `engine`: transform/marts.py `Engine`).

    The incoming legs (refunds and transfers in: a few hundred in a million rows) are
    collected first and the outgoing ones (every expense) kept only at their amounts before
    the join: joined whole, the outgoing side was held in memory (1,000,000 rows: 130 MB over
    the plan's start, now 40-60, and less CPU: docs/benchmarks.md)."""
    legs = tx.select("id", "account_id", "amount", "booked_at", "type").filter(
        pl.col("type") != "income"
    )
    kinds = accounts.select(pl.col("id").alias("account_id"), account_type="type")
    ins = collect(
        legs.filter(pl.col("amount") > 0)
        .join(kinds, "account_id", "left")
        .select(
            in_transaction_id="id",
            to_account_id="account_id",
            in_on="booked_at",
            in_type="type",
            to_account_type="account_type",
            amount_cents="amount",
        ),
        engine,
    )
    outs = legs.filter(
        (pl.col("amount") < 0) & (-pl.col("amount")).is_in(ins["amount_cents"].implode())
    ).select(
        out_transaction_id="id",
        from_account_id="account_id",
        out_on="booked_at",
        out_type="type",
        amount_cents=-pl.col("amount"),
    )
    lag = (pl.col("in_on") - pl.col("out_on")).dt.total_days()
    return (
        outs.join(ins.lazy(), "amount_cents")
        .with_columns(lag_days=lag)
        .filter(
            (pl.col("from_account_id") != pl.col("to_account_id"))
            & pl.col("lag_days").is_between(-BEFORE, WINDOW)
            & ((pl.col("out_type") == "transfer") | (pl.col("in_type") == "transfer"))
        )
        .pipe(collect, engine)
    )


def _mutual_nearest(cand: pl.DataFrame) -> pl.DataFrame:
    # nearest in days; at the same distance, two legs typed `transfer` before a mixed couple
    typed = (pl.col("out_type") != "transfer").cast(pl.Int64) + (
        pl.col("in_type") != "transfer"
    ).cast(pl.Int64)
    dist = pl.col("lag_days").abs() * 3 + typed
    nearest_out = dist == dist.min().over("out_transaction_id")
    nearest_in = dist == dist.min().over("in_transaction_id")
    return cand.filter(
        nearest_out
        & nearest_in
        & (nearest_out.sum().over("out_transaction_id") == 1)
        & (nearest_in.sum().over("in_transaction_id") == 1)
    )


def match(cand: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the pairs, one to one, nearest first; the candidates left between unpaired legs)."""
    chosen: list[pl.DataFrame] = []
    left = cand
    for _ in range(ROUNDS):
        if left.is_empty():
            break
        got = _mutual_nearest(left)
        if got.is_empty():
            break
        chosen.append(got)
        left = left.filter(
            ~pl.col("out_transaction_id").is_in(got["out_transaction_id"].implode())
            & ~pl.col("in_transaction_id").is_in(got["in_transaction_id"].implode())
        )
    return (pl.concat(chosen) if chosen else cand.clear()), left


PAIR_COLUMNS = (
    "out_transaction_id",
    "in_transaction_id",
    "from_account_id",
    "to_account_id",
    "amount_cents",
    "lag_days",
    "out_on",
    "out_type",
    "in_type",
)


def pairs_and_unpaired(
    tx: pl.LazyFrame, accounts: pl.LazyFrame, *, engine: Engine = "auto"
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(`transfer_pairs`, `unpaired_transfers`) of a ledger, its plans run on `engine`."""
    cand = candidates(tx, accounts, engine=engine)
    matched, left = match(cand)
    card = (pl.col("out_type") == "expense") & pl.col("to_account_type").is_in(CREDIT_TYPES)
    pairs = matched.filter(~card).select(PAIR_COLUMNS).sort("out_on", "out_transaction_id")
    card_rows = matched.filter(card)
    used = pl.concat([matched["out_transaction_id"], matched["in_transaction_id"]])
    touched = pl.concat([left["out_transaction_id"], left["in_transaction_id"]])
    legs = (
        tx.filter(pl.col("type") == "transfer")
        .select(transaction_id="id")
        .filter(~pl.col("transaction_id").is_in(used.implode()))
        .pipe(collect, engine)
    )
    unmatched = legs.with_columns(
        reason=pl.when(pl.col("transaction_id").is_in(touched.implode()))
        .then(pl.lit(AMBIGUOUS))
        .otherwise(pl.lit(NO_MATCH)),
        other_transaction_id=pl.lit(None, pl.String),
    )
    as_expense = pl.concat(
        [
            card_rows.select(
                transaction_id="out_transaction_id", other_transaction_id="in_transaction_id"
            ),
            card_rows.select(
                transaction_id="in_transaction_id", other_transaction_id="out_transaction_id"
            ),
        ]
    ).with_columns(reason=pl.lit(CARD_PAYMENT_AS_EXPENSE))
    unpaired = pl.concat(
        [unmatched.select("transaction_id", "reason", "other_transaction_id"), as_expense],
        how="diagonal",
    ).sort("reason", "transaction_id")
    return pairs, unpaired
