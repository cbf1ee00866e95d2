"""Categorisation rules, pure: a TOML rules file's text in, the edits it calls for out.

A rule matches transactions (concept pattern, merchant, amount range, account, type) and sets
fields (category, Expense, notes). Rules are tried in file order; the first rule that matches
a transaction decides it. A rule's edit of a transaction is keyed on (rule id, rule version,
transaction id), and only the fields whose current value differs are set: applying the same
rules again plans nothing, and a changed rule (a new version) plans only the difference.

    [[rule]]
    id = "coffee"                      # required, stable: part of every key
    version = 1                        # optional: default, a hash of the rule's own text
    concept = "(?i)caf[eé]|coffee"     # a regular expression searched in the concept
    merchant = "cafe central"          # the merchant key (trimmed, lower-cased concept)
    account = "Cash Wallet"            # an account's exact name or id
    type = "expense"                   # expense, income or transfer
    amount_min = "-20.00"              # bounds in currency units, inclusive
    amount_max = "0"
    set = { category = "Restaurants", notes = "coffee", expense = "<an Expense's id>" }

    [accounts]                         # bank files: the file's account id -> an account
    "FR7630006000011234567890189" = "Checking"

    [merchants]                        # display names: a merchant key (or cleaned name) -> name
    "amzn mktp es" = "Amazon"          # shown in the marts, report and notebooks, never sent
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import polars as pl
import re2

from centsync.transform.contract import TRANSACTION_TYPES, UUID_RE
from centsync.transform.spending import merchant_key
from centsync.transform.writeback import RowError, SourceRow, parse_amount

MATCH_KEYS = ("concept", "merchant", "account", "type", "amount_min", "amount_max")
SET_KEYS = ("category", "expense", "notes")
RULE_KEYS = ("id", "version", "set", *MATCH_KEYS)
TOP_KEYS = ("rule", "accounts", "merchants")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class RulesError(ValueError):
    """A rules file that cannot be used: where, what is wrong and what to do."""


@dataclass(frozen=True)
class Rule:
    """One rule: what it matches and what it sets."""

    id: str
    version: str
    concept: Any = None  # a compiled RE2 pattern: linear time, whatever the text
    merchant: str | None = None
    account: str | None = None
    type: str | None = None
    amount_min: int | None = None  # cents, inclusive
    amount_max: int | None = None
    category: str | None = None
    expense: str | None = None
    notes: str | None = None

    @property
    def ref(self) -> str:
        """`id@version`: the rule's part of an edit's event id."""
        return f"{self.id}@{self.version}"


@dataclass(frozen=True)
class RulesFile:
    """A parsed rules file: its rules, in order, and its bank-account mapping."""

    rules: list[Rule]
    accounts: dict[str, str]
    # merchant key (or cleaned name) -> the display name the person chose (never sent)
    merchants: dict[str, str] = dataclasses.field(default_factory=dict)


def parse(text: str, currency: str = "EUR", *, name: str = "rules file") -> RulesFile:
    """A rules file's text, checked whole: every problem names its rule and what to do."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RulesError(f"{name} is not valid TOML ({e}): fix it and run again") from None
    unknown = sorted(set(doc) - set(TOP_KEYS))
    if unknown:
        raise RulesError(
            f"{name}: unknown table(s) {', '.join(unknown)}; use [[rule]], [accounts], [merchants]"
        )
    accounts = doc.get("accounts", {})
    if not isinstance(accounts, dict) or not all(isinstance(v, str) for v in accounts.values()):
        raise RulesError(f'{name}: [accounts] maps a file\'s account id to a name: "ID" = "Name"')
    raw_rules = doc.get("rule", [])
    if not isinstance(raw_rules, list):
        raise RulesError(f"{name}: rules are [[rule]] tables")
    rules = [_rule(r, i, currency, name) for i, r in enumerate(raw_rules, 1)]
    ids = [r.id for r in rules]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise RulesError(f"{name}: rule id(s) {', '.join(dupes)} used twice: ids must be unique")
    return RulesFile(rules, {str(k): v for k, v in accounts.items()}, _merchants(doc, name))


