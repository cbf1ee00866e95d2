"""Recurring series: payments and income that repeat on a cadence, found in pure Polars.

A series is one merchant key (`spending.merchant_key`), one account, one type (expense or
income) and one direction (money in or out) repeating weekly, monthly, quarterly or yearly.
Transfers are not series: their two legs are paired by `transform/transfers.py`.

For each cadence, finest first, every candidate group is cut into periods (ISO weeks, calendar
months, quarters, years) and kept when it looks like a series:

- at most 1.5 rows a period on average (1.2 quarterly and yearly; a one-off purchase at the
  merchant is tolerated, a merchant visited every few days is not), rows in at least 4 periods (5 weeks, 3 years),
  and in at least three quarters of the periods between its first and last (a missed
  occurrence is tolerated);
- in each period the row nearest the group's usual place in the period and its median amount
  is the occurrence (picked twice: the second time around the occurrences' own medians); the
  others are one-offs, not members;
- the occurrences keep their place: the day within the period moves at most `tolerance` days
  from the median (a bill paid a few days late), for at least 80% of them (90% quarterly and
  yearly, where periods are few); an occurrence outside that is not a member.

Amounts may vary (utilities) or step up (a price rise): the amount only picks the occurrence
among a period's rows. A group found at a cadence is not looked at for the coarser ones.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from centsync.transform.marts import collect, collect_all

if TYPE_CHECKING:
    from centsync.transform.marts import Engine

GROUP = ("merchant", "account_id", "type", "inflow")
MAX_ROWS_PER_PERIOD = 1.5
MIN_COVERAGE = 0.75


@dataclass(frozen=True)
class Cadence:
    name: str
    every: str  # a Polars duration: the next occurrence after the last
    tolerance: int  # days an occurrence may move within its period
    grace: int  # days past the expected date before a series counts as ended
    min_occurrences: int
    # the share of occurrences that must keep their place, and the rows a period may hold on
    # average (few long periods: four or five visits a quarter apart, the nearest of a few
    # picked each time, must not pass for a series)
    in_place: float = 0.8
    rows_per_period: float = MAX_ROWS_PER_PERIOD


CADENCES = (
    Cadence("weekly", "1w", 1, 4, 5),
    Cadence("monthly", "1mo", 6, 16, 4),
    Cadence("quarterly", "1q", 10, 46, 4, in_place=0.9, rows_per_period=1.2),
    Cadence("yearly", "1y", 12, 120, 3, in_place=0.9, rows_per_period=1.2),
)


def _period(c: Cadence, day: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(the period's number, the day's place in it) for a cadence."""
    year, month = day.dt.year().cast(pl.Int64), day.dt.month().cast(pl.Int64)
    if c.name == "weekly":
        days = day.cast(pl.Int64)  # days since 1970-01-01, a Thursday
        return (days + 3) // 7, (days + 3) % 7
    if c.name == "monthly":
        return year * 12 + month - 1, day.dt.day().cast(pl.Int64)
    if c.name == "quarterly":
        return year * 4 + (month - 1) // 3, ((month - 1) % 3) * 31 + day.dt.day().cast(pl.Int64)
    return year, day.dt.ordinal_day().cast(pl.Int64)


def candidates(tx: pl.LazyFrame, keys: pl.LazyFrame) -> pl.LazyFrame:
    """The rows a series may hold: expenses and income, with their merchant key (`keys`:
    concept -> merchant), of the concepts not too busy in their account to hold one (a row a
    week at most, the finest cadence: one pass over the ledger that leaves out the merchants
    visited every few days before any cadence is tried, and before the merchant key is
    joined to the rows that are left)."""
    rows = tx.filter(pl.col("type").is_in(["expense", "income"]))
    weeks = (pl.col("booked_at").max() - pl.col("booked_at").min()).dt.total_days() / 7 + 1
    sparse = (
        rows.group_by("concept", "account_id")
        .agg(busy=pl.len() > MAX_ROWS_PER_PERIOD * weeks)
        .filter(~pl.col("busy"))
        .select("concept", "account_id")
    )
    return (
        rows.join(sparse, on=["concept", "account_id"], how="semi")
        .join(keys.select("concept", "merchant"), "concept", "left")
        .select(
            "id",
            "merchant",
            "account_id",
            "type",
            "amount",
            "booked_at",
            inflow=pl.col("amount") > 0,
        )
    )


def _pick(rows: pl.LazyFrame, c: Cadence) -> pl.LazyFrame:
    """Per group and period the row nearest `med_pos` and `med_amt`, `in_place` when within
    the cadence's tolerance of `med_pos`."""
    off = (pl.col("pos") - pl.col("med_pos")).abs()
    amount = (pl.col("amount") - pl.col("med_amt")).abs() / pl.col("med_amt").abs().clip(1)
    return (
        rows.with_columns(score=off / c.tolerance + amount, off=off)
        .sort("score", "id")
        .unique([*GROUP, "period"], keep="first")
        .with_columns(in_place=pl.col("off") <= c.tolerance)
    )


