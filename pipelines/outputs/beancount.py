"""`centsync export --format beancount`: the warehouse as a Beancount ledger (CLI-free).

Accounts are opened from `core.accounts` (credit cards and loans under Liabilities, the rest
under Assets), with an opening balance from `Equity:Opening-Balances` so that the ledger ends
where the service's balances are. Each transaction is one entry of two postings: the account,
and its counterpart (`Expenses:<Category>`, `Income:<Category>`, or `Equity:Transfers` for a
transfer, each of whose halves is its own row). Every account snapshot (`history.accounts`)
becomes a balance assertion when it holds to the cent against the ledger's own running balance;
one that does not (the service changed rows after that snapshot) is listed in a comment, not
asserted. Money is integer cents, turned into Decimal amounts only here; entries are built as
Beancount's own directives and printed by its printer.
"""

from __future__ import annotations

import datetime as dt
import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import polars as pl
from beancount.core import account as bc_account
from beancount.core import data
from beancount.core.amount import Amount
from beancount.parser import printer

from centsync.pipelines.outputs.export import given_name, write_whole
from centsync.transform.spending import merchant_key
from centsync.warehouse import analysis, connect_readonly

OPENING = "Equity:Opening-Balances"
TRANSFERS = "Equity:Transfers"
LIABILITY_TYPES = frozenset({"credit", "loan"})
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Skipped:
    """A snapshot that does not hold against the ledger: not asserted, listed in a comment."""

    account: str
    day: dt.date
    refresh_id: str
    snapshot_cents: int
    ledger_cents: int


@dataclass(frozen=True)
class Ledger:
    """What a ledger export wrote."""

    path: Path
    transactions: int
    accounts: int
    assertions: int
    skipped: list[Skipped]
    refresh_id: str | None
    from_payee: dict[str, str]  # account -> category id: named after its most frequent payee


def money(cents: int) -> Decimal:
    """Integer cents as an exact Decimal amount: -1234 -> Decimal('-12.34')."""
    return (Decimal(int(cents)) / 100).quantize(CENT)


def component(text: str) -> str:
    """One account-name component from free text: words capitalised, joined by '-'."""
    words = re.findall(r"[^\W_]+", text)
    name = "-".join(w[:1].upper() + w[1:] for w in words)
    return name if bc_account.is_valid(f"Assets:{name}") else ""


def _unique(name: str, key: str, taken: set[str]) -> str:
    """`name`, or `name-<key>` when another account already has it."""
    if name in taken:
        name = f"{name}-{key[:8]}"
    taken.add(name)
    return name


def account_names(accounts: pl.DataFrame) -> dict[str, str]:
    """Each account id's Beancount account: Assets:Depository:Everyday-Checking, ..."""
    taken: set[str] = set()
    names = {}
    for row in accounts.iter_rows(named=True):
        root = "Liabilities" if row["type"] in LIABILITY_TYPES else "Assets"
        middle = component(row["type"]) or "Other"
        leaf = component(row["name"]) or f"Account-{row['id'][:8]}"
        names[row["id"]] = _unique(f"{root}:{middle}:{leaf}", row["id"], taken)
    return names


def top_payees(transactions: pl.DataFrame) -> dict[str, str]:
    """Each category's most frequent merchant (the marts' merchant key; ties: the first in
    order): a name for a category the service names nowhere."""
    rows = transactions.filter(pl.col("category_id").is_not_null())
    if rows.is_empty():
        return {}
    counted = (
        rows.with_columns(merchant=merchant_key(pl.col("concept")))
        .group_by("category_id", "merchant")
        .len()
        .sort("category_id", "len", "merchant", descending=[False, True, False])
        .group_by("category_id", maintain_order=True)
        .first()
    )
    return dict(zip(counted["category_id"], counted["merchant"], strict=True))