def _merchants(doc: Mapping[str, Any], name: str) -> dict[str, str]:
    """The [merchants] renames, keyed as the merchant key is (trimmed, lower-cased, whitespace
    collapsed), so `"AMZN Mktp ES"` renames `amzn mktp es`."""
    table = doc.get("merchants", {})
    if not isinstance(table, dict) or not all(
        isinstance(v, str) and v.strip() for v in table.values()
    ):
        raise RulesError(
            f'{name}: [merchants] maps a merchant to the name to show: "amzn mktp es" = "Amazon"'
        )
    keys = pl.DataFrame({"k": list(table)}, schema={"k": pl.String}).select(
        merchant_key(pl.col("k"))
    )["k"]
    return dict(zip(keys.to_list(), [v.strip() for v in table.values()], strict=True))


def _rule(raw: Any, n: int, currency: str, name: str) -> Rule:
    """One [[rule]] table, checked."""
    where = f"{name}, rule {n}"
    if not isinstance(raw, dict):
        raise RulesError(f"{where}: not a table")
    unknown = sorted(set(raw) - set(RULE_KEYS))
    if unknown:
        raise RulesError(
            f"{where}: unknown key(s) {', '.join(unknown)}; use {', '.join(RULE_KEYS)}"
        )
    rid = str(raw.get("id", ""))
    if not _ID.match(rid):
        raise RulesError(f"{where}: id {rid!r} must be 1-64 letters, digits, '.', '_' or '-'")
    where = f"{name}, rule {rid!r}"
    sets = raw.get("set", {})
    if not isinstance(sets, dict) or set(sets) - set(SET_KEYS) or not sets:
        raise RulesError(f"{where}: `set` must give one or more of {', '.join(SET_KEYS)}")
    if not any(k in raw for k in MATCH_KEYS):
        raise RulesError(f"{where}: match on at least one of {', '.join(MATCH_KEYS)}")
    concept = _pattern(where, raw["concept"]) if "concept" in raw else None
    typ = raw.get("type")
    if typ is not None and typ not in TRANSACTION_TYPES:
        raise RulesError(f"{where}: type {typ!r}: use expense, income or transfer")
    expense = sets.get("expense")
    if expense is not None and not UUID_RE.match(str(expense)):
        raise RulesError(f"{where}: set.expense {expense!r} is not an Expense's id (a uuid)")
    bounds = {}
    for key in ("amount_min", "amount_max"):
        if key in raw:
            try:
                bounds[key] = parse_amount(str(raw[key]), currency)
            except RowError as e:
                raise RulesError(f"{where}: {key}: {e.reason}") from None
    version = str(raw["version"]) if "version" in raw else _content_version(raw)
    return Rule(
        id=rid,
        version=version,
        concept=concept,
        merchant=str(raw["merchant"]).strip().lower() if "merchant" in raw else None,
        account=str(raw["account"]) if "account" in raw else None,
        type=typ,
        category=None if sets.get("category") is None else str(sets["category"]),
        expense=None if expense is None else str(expense).lower(),
        notes=None if sets.get("notes") is None else str(sets["notes"]),
        **bounds,
    )


def _pattern(where: str, raw: Any) -> Any:
    """A rule's `concept`, compiled by RE2: it runs in time linear in the text, so no pattern
    backtracks for ever (`(a+)+$`); what RE2 cannot run in linear time (backreferences such as
    `\\1`, lookaround such as `(?=...)`) is refused here, naming the rule and why."""
    options = re2.Options()
    options.log_errors = False  # the reason is in the error, said once, below
    try:
        return re2.compile(str(raw), options)
    except re2.error as e:
        why = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise RulesError(
            f"{where}: concept {raw!r} is not a regular expression centsync can run ({why}): rule patterns "
            "are RE2 regular expressions, which run in linear time and so have no "
            "backreferences (\\1) or lookaround ((?=...), (?!...), (?<=...)); rewrite it "
            "without them"
        ) from None


