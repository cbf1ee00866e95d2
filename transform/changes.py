"""What the service changed, in words: each change a refresh saw, the month's category total it
moved and by how much, and the line that explains it (`centsync changes`, the report).

Pure: the rows come from the warehouse's history (warehouse/history.py `changes_since`: the
version after beside the version before, `b_*`). A total is the month's category total: the
sum of every row of that month and category (each type with its sign; integer cents). A change
that moves a row to another month or category appears in both: out of one, into the other.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from itertools import groupby
from typing import Any

import polars as pl

from centsync.transform.money import cents_text

UNCATEGORISED = "Uncategorized"
# fields a change's words name (created_at, updated_at and month follow from these)
SHOWN = ("concept", "amount", "booked_at", "type", "category_id", "account_id", "expense_goal_id")
# how the words name a field (the JSON's `fields` keep the column names)
LABELS = {
    "booked_at": "date",
    "category_id": "category",
    "account_id": "account",
    "expense_goal_id": "Expense goal",
}
BY = {"service": "by the service", "write-back": "by our write-back", "rule": "by our rule"}


def _name(category_id: str | None, names: Mapping[str, str]) -> str:
    if category_id is None:
        return UNCATEGORISED
    return names.get(category_id, f"category {category_id[:8]}")


def _shown(value: Any, field: str, names: Mapping[str, str]) -> str:
    if field == "amount":
        return cents_text(value)
    if field == "category_id":
        return _name(value, names)
    if isinstance(value, dt.date):
        return value.isoformat()
    return "none" if value is None else str(value)


def _version(row: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """A version's shown fields (amount in cents, dates as text); None when there is none."""
    if row.get(prefix + "amount") is None:
        return None
    out = {}
    for f in SHOWN:
        v = row.get(prefix + f)
        out[f] = v.isoformat() if isinstance(v, dt.date) else v
    return out


def _month(day: dt.date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def explain(frame: pl.DataFrame, names: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every change of `frame`, once per month's category total it moves, oldest first.

    Each: id, refresh_no, seen_on, month, category, kind, origin, concept, fields, before,
    after, effect_cents and explanation (the words: 'MERCADONA amount -45.10 -> -57.50 on
    2026-11-03 (changed by the service)').
    """
    out: list[dict[str, Any]] = []
    for row in frame.iter_rows(named=True):
        kind, seen = row["kind"], row["seen_at"]
        on = seen.date().isoformat() if seen is not None else "?"
        by = BY.get(row["origin"], row["origin"])
        before, after = _version(row, "b_"), _version(row, "")
        base = {
            "id": row["id"],
            "refresh_no": row["refresh_no"],
            "seen_on": on,
            "kind": kind,
            "origin": row["origin"],
            "concept": row["concept"],
            "fields": [f for f in row["changed_fields"] or [] if f != "updated_at"],
            "before": before if kind != "deleted" else after,
            "after": after if kind != "deleted" else None,
        }
        amount = cents_text(row["amount"])
        here = (_month(row["booked_at"]), _name(row["category_id"], names))
        if kind == "deleted":
            words = f"{row['concept']} {amount} on {on} (removed {by})"
            out.append(
                {
                    **base,
                    "month": here[0],
                    "category": here[1],
                    "effect_cents": -row["amount"],
                    "explanation": words,
                }
            )
            continue
        if kind in ("added", "came back"):
            verb = "added" if kind == "added" else "back"
            words = f"{row['concept']} {amount} on {on} ({verb} {by})"
            out.append(
                {
                    **base,
                    "month": here[0],
                    "category": here[1],
                    "effect_cents": row["amount"],
                    "explanation": words,
                }
            )
            continue
        out.extend(_changed(row, base, here, names, on, by))
    return out


def _changed(
    row: Mapping[str, Any],
    base: dict[str, Any],
    here: tuple[str, str],
    names: Mapping[str, str],
    on: str,
    by: str,
) -> list[dict[str, Any]]:
    """A changed row: one entry when it stays in its month's category, else one in each."""
    fields = [f for f in SHOWN if f in (row["changed_fields"] or [])]
    diffs = ", ".join(
        f"{LABELS.get(f, f)} {_shown(row['b_' + f], f, names)} -> {_shown(row[f], f, names)}"
        for f in fields
    )
    what = diffs or (
        "its payload as sent" if "payload" in (row["changed_fields"] or []) else "updated_at"
    )
    words = f"{row['b_concept']} {what} on {on} (changed {by})"
    was = (_month(row["b_booked_at"]), _name(row["b_category_id"], names))
    if was == here:
        effect = row["amount"] - row["b_amount"]
        return [
            {
                **base,
                "month": here[0],
                "category": here[1],
                "effect_cents": effect,
                "explanation": words,
            }
        ]
    return [
        {
            **base,
            "month": was[0],
            "category": was[1],
            "effect_cents": -row["b_amount"],
            "explanation": f"{words}: moved to {here[0]} {here[1]}",
        },
        {
            **base,
            "month": here[0],
            "category": here[1],
            "effect_cents": row["amount"],
            "explanation": f"{words}: moved from {was[0]} {was[1]}",
        },
    ]


def touched_only(change: Mapping[str, Any]) -> bool:
    """A change of no field the words name (only updated_at, or a field core does not keep:
    a pending charge settled as it was): kept in `--json`, counted in the words."""
    return change["kind"] == "changed" and not any(f in SHOWN for f in change["fields"])


def lines(changes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The changes as people read them, by month and category with each total's change:
    '2026-10 Groceries -12.40: MERCADONA amount -45.10 -> -57.50 on 2026-11-03 (changed by the
    service)'; a total moved by several rows gets a line of its own and one per row. Rows only
    touched (`touched_only`) are counted on a last line."""
    key = lambda c: (c["month"], c["category"])  # noqa: E731
    every = list(changes)
    shown = [c for c in every if not touched_only(c)]
    out: list[str] = []
    for (month, category), group in groupby(sorted(shown, key=key), key=key):
        rows = list(group)
        total = cents_text(sum(c["effect_cents"] for c in rows))
        if len(rows) == 1:
            out.append(f"{month} {category} {total}: {rows[0]['explanation']}")
            continue
        out.append(f"{month} {category} {total}:")
        out.extend(f"  {cents_text(c['effect_cents'])}: {c['explanation']}" for c in rows)
    if len(shown) < len(every):
        out.append(
            f"and {len(every) - len(shown)} rows updated with no field shown changed "
            "(updated_at or the payload only: a pending charge settled as it was; --json lists them)"
        )
    return out