def counterpart_names(
    transactions: pl.DataFrame, given: dict[str, str] | None = None
) -> tuple[dict[tuple[str, str | None], str], dict[str, str]]:
    """Each (type, category_id)'s counterpart account (Expenses:Groceries, Income:Salary...),
    and the categories named after their most frequent payee (account: category id).

    A category's name is the one a person gave it (`category_names`), else the service's, else
    its most frequent payee's (`Income:Acme-Corp-Payroll`), else `Category-<id>`."""
    taken: set[str] = set()
    names: dict[tuple[str, str | None], str] = {}
    from_payee: dict[str, str] = {}
    payees = top_payees(transactions)
    pairs = transactions.select("type", "category_id", "category_name").unique()
    for kind, category_id, category in sorted(pairs.iter_rows(), key=lambda r: tuple(map(str, r))):
        if kind == "transfer":  # both halves against one account, which they cancel in
            names[(kind, category_id)] = TRANSFERS
            continue
        mine = given_name(category_id, given or {}) if category_id else None
        root = "Income" if kind == "income" else "Expenses"
        if category_id is None:
            leaf = "Uncategorized"
        else:
            leaf = component(mine or category or "")
            if not leaf and component(payees.get(category_id, "")):
                leaf = component(payees[category_id])
                from_payee[f"{root}:{leaf}"] = category_id
            leaf = leaf or f"Category-{category_id[:8]}"
        names[(kind, category_id)] = _unique(f"{root}:{leaf}", category_id or "", taken)
    return names, from_payee


def _balances_at(transactions: pl.DataFrame, points: pl.DataFrame) -> pl.DataFrame:
    """`points` (id, local_date, ...) with `ledger_sum`: the account's rows booked on or before
    that day, summed in cents."""
    daily = (
        transactions.group_by("account_id", "booked_at")
        .agg(pl.col("amount").sum())
        .sort("booked_at")
        .with_columns(ledger_sum=pl.col("amount").cum_sum().over("account_id"))
        .select(pl.col("account_id").alias("id"), "booked_at", "ledger_sum")
    )
    joined = points.sort("local_date").join_asof(
        daily,
        left_on="local_date",
        right_on="booked_at",
        by="id",
        strategy="backward",
        check_sortedness=False,  # both sorted by day above; the check cannot see through `by`
    )
    return joined.with_columns(pl.col("ledger_sum").fill_null(0))


def _meta(**values: object) -> data.Meta:
    return data.new_metadata("centsync", 0, {k: v for k, v in values.items() if v is not None})


def build(
    rows: analysis.LedgerRows, since: dt.date | None, given: dict[str, str] | None = None
) -> tuple[list[data.Directive], list[Skipped], int, dict[str, str]]:
    """The ledger's directives, the snapshots not asserted, how many were, and the categories
    named after their payees (`counterpart_names`)."""
    tx, accounts = rows.transactions, rows.accounts
    names = account_names(accounts)
    counterparts, from_payee = counterpart_names(tx, given)
    currency = {r["id"]: r["currency"] for r in accounts.iter_rows(named=True)}
    # rows of an account the last snapshot no longer lists still land somewhere named
    for gone in sorted(set(tx["account_id"].unique()) - set(names)):
        names[gone] = f"Assets:Unlisted:Account-{gone[:8]}"
        currency[gone] = rows.currency or "EUR"
    dates = [d for d in (since, tx["booked_at"].min()) if d is not None]
    snaps = rows.snapshots.filter(pl.col("id").is_in(list(names)))
    start = min(dates) if dates else (snaps["local_date"].min() or dt.date.today())
    assert isinstance(start, dt.date)
    # the latest snapshot of each account is its balance now (core.accounts): the opening
    # balance is what that snapshot holds less the rows booked up to its day
    latest = snaps.sort("snapshot_at").group_by("id").last()
    latest = _balances_at(tx, latest) if latest.height else latest
    opening = {r["id"]: r["balance"] - r["ledger_sum"] for r in latest.iter_rows(named=True)}
    entries: list[data.Directive] = []
    for account_id, name in names.items():
        entries.append(data.Open(_meta(id=account_id), start, name, [currency[account_id]], None))
    categories = {name: key[1] for key, name in counterparts.items()}
    for name in sorted(set(counterparts.values()) | {OPENING}):
        entries.append(data.Open(_meta(category_id=categories.get(name)), start, name, [], None))
    for account_id, cents in opening.items():
        entries.append(
            _entry(
                start, "Opening balance", names[account_id], OPENING, cents, currency[account_id]
            )
        )
    for r in tx.iter_rows(named=True):
        other = counterparts[(r["type"], r["category_id"])]
        entries.append(
            _entry(
                r["booked_at"],
                r["concept"],
                names[r["account_id"]],
                other,
                r["amount"],
                currency[r["account_id"]],
                r["id"],
            )
        )
    asserted, skipped = _assertions(tx, snaps, names, opening, currency, start)
    return entries + asserted, skipped, len(asserted), from_payee


