"""Spending and cash-flow marts: the contract's spending rules, in one place.

The rules (API contract section 6): spending is every `type = expense` transaction, refunds
(positive amounts) included, transfers and income excluded; months are calendar months of
`booked_at`; the merchant key is the concept trimmed, lower-cased, with inner whitespace runs
collapsed to one space. Money keeps the service's sign (negative = money out), in cents.

Every function takes and returns `pl.LazyFrame`s, so they compose with `.pipe()` and collect
once. The transactions frame has at least `account_id`, `concept`, `amount` (Int64
cents), `booked_at` (Date), `type` and `category_id` (String, null = uncategorised).
"""

from __future__ import annotations

import polars as pl

UNCATEGORISED = "Uncategorized"  # the spending endpoint's own label for a null category
# Python's str.split() (the service's rule) also splits on the ASCII separators \x1c-\x1f.
_WHITESPACE = r"[\s\x1c-\x1f]+"


def merchant_key(concept: pl.Expr) -> pl.Expr:
    """The contract's merchant key of a concept: trimmed, lower-cased, whitespace collapsed."""
    return concept.str.replace_all(_WHITESPACE, " ").str.strip_chars(" ").str.to_lowercase()


def month_of(day: pl.Expr) -> pl.Expr:
    """The first day of a date's calendar month (the grain of every monthly mart)."""
    return day.dt.truncate("1mo")


def expenses(tx: pl.LazyFrame) -> pl.LazyFrame:
    """The rows that count as spending: every expense, refunds included."""
    return tx.filter(pl.col("type") == "expense").with_columns(month=month_of(pl.col("booked_at")))


def category_names(categories: pl.LazyFrame, tx: pl.LazyFrame) -> pl.LazyFrame:
    """A name for every category id the ledger uses.

    Names come from spending's labels (`core.categories`: the API's only source). A category
    that never appeared in spending (an income or transfer category) gets a name saying so.
    """
    used = tx.select("category_id").drop_nulls().unique()
    return (
        used.join(
            categories.select(pl.col("id").alias("category_id"), "name"), "category_id", "left"
        )
        .with_columns(
            category_name=pl.coalesce(
                "name",
                pl.lit("unnamed category ")
                + pl.col("category_id").str.slice(0, 8)
                + pl.lit(" (never in spending)"),
            )
        )
        .select("category_id", "category_name")
    )


def spending_by_month_category(tx: pl.LazyFrame, categories: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.spending_by_month_category`: month, category_id, category_name, amount, count."""
    names = category_names(categories, tx)
    return (
        expenses(tx)
        .group_by("month", "category_id")
        .agg(amount_cents=pl.col("amount").sum(), transactions=pl.len())
        .join(names, "category_id", "left", nulls_equal=False)
        .with_columns(
            category_name=pl.when(pl.col("category_id").is_null())
            .then(pl.lit(UNCATEGORISED))
            .otherwise(pl.col("category_name"))
        )
        .select("month", "category_id", "category_name", "amount_cents", "transactions")
        .sort("month", "amount_cents", "category_id", nulls_last=True)
    )


def spending_by_month_merchant(tx: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.spending_by_month_merchant`: month, merchant (the contract's key), amount, count."""
    return (
        expenses(tx)
        .with_columns(merchant=merchant_key(pl.col("concept")))
        .group_by("month", "merchant")
        .agg(amount_cents=pl.col("amount").sum(), transactions=pl.len())
        .sort("month", "amount_cents", "merchant")
    )


def transactions_by_month_type(tx: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.transactions_by_month_type`: month, type, amount, count (every row of the ledger)."""
    return (
        tx.with_columns(month=month_of(pl.col("booked_at")))
        .group_by("month", "type")
        .agg(amount_cents=pl.col("amount").sum(), transactions=pl.len())
        .sort("month", "type")
    )


def cash_flow_by_month(by_month_type: pl.LazyFrame) -> pl.LazyFrame:
    """`marts.cash_flow_by_month` from `transactions_by_month_type`.

    `net_cents` = income + spending (transfers excluded: own-account transfers net to zero when
    both legs are visible, and `transfers_cents` shows what they do not).
    """
    wide = by_month_type.group_by("month").agg(
        income_cents=pl.col("amount_cents").filter(pl.col("type") == "income").sum(),
        spending_cents=pl.col("amount_cents").filter(pl.col("type") == "expense").sum(),
        transfers_cents=pl.col("amount_cents").filter(pl.col("type") == "transfer").sum(),
    )
    return wide.select(
        "month",
        "income_cents",
        "spending_cents",
        net_cents=pl.col("income_cents") + pl.col("spending_cents"),
        transfers_cents="transfers_cents",
    ).sort("month")
