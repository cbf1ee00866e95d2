"""Reconciliation's explanations: which differences the evidence explains, and why.

`explain` runs an ordered tuple of small rules over each `differ` row; the first rule that
has something to say gives the row its sentence, and says whether that explains the
difference. A difference no rule explained, and that is not local tampering, stands
explained when the refresh's own reconciliation explained the same difference.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import polars as pl

from centsync.transform.calendar import month_key, months_between
from centsync.transform.compare import RESULT_SCHEMA
from centsync.transform.row_diff import ROW_DIFF_SCHEMA

Row = dict[str, object]

LEDGER_CHECKS = ("spending.", "transactions.")
ACCOUNT_CHECKS = ("accounts.", "net_worth.")


@dataclass
class Evidence:
    """What pipelines found out about the differences, to explain them or not."""

    # rows whose local copy differs from what the service sent (raw.*): local tampering or a
    # landing fault, never explained
    tampered: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=ROW_DIFF_SCHEMA))
    # month ('YYYY-MM') -> when it was last read from the service, verified
    read_at: dict[str, str] = field(default_factory=dict)
    # months whose server fingerprint, fetched after the aggregates, differs from the local rows
    changed_on_server: set[str] = field(default_factory=set)
    # the months whose fingerprint the service was asked again (a refresh or --live)
    confirmed: set[str] = field(default_factory=set)
    # rows of the ledger the service sent that validation rejected (raw.rejected_rows), by
    # month ('YYYY-MM', or '' when the row's date was unreadable)
    rejected: dict[str, int] = field(default_factory=dict)
    # local accounts the service no longer shows, by id -> name (hidden since the snapshot)
    accounts_gone: dict[str, str] = field(default_factory=dict)
    # the accounts the service shows now differ from the snapshot (re-fetched)
    accounts_moved: bool = False
    # net worth was fetched at the start of the refresh (it dates the run), the accounts and
    # their summary after the ledger: accounts that moved in between explain a difference
    net_worth_read_first: bool = False
    # the reconciliation the same refresh made with the service at hand: (check, scope) ->
    # (difference_cents, explanation) of what it explained; it stands while the local copy
    # is untouched (offline runs have no service to ask again)
    prior: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Explanation:
    """What a rule found for one difference: its sentence, and whether it explains it."""

    text: str
    explained: bool = False
    # the local copy differs from what the service sent: never explained, not even by the
    # refresh's own reconciliation
    tampering: bool = False


@dataclass(frozen=True)
class Facts:
    """The evidence, with what every rule would otherwise recompute per row."""

    ev: Evidence
    tampered_tx: pl.DataFrame
    tampered_acc: pl.DataFrame
    tampered_months: set[str]
    accounts_agree: bool  # every accounts.* comparison agrees

    @classmethod
    def of(cls, results: pl.DataFrame, ev: Evidence) -> Facts:
        """Derive the facts once per explain call."""
        tampered_tx = ev.tampered.filter(pl.col("entity") == "transactions")
        account_rows = results.filter(pl.col("check").str.starts_with("accounts."))
        return cls(
            ev=ev,
            tampered_tx=tampered_tx,
            tampered_acc=ev.tampered.filter(pl.col("entity") == "accounts"),
            tampered_months={month_key(m) for m in tampered_tx["month"].drop_nulls().to_list()},
            accounts_agree=account_rows.height > 0 and (account_rows["status"] == "agree").all(),
        )


Rule = Callable[[Row, Facts], Explanation | None]


def _months_of(row: Row) -> list[str]:
    """The months ('YYYY-MM') a comparison's from..to spans ([] when either end is open)."""
    lo, hi = row["from_date"], row["to_date"]
    if not isinstance(lo, dt.date) or not isinstance(hi, dt.date):
        return []
    return [month_key(m) for m in months_between(lo, hi)]


def _is_ledger(row: Row) -> bool:
    return str(row["check"]).startswith(LEDGER_CHECKS)


def _is_accounts(row: Row) -> bool:
    return str(row["check"]).startswith(ACCOUNT_CHECKS)


def _of_category(rows: pl.DataFrame, subject: object) -> pl.DataFrame:
    """The row differences of one category, on either side of the difference.

    `category_id` is the local row's category (the service's for only_server rows); a
    `different` row whose category changed also counts under the service's category.
    """
    wanted = pl.lit(subject, pl.String)
    server_category = pl.col("server").str.json_path_match("$.category_id")
    category_changed = (pl.col("kind") == "different") & pl.col("fields").str.split(
        ","
    ).list.contains("category_id")
    return rows.filter(
        pl.col("category_id").eq_missing(wanted)
        | (category_changed & server_category.eq_missing(wanted)).fill_null(False)
    )


# ---- ledger scopes: spending.* and transactions.* ----------------------------------------------


def tampered_rows(row: Row, facts: Facts) -> Explanation | None:
    """Rows of the scope's months whose local copy differs from what the service sent."""
    if not _is_ledger(row):
        return None
    months = _months_of(row)
    here = [m for m in (months or sorted(facts.tampered_months)) if m in facts.tampered_months]
    rows_here = facts.tampered_tx.filter(pl.col("month").dt.strftime("%Y-%m").is_in(here))
    if row["check"] == "spending.category":
        # only the rows of this category (on either side of the difference)
        rows_here = _of_category(rows_here, row["subject"])
        here = sorted(set(rows_here["month"].dt.strftime("%Y-%m").to_list()))
    if not here:
        return None
    n = rows_here.height
    return Explanation(
        f"the local copy differs from what the service sent: {n} row{'s' * (n != 1)} in "
        f"{', '.join(here[:6])} (recon.row_differences)",
        tampering=True,
    )