def _members_at(rows: pl.LazyFrame, c: Cadence) -> pl.LazyFrame:
    """The members of the groups that are series at cadence `c` (with `cadence`)."""
    g = list(GROUP)
    period, pos = _period(c, pl.col("booked_at"))
    cut = rows.with_columns(period=period, pos=pos)
    stats = (
        cut.group_by(g)
        .agg(
            n=pl.len(),
            periods=pl.col("period").n_unique(),
            span=pl.col("period").max() - pl.col("period").min() + 1,
            med_pos=pl.col("pos").median(),
            med_amt=pl.col("amount").median(),
        )
        .filter(
            (pl.col("n") <= c.rows_per_period * pl.col("periods"))
            & (pl.col("periods") >= c.min_occurrences)
            & (pl.col("periods") >= MIN_COVERAGE * pl.col("span"))
        )
    )
    # the occurrence of each period: nearest the usual place and amount; then the usual place
    # and amount again from the occurrences alone (one-offs late in the month moved the first
    # median), and the occurrences picked again
    picked = _pick(cut.join(stats, on=g), c)
    again = picked.group_by(g).agg(
        med_pos=pl.col("pos").median(), med_amt=pl.col("amount").median()
    )
    picked = _pick(cut.join(again, on=g), c)
    placed = (
        picked.group_by(g)
        .agg(share=pl.col("in_place").mean(), kept=pl.col("in_place").sum())
        .filter((pl.col("share") >= c.in_place) & (pl.col("kept") >= c.min_occurrences))
    )
    return (
        picked.filter("in_place")
        .join(placed.select(g), on=g, how="semi")
        .select("id", *g, "amount", "booked_at", cadence=pl.lit(c.name))
    )


def members(tx: pl.LazyFrame, keys: pl.LazyFrame, *, engine: Engine = "auto") -> pl.DataFrame:
    """Every series member: id, the group's columns, amount, booked_at, cadence.

    The candidates are collected once, then every cadence's members together (`collect_all`,
    on `engine`: a household's is "in-memory", transform/marts.py `Engine`); a group found at
    a cadence is left out of the coarser ones' results. Every step of `_members_at` works
    within a group, so a coarser cadence finds for the other groups what it would find
    without this group's rows: the same members as looking only at the groups the finer
    cadences left, in one collection instead of four (2 ms of a household's 13, issue 46).
    """
    rows = candidates(tx, keys).pipe(collect, engine).lazy()
    found: list[pl.DataFrame] = []
    taken: pl.DataFrame | None = None
    for at in collect_all([_members_at(rows, c) for c in CADENCES], engine):
        if taken is not None:
            at = at.join(taken, on=list(GROUP), how="anti")
        found.append(at)
        groups = at.select(*GROUP).unique()
        taken = groups if taken is None else pl.concat([taken, groups])
    return pl.concat(found)


def series_id(cadence: pl.Expr) -> pl.Expr:
    """A series' id, readable and stable: cadence, direction, account's first 8, merchant."""
    return pl.concat_str(
        cadence,
        pl.when(pl.col("inflow")).then(pl.lit("in")).otherwise(pl.lit("out")),
        pl.col("account_id").str.slice(0, 8),
        pl.col("merchant"),
        separator=":",
    )


def _next_expected(last: pl.Expr) -> pl.Expr:
    expr: Any = pl.when(pl.lit(False)).then(last)
    for c in CADENCES:
        expr = expr.when(pl.col("cadence") == c.name).then(last.dt.offset_by(c.every))
    return expr.otherwise(None)


def _grace() -> pl.Expr:
    expr: Any = pl.when(pl.lit(False)).then(pl.lit(0))
    for c in CADENCES:
        expr = expr.when(pl.col("cadence") == c.name).then(pl.lit(c.grace))
    return expr.otherwise(0)


def series(found: pl.LazyFrame, today: dt.date) -> pl.LazyFrame:
    """One row a series from its members (`members()` with `series_id`)."""
    changed = pl.col("amount") != pl.col("amount").shift(1)
    per = (
        found.sort("booked_at", "id")
        .group_by("series_id")
        .agg(
            pl.col(*GROUP, "cadence").first(),
            typical_amount_cents=pl.col("amount").median().round().cast(pl.Int64),
            last_amount_cents=pl.col("amount").last(),
            occurrences=pl.len().cast(pl.Int64),
            first_booked_at=pl.col("booked_at").first(),
            last_booked_at=pl.col("booked_at").last(),
            previous_amount_cents=pl.col("amount").shift(1).filter(changed).last(),
            changed_on=pl.col("booked_at").filter(changed).last(),
        )
        .with_columns(next_expected_on=_next_expected(pl.col("last_booked_at")))
    )
    ended = pl.lit(today) > pl.col("next_expected_on") + pl.duration(days=_grace())
    return per.with_columns(
        status=pl.when(ended).then(pl.lit("ended")).otherwise(pl.lit("active"))
    ).drop("inflow")
