"""All marts from the core frames, each validated by its pandera schema before it is written.

The table names and columns are the analysts' contract (docs/data-dictionary.md): money
columns end in `_cents` and keep the service's sign (negative = money out).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import pandera.polars as pa
import polars as pl

from centsync.transform import balances, spending

MAX_CENTS = 10**18  # an Int64 sum; a single amount is bounded by the API at 10^12


def _cents(nullable: bool = False) -> pa.Column:
    return pa.Column(pl.Int64, pa.Check.in_range(-MAX_CENTS, MAX_CENTS), nullable=nullable)


def _count() -> pa.Column:
    return pa.Column(pl.Int64, pa.Check.ge(0))


def _month() -> pa.Column:
    first_day = pa.Check(
        lambda data: data.lazyframe.select(pl.col(data.key).dt.day() == 1),
        error="not a month's first day",
    )
    return pa.Column(pl.Date, first_day)


def _schema(name: str, columns: dict[str, pa.Column], unique: list[str]) -> pa.DataFrameSchema:
    return pa.DataFrameSchema(columns, strict=True, name=name, unique=unique)


SCHEMAS: dict[str, pa.DataFrameSchema] = {
    "spending_by_month_category": _schema(
        "spending_by_month_category",
        {
            "month": _month(),
            "category_id": pa.Column(pl.String, nullable=True),
            "category_name": pa.Column(pl.String),
            "amount_cents": _cents(),
            "transactions": _count(),
        },
        ["month", "category_id"],
    ),
    "spending_by_month_merchant": _schema(
        "spending_by_month_merchant",
        {
            "month": _month(),
            "merchant": pa.Column(pl.String),
            "amount_cents": _cents(),
            "transactions": _count(),
        },
        ["month", "merchant"],
    ),
    "cash_flow_by_month": _schema(
        "cash_flow_by_month",
        {
            "month": _month(),
            "income_cents": _cents(),
            "spending_cents": _cents(),
            "net_cents": _cents(),
            "transfers_cents": _cents(),
        },
        ["month"],
    ),
    "transactions_by_month_type": _schema(
        "transactions_by_month_type",
        {
            "month": _month(),
            "type": pa.Column(pl.String, pa.Check.isin(["expense", "income", "transfer"])),
            "amount_cents": _cents(),
            "transactions": _count(),
        },
        ["month", "type"],
    ),
    "balance_daily": _schema(
        "balance_daily",
        {
            "account_id": pa.Column(pl.String),
            "account_name": pa.Column(pl.String),
            "account_type": pa.Column(pl.String),
            "date": pa.Column(pl.Date),
            "balance_cents": _cents(),
        },
        ["account_id", "date"],
    ),
    "net_worth_daily": _schema(
        "net_worth_daily",
        {
            "date": pa.Column(pl.Date),
            "assets_cents": _cents(),
            "liabilities_cents": pa.Column(pl.Int64, pa.Check.ge(0)),
            "net_worth_cents": _cents(),
        },
        ["date"],
    ),
    "net_worth_snapshots": _schema(
        "net_worth_snapshots",
        {
            "refresh_id": pa.Column(pl.String),
            "snapshot_at": pa.Column(pl.Datetime("us", "UTC")),
            "currency": pa.Column(pl.String, nullable=True),
            "assets_cents": _cents(),
            "liabilities_cents": pa.Column(pl.Int64, pa.Check.ge(0)),
            "net_worth_cents": _cents(),
            "account_count": _count(),
        },
        ["refresh_id"],
    ),
}
MART_NAMES = tuple(SCHEMAS)


# The Polars engine a plan runs on: a household's small ledger runs "in-memory", where the
# default engine's start-up was most of a small plan's cost; a big ledger keeps "auto"
Engine = Literal["auto", "in-memory", "streaming"]

# A big ledger's plans (the streaming engine over its Parquet copy) do not share common
# subplans: where two branches of a plan read the same scan (a group-by and the join that
# uses it), Polars caches the scan whole for both, so a plan that returns a few hundred rows
# held the ledger's columns in memory; each branch reads the copy again instead. At 1,000,000
# rows `centsync reconcile` peaked 60-70 MB lower for the same CPU (docs/benchmarks.md).
_STREAMING = pl.QueryOptFlags(comm_subplan_elim=False)


def collect(plan: pl.LazyFrame, engine: Engine) -> pl.DataFrame:
    """`plan` collected on `engine`; on the streaming engine without shared subplans."""
    if engine == "streaming":
        return plan.collect(engine=engine, optimizations=_STREAMING)
    return plan.collect(engine=engine)


def collect_all(plans: list[pl.LazyFrame], engine: Engine) -> list[pl.DataFrame]:
    """`plans` collected on `engine` as one plan (sharing what they have in common), or,
    on the streaming engine, one at a time without shared subplans (`collect`)."""
    if engine == "streaming":
        return [collect(plan, engine) for plan in plans]
    return pl.collect_all(plans, engine=engine)


@dataclass(frozen=True)
class CoreFrames:
    """The inputs of the marts, as read from the warehouse."""

    transactions: pl.LazyFrame  # account_id, concept, amount, booked_at, type, category_id
    accounts: pl.LazyFrame  # id, name, type, balance
    categories: pl.LazyFrame  # id, name
    net_worth_history: pl.LazyFrame  # history.net_worth
    today: dt.date  # the service's today, in the settings timezone


def _pandera(schema: pa.DataFrameSchema, frame: pl.DataFrame) -> pl.DataFrame:
    return schema.validate(frame)


def build(
    core: CoreFrames,
    *,
    validate: Callable[[pa.DataFrameSchema, pl.DataFrame], pl.DataFrame] = _pandera,
    engine: Engine = "auto",
) -> dict[str, pl.DataFrame]:
    """Every mart, collected and validated (pandera raises on a broken rule).

    `validate` applies a mart's schema: pandera's `validate` by default; the refresh passes the
    warehouse's equivalent that skips pandera's own pass for a frame proven to fit (the same
    rules and errors, a fraction of the time: warehouse/validation.py `validated`). `engine`
    is the Polars engine the plan runs on (a household's small ledger: "in-memory", a fifth
    faster than the default engine's start-up).
    """
    tx = core.transactions
    by_type = spending.transactions_by_month_type(tx)
    balance = balances.balance_daily(core.accounts, tx, core.today)
    lazy = {
        "spending_by_month_category": spending.spending_by_month_category(tx, core.categories),
        "spending_by_month_merchant": spending.spending_by_month_merchant(tx),
        "cash_flow_by_month": spending.cash_flow_by_month(by_type),
        "transactions_by_month_type": by_type,
        "balance_daily": balance,
        "net_worth_daily": balances.net_worth_daily(balance),
        "net_worth_snapshots": balances.net_worth_snapshots(core.net_worth_history),
    }
    counts = {"transactions", "account_count"}
    # one plan sharing the common subplans (the ledger, the balances), but for a big ledger's scan
    collected = collect_all(list(lazy.values()), engine)
    out: dict[str, pl.DataFrame] = {}
    for (name, _), frame in zip(lazy.items(), collected, strict=True):
        frame = frame.with_columns(pl.col(c).cast(pl.Int64) for c in frame.columns if c in counts)
        out[name] = validate(SCHEMAS[name], frame)
    return out
