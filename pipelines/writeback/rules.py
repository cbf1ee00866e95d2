"""`centsync rules`: a rules file applied to the warehouse's transactions, as `edit` and `assign`
rows through the write-back's outbox (transform.rules decides; this module reads and writes).

The current value of each field is the warehouse's, with the outbox's own edits still on their
way (queued or sent, not yet read back by a refresh) applied over it, and the latest note the
outbox posted (the API's list returns no notes): so a second run plans nothing, even before the
next refresh. A dry run writes nothing.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from centsync.pipelines.results import RulesResult
from centsync.pipelines.writeback import intake
from centsync.transform import rules as policy
from centsync.transform import writeback as wb
from centsync.transform.contract import UUID_RE
from centsync.warehouse.analyst_marts import renames_path, save_renames
from centsync.warehouse.errors import NoWarehouseError
from centsync.warehouse.outbox import Outbox, outbox_path
from centsync.warehouse.paths import reading
from centsync.warehouse.reads import rule_candidates, writeback_reference

SOURCE = "rules"


def load(path: Path, currency: str = "EUR") -> policy.RulesFile:
    """A rules file read and parsed (RulesError says what is wrong and where)."""
    try:
        text = Path(path).read_text("utf-8")
    except FileNotFoundError:
        raise policy.RulesError(f"no rules file {path}: check the path") from None
    except UnicodeDecodeError as e:
        raise policy.RulesError(f"{path} is not UTF-8 ({e}): save it as UTF-8") from None
    return policy.parse(text, currency, name=Path(path).name)


def _warehouse(warehouse: Path) -> tuple[pl.DataFrame, dict[str, str], str]:
    """The transactions, the categories (name -> id) and the currency the warehouse holds."""
    if not Path(warehouse).exists():
        raise NoWarehouseError(
            f"no warehouse at {warehouse}: run `centsync refresh` first (rules and bank files "
            "are checked against its accounts, categories and transactions)"
        )
    with reading(warehouse) as con:
        frame = rule_candidates(con)
        ref = writeback_reference(con, [])
    cats = dict(zip(ref.categories["name"].to_list(), ref.categories["id"].to_list(), strict=True))
    return frame, {k: str(v).lower() for k, v in cats.items()}, ref.currency or "EUR"


def _current(frame: pl.DataFrame, outbox: Outbox) -> pl.DataFrame:
    """The transactions with the outbox's edits on their way applied, and their latest note."""
    notes: dict[str, str] = {}
    pending: dict[str, dict[str, Any]] = {}
    for row in outbox.live():
        tid = str(row["transaction_id"] or row["server_id"] or "")
        body = orjson.loads(row["body"])
        if not tid:
            continue
        if "notes" in body:
            notes[tid] = body["notes"]
        if row["state"] in ("pending", "sent"):
            got = pending.setdefault(tid, {})
            if "category_id" in body:
                got["category_id"] = body["category_id"]
            if row["operation"] == "assign":
                got["expense_goal_id"] = body.get("expense_goal_id")
    rows = frame.to_dicts()
    for r in rows:
        r.update(pending.get(r["id"], {}))
        r["notes"] = notes.get(r["id"])
    return pl.DataFrame(rows, schema=[*frame.schema.items(), ("notes", pl.String)])


def _check_accounts(rules: policy.RulesFile, frame: pl.DataFrame, name: str) -> None:
    """Every account a rule matches on must be one the warehouse knows (by exact name or id):
    else the rule would match nothing, silently."""
    names = set(frame["account_name"].cast(pl.String).drop_nulls().to_list())
    ids = set(frame["account_id"].cast(pl.String).drop_nulls().to_list())
    for r in rules.rules:
        a = r.account
        if a is not None and a not in names and a.lower() not in ids:
            raise policy.RulesError(
                f"{name}, rule {r.id!r}: no account {a!r}: {wb.did_you_mean(a, names)}use an "
                f"account's exact name or id ({', '.join(sorted(names)[:10])})"
            )


def _check_categories(rules: policy.RulesFile, categories: dict[str, str], name: str) -> None:
    """Every category a rule sets must be one the warehouse knows (by exact name or id)."""
    for r in rules.rules:
        c = r.category
        if c is not None and not UUID_RE.match(c) and c not in categories:
            known = ", ".join(sorted(categories)[:15])
            raise policy.RulesError(
                f"{name}, rule {r.id!r}: no category {c!r}: {wb.did_you_mean(c, categories)}use "
                f"a category's exact name or id ({known})"
            )


def apply_rules(
    warehouse: Path, rules_path: Path, now: dt.datetime, *, dry_run: bool
) -> RulesResult:
    """Plan a rules file against the warehouse; unless dry, queue its rows in the outbox."""
    load(rules_path)  # the file's own mistakes first (missing, not TOML, a pattern), then
    frame, categories, currency = _warehouse(warehouse)  # the warehouse's; amounts in its currency
    rules = load(rules_path, currency)
    _check_categories(rules, categories, Path(rules_path).name)
    _check_accounts(rules, frame, Path(rules_path).name)
    outbox = Outbox(outbox_path(Path(warehouse)))
    run = RulesResult(
        rules_file=Path(rules_path).name, rules=len(rules.rules), transactions=frame.height,
        dry_run=dry_run, outbox=str(outbox.path),
    )  # fmt: skip
    if not dry_run and (rules.merchants or renames_path(Path(warehouse)).exists()):
        save_renames(Path(warehouse), rules.merchants)  # shown from the next marts' rebuild
    run.merchant_renames = len(rules.merchants)
    with outbox.draining(by="rules"):
        found = policy.changes(rules.rules, _current(frame, outbox), categories)
        run.changes = [_change(c) for c in found]
        rows = policy.source_rows(found)
        ref = intake.reference(warehouse, rows)
        if not rows or ref is None:
            return run
        planned = wb.plan(rows, ref, source=SOURCE, source_name=run.rules_file)
        if dry_run:
            existing = outbox.keys_and_bodies()
            outcomes = [
                "duplicate" if (p.key, p.body_sha256) in existing else "new" for p in planned
            ]
        else:
            outcomes = outbox.enqueue([intake.outbox_record(p) for p in planned], now)
    for p, outcome in zip(planned, outcomes, strict=True):
        action = "duplicate" if outcome == "duplicate" else "rejected" if p.reason else "send"
        run.duplicates += action == "duplicate"
        run.rejected += action == "rejected"
        run.queued += action == "send"
        run.plan.append(intake.planned_entry(p, action))
    return run


def _change(c: policy.Change) -> dict[str, Any]:
    """A change as the command's JSON lists it."""
    return {
        "rule": c.rule,
        "transaction_id": c.transaction_id,
        "booked_at": c.booked_at.isoformat(),
        "concept": c.concept,
        "amount": c.amount,
        "field": c.field,
        "before": c.before,
        "after": c.after,
    }