def rejected_rows(row: Row, facts: Facts) -> Explanation | None:
    """Rows of the scope the service sent and validation rejected."""
    if not _is_ledger(row):
        return None
    months = _months_of(row)
    rejected = {m: n for m, n in facts.ev.rejected.items() if m == "" or not months or m in months}
    if not rejected:
        return None
    return Explanation(
        f"{sum(rejected.values())} rows the service sent were rejected by validation "
        "(raw.rejected_rows): fix or report them, then refresh",
        explained=True,
    )


def fingerprint_agrees(row: Row, facts: Facts) -> Explanation | None:
    """One month, confirmed by its server fingerprint, yet the aggregate differs."""
    if not _is_ledger(row):
        return None
    months = _months_of(row)
    ev = facts.ev
    if len(months) == 1 and months[0] in ev.confirmed and months[0] not in ev.changed_on_server:
        return Explanation(
            "the local rows are what the service sent and its month fingerprint agrees "
            "with them, yet its aggregate differs"
        )
    return None


def changed_after_read(row: Row, facts: Facts) -> Explanation | None:
    """The scope was read from the service, which changed it afterwards."""
    if not _is_ledger(row):
        return None
    months = _months_of(row)
    ev = facts.ev
    read = [m for m in (months or sorted(ev.read_at)) if m in ev.read_at]
    if not read:
        return None
    which = ", ".join(months[:6]) if 0 < len(months) <= 6 else row["scope"]
    return Explanation(
        f"the service changed {which} after it was read ({ev.read_at[read[-1]]}): "
        "the local rows are exactly what it sent; the next refresh re-reads it",
        explained=True,
    )


def never_read(row: Row, facts: Facts) -> Explanation | None:
    """No month of the scope was read: nothing explains it."""
    if not _is_ledger(row):
        return None
    return Explanation("no month of this scope was ever read from the service")


# ---- account scopes: accounts.* and net_worth.* ------------------------------------------------


def tampered_accounts(row: Row, facts: Facts) -> Explanation | None:
    """Local accounts that differ from what the service sent."""
    if not _is_accounts(row) or not facts.tampered_acc.height:
        return None
    names = ", ".join(
        facts.tampered_acc.select(
            pl.coalesce(
                pl.col("local").str.json_path_match("$.name"),
                pl.col("server").str.json_path_match("$.name"),
                pl.col("id"),
            )
        )
        .to_series()
        .to_list()[:6]
    )
    return Explanation(
        f"local accounts differ from what the service sent ({names}; see recon.row_differences)",
        tampering=True,
    )


def net_worth_read_first(row: Row, facts: Facts) -> Explanation | None:
    """Net worth was read before the accounts moved; the accounts summary agrees."""
    if not (
        str(row["check"]).startswith("net_worth.")
        and facts.ev.net_worth_read_first
        and facts.accounts_agree
    ):
        return None
    return Explanation(
        "net worth was read at the start of the refresh; the accounts moved before "
        "their snapshot, and the accounts summary read after it agrees",
        explained=True,
    )


def accounts_gone(row: Row, facts: Facts) -> Explanation | None:
    """Accounts hidden or removed on the service since the snapshot."""
    if not _is_accounts(row) or not facts.ev.accounts_gone:
        return None
    return Explanation(
        "hidden or removed on the service since the snapshot: "
        + ", ".join(sorted(facts.ev.accounts_gone.values())),
        explained=True,
    )


def accounts_moved(row: Row, facts: Facts) -> Explanation | None:
    """The service's accounts changed between the snapshot and its summary."""
    if not _is_accounts(row) or not facts.ev.accounts_moved:
        return None
    return Explanation(
        "the service's accounts changed between the snapshot and its summary: the "
        "next refresh takes the new balances",
        explained=True,
    )


def accounts_unexplained(row: Row, facts: Facts) -> Explanation | None:
    """The accounts are what the service sent: nothing explains it."""
    if not _is_accounts(row):
        return None
    return Explanation("the local accounts are what the service sent, yet its summary differs")


# The rules in the order they are asked; the first that answers gives the row its sentence.
RULES: tuple[Rule, ...] = (
    tampered_rows,
    rejected_rows,
    fingerprint_agrees,
    changed_after_read,
    never_read,
    tampered_accounts,
    net_worth_read_first,
    accounts_gone,
    accounts_moved,
    accounts_unexplained,
)


def _first_finding(row: Row, facts: Facts) -> Explanation | None:
    """The first rule's answer for one row (None: no rule covers its check)."""
    for rule in RULES:
        found = rule(row, facts)
        if found is not None:
            return found
    return None


def _explained_row(row: Row, facts: Facts) -> Row:
    """One differ row with the rules' sentence, and the prior reconciliation's if it stands."""
    found = _first_finding(row, facts)
    if found is not None:
        row["explanation"] = found.text
        if found.explained:
            row["status"] = "explained"
    before = facts.ev.prior.get(cast(tuple[str, str], (row["check"], row["scope"])))
    if (
        row["status"] == "differ"
        and not (found is not None and found.tampering)
        and before is not None
        and before[0] == row["difference_cents"]
    ):
        row["status"] = "explained"
        row["explanation"] = f"{before[1]} (found by the refresh's own reconciliation)"
    return row


def explain(results: pl.DataFrame, ev: Evidence) -> pl.DataFrame:
    """Turn each `differ` into `explained` where the evidence allows, with a sentence why."""
    if results.filter(pl.col("status") == "differ").is_empty():
        return results
    facts = Facts.of(results, ev)
    rows = [
        _explained_row(row, facts) if row["status"] == "differ" else row
        for row in results.iter_rows(named=True)
    ]
    return pl.DataFrame(rows, schema=RESULT_SCHEMA)