def _content_version(raw: Mapping[str, Any]) -> str:
    """A rule's default version: a short hash of its own text (a changed rule, a new version)."""
    body = {k: v for k, v in raw.items() if k not in ("id", "version")}
    return "h" + hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()[:10]


@dataclass(frozen=True)
class Change:
    """One field a rule changes on one transaction: before and after (names, for people)."""

    rule: str  # id@version
    transaction_id: str
    booked_at: dt.date
    concept: str
    amount: int
    field: str  # category, expense, notes
    before: str | None  # for people: a category by its name
    after: str
    value: str  # what is sent: a category or Expense by its id, the notes verbatim


def _matches(rule: Rule, t: Mapping[str, Any]) -> bool:
    """Whether a transaction (a row of the candidates frame) matches every condition of a rule."""
    checks = (
        rule.concept is None or rule.concept.search(t["concept"]) is not None,
        rule.merchant is None or t["merchant"] == rule.merchant,
        rule.account is None or rule.account in (t["account_name"], str(t["account_id"])),
        rule.type is None or t["type"] == rule.type,
        rule.amount_min is None or t["amount"] >= rule.amount_min,
        rule.amount_max is None or t["amount"] <= rule.amount_max,
    )
    return all(checks)


def changes(
    rules: Iterable[Rule],
    transactions: pl.DataFrame,
    categories: Mapping[str, str],
) -> list[Change]:
    """Every field the rules would change, against the current values in `transactions`.

    `transactions`: id, account_id, account_name, booked_at, amount, concept, type,
    category_id, expense_goal_id, notes (current values, with edits still on their way
    applied); `categories`: name -> id (a rule names a category by name or id; a name not
    among them is refused before this, by the caller).
    """
    names = {v: k for k, v in categories.items()}
    rules = list(rules)
    out: list[Change] = []
    frame = transactions.with_columns(merchant=merchant_key(pl.col("concept")))
    for t in frame.iter_rows(named=True):
        rule = next((r for r in rules if _matches(r, t)), None)
        if rule is None:
            continue
        for field, target, current in _targets(rule, t, categories):
            if target is not None and target != current:
                before = names.get(current or "", current) if field == "category" else current
                after = names.get(target, target) if field == "category" else target
                out.append(
                    Change(rule.ref, str(t["id"]), t["booked_at"], t["concept"], t["amount"],
                           field, before, after, target)
                )  # fmt: skip
    return out


def _targets(
    rule: Rule, t: Mapping[str, Any], categories: Mapping[str, str]
) -> list[tuple[str, str | None, str | None]]:
    """(field, the rule's value, the current value) for each field the rule sets."""
    category = rule.category
    if category is not None:
        category = category.lower() if UUID_RE.match(category) else categories.get(category)
    expense = rule.expense if t["type"] == "expense" else None  # only expenses have Expenses
    current = {
        c: None if t[c] is None else str(t[c]).lower() for c in ("category_id", "expense_goal_id")
    }
    return [
        ("category", category, current["category_id"]),
        ("expense", expense, current["expense_goal_id"]),
        ("notes", rule.notes, t["notes"]),
    ]


def source_rows(found: Iterable[Change]) -> list[SourceRow]:
    """The changes as write-back rows: one `edit` (category, notes) and one `assign` (Expense)
    per rule and transaction, whose event id is `rule:<id>@<version>:<transaction id>`."""
    grouped: dict[tuple[str, str, str], dict[str, str]] = {}
    for c in found:
        op = "assign" if c.field == "expense" else "edit"
        cells = grouped.setdefault((c.rule, c.transaction_id, op), {})
        cells["expense_goal_id" if op == "assign" else c.field] = c.value
    rows = []
    for n, ((rule, tid, op), sets) in enumerate(sorted(grouped.items()), 1):
        cells = {"event_id": f"rule:{rule}:{tid}", "operation": op, "transaction_id": tid, **sets}
        text = orjson.dumps(cells, option=orjson.OPT_SORT_KEYS).decode()
        rows.append(SourceRow(n, cells, text))
    return rows
