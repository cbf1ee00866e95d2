"""Balance history and net worth: each account's daily balance rolled back from today's.

The API only tells the present balance. Every transaction moves its account's balance by its
amount, so the balance at the end of day `d` is today's balance minus the amounts booked after
`d`. An account counts from the day of its first transaction (before that it has no row and adds
nothing to net worth); an account with no transaction has one row, today.

Net worth follows the contract's sign rules (section 5): a positive balance counts to assets, a
negative one to liabilities as a positive magnitude, and net worth = assets - liabilities.
"""

from __future__ import annotations

import datetime as dt

import polars as pl


def balance_daily(accounts: pl.LazyFrame, tx: pl.LazyFrame, today: dt.date) -> pl.LazyFrame:
    """`marts.balance_daily`: account_id, account_name, account_type, date, balance_cents.

    `accounts` has `id`, `name`, `type`, `balance` (cents now); `tx` has `account_id`,
    `amount`, `booked_at`. One row per account and day from its first transaction to `today`.
    """
    per_day = tx.group_by("account_id", pl.col("booked_at").alias("date")).agg(
        amount=pl.col("amount").sum()
    )
    totals = per_day.group_by("account_id").agg(
        first=pl.col("date").min(), moved=pl.col("amount").sum()
    )
    spans = (
        accounts.select(
            pl.col("id").alias("account_id"),
            pl.col("name").alias("account_name"),
            pl.col("type").alias("account_type"),
            pl.col("balance").alias("current"),
        )
        .join(totals, "account_id", "left")
        .with_columns(
            first=pl.min_horizontal(pl.col("first").fill_null(today), pl.lit(today)),
            moved=pl.col("moved").fill_null(0),
        )
    )
    days = spans.with_columns(date=pl.date_ranges("first", pl.lit(today), "1d")).explode("date")
    return (
        days.join(per_day, ["account_id", "date"], "left")
        .sort("account_id", "date")
        .with_columns(
            # balance(d) = current - (amounts booked after d) = current - moved + amounts up to d
            balance_cents=pl.col("current")
            - pl.col("moved")
            + pl.col("amount").fill_null(0).cum_sum().over("account_id")
        )
        .select("account_id", "account_name", "account_type", "date", "balance_cents")
    )


def net_worth_daily(balances: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.net_worth_daily`: date, assets_cents, liabilities_cents, net_worth_cents."""
    return (
        balances.group_by("date")
        .agg(
            assets_cents=pl.col("balance_cents").filter(pl.col("balance_cents") > 0).sum(),
            liabilities_cents=-pl.col("balance_cents").filter(pl.col("balance_cents") < 0).sum(),
        )
        .with_columns(net_worth_cents=pl.col("assets_cents") - pl.col("liabilities_cents"))
        .sort("date")
    )


def net_worth_snapshots(history: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.net_worth_snapshots`: one row per refresh, from `history.net_worth`."""
    return history.select(
        "refresh_id",
        "snapshot_at",
        "currency",
        pl.col("assets").alias("assets_cents"),
        pl.col("liabilities").alias("liabilities_cents"),
        pl.col("net_worth").alias("net_worth_cents"),
        "account_count",
    ).sort("snapshot_at")


def accounts_net_worth(accounts: pl.LazyFrame) -> pl.LazyFrame:
    """Assets, liabilities, net worth and count of the current accounts (one row)."""
    b = pl.col("balance")
    return accounts.select(
        assets=b.filter(b > 0).sum(),
        liabilities=-b.filter(b < 0).sum(),
        net_worth=b.filter(b > 0).sum() + b.filter(b < 0).sum(),
        count=pl.len(),
    )