def _entry(
    day: dt.date,
    narration: str,
    account: str,
    other: str,
    cents: int,
    currency: str,
    row_id: str | None = None,
) -> data.Transaction:
    """One transaction of two postings: `cents` on the account, the opposite on `other`."""
    postings = [
        data.Posting(account, Amount(money(cents), currency), None, None, None, None),
        data.Posting(other, Amount(money(-cents), currency), None, None, None, None),
    ]
    return data.Transaction(
        _meta(id=row_id), day, "*", None, narration, frozenset(), frozenset(), postings
    )


def _assertions(
    tx: pl.DataFrame,
    snaps: pl.DataFrame,
    names: dict[str, str],
    opening: dict[str, int],
    currency: dict[str, str],
    start: dt.date,
) -> tuple[list[data.Directive], list[Skipped]]:
    """A balance assertion for each account's last snapshot of each day on or after `start`
    that holds to the cent (at the start of the next day); the rest, skipped."""
    days = snaps.filter(pl.col("local_date") >= start).sort("snapshot_at")
    days = days.group_by("id", "local_date").last()
    if not days.height:
        return [], []
    checked = _balances_at(tx, days).sort("local_date", "id")
    asserted: list[data.Directive] = []
    skipped = []
    for r in checked.iter_rows(named=True):
        ledger = opening.get(r["id"], 0) + r["ledger_sum"]
        name = names[r["id"]]
        if ledger != r["balance"]:
            skipped.append(Skipped(name, r["local_date"], r["refresh_id"], r["balance"], ledger))
            continue
        amount = Amount(money(r["balance"]), currency[r["id"]])
        day = r["local_date"] + dt.timedelta(days=1)
        # tolerance 0: Beancount would otherwise let a balance off by one cent pass
        tolerance = money(0)
        meta = _meta(refresh=r["refresh_id"])
        asserted.append(data.Balance(meta, day, name, amount, tolerance, None))
    return asserted, skipped


def header(
    rows: analysis.LedgerRows,
    refresh_id: str | None,
    skipped: Iterable[Skipped],
    from_payee: dict[str, str] | None = None,
) -> str:
    """The ledger's opening comment lines and options."""
    lines = [
        "; centsync: the warehouse as a Beancount ledger (`centsync export --format beancount`).",
        f"; From refresh {refresh_id or '(none)'}; amounts are the warehouse's integer cents.",
        "; Each transfer row posts against Equity:Transfers (the two halves of a transfer are",
        "; two rows of the service); Equity:Opening-Balances holds what preceded the first row.",
        "; Balance assertions (`~ 0.00`) hold to the cent, with no tolerance.",
    ]
    for s in skipped:
        lines.append(
            f"; not asserted: {s.account} on {s.day} (refresh {s.refresh_id}): the snapshot says "
            f"{money(s.snapshot_cents)}, the ledger {money(s.ledger_cents)}; the service's rows "
            "changed after that snapshot."
        )
    for account, category_id in sorted((from_payee or {}).items()):
        lines.append(
            f"; {account}: the service lists no name for category {category_id}; named after "
            "its most frequent payee (name it in the category names file: docs/analysts.md)."
        )
    lines.append('option "title" "centsync"')
    if rows.currency:
        lines.append(f'option "operating_currency" "{rows.currency}"')
    return "\n".join(lines) + "\n"


def write_ledger(
    warehouse: Path,
    out: Path,
    since: dt.date | None = None,
    given: dict[str, str] | None = None,
) -> Ledger:
    """Write the ledger to `out` whole (beside it first, then renamed); `given`: the names a
    person gave categories (`category_names`)."""
    con = connect_readonly(warehouse)
    try:
        rows = analysis.ledger_rows(con, since)
        refresh_id = analysis.latest_refresh_id(con)
    finally:
        con.close()
    entries, skipped, assertions, from_payee = build(rows, since, given)
    text = io.StringIO()
    text.write(header(rows, refresh_id, skipped, from_payee))
    printer.print_entries(data.sorted(entries), file=text)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_whole(out, lambda aside: aside.write_text(text.getvalue(), "utf-8"))
    return Ledger(
        out,
        rows.transactions.height,
        rows.accounts.height,
        assertions,
        skipped,
        refresh_id,
        from_payee,
    )
