"""What the report's workbench embeds: each difference's cause and command, the rows behind the
differences as readable fields, the rejected rows, the write-back outbox and the drill-down rows.

The drill-down embeds whole months of transactions as one compact block (column names once, then
one array per row): every month when the warehouse is small (the demo's 1,800 rows), else the
months that differ first and then the newest, up to `MAX_EMBEDDED_ROWS`. The aggregates of every
month are always in the page, so a month left out still shows its totals, and says how to query
its rows.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

import duckdb
import polars as pl

from centsync.transform.money import cents_text
from centsync.transform.spending import merchant_key
from centsync.warehouse import report_reads

MAX_EMBEDDED_ROWS = 20_000
# Up to this many embedded rows the page opens on all of them; above, on one month.
OPEN_ALL_BELOW = 5_000
MAX_ROW_DIFFERENCES = 500
MAX_REJECTED = 500

# Cause classes: a phrase of the sentence `transform/explain.py` writes -> (class, what to do);
# the first phrase found wins.
# `{months}` is the scope's months as `refresh --months` takes them.
CAUSES: tuple[tuple[str, str, str], ...] = (
    (
        "the local copy differs",
        "local copy changed",
        "centsync refresh --months {months}",
    ),
    ("local accounts differ", "local accounts changed", "centsync refresh"),
    (
        "rows the service sent were rejected",
        "rejected by validation",
        "fix or report the rows listed under Rejected rows, then centsync refresh --months {months}",
    ),
    ("the service changed", "service changed after the read", "centsync refresh (refresh again)"),
    ("net worth was read at the start", "service changed after the read", "centsync refresh"),
    ("the service's accounts changed", "service changed after the read", "centsync refresh"),
    ("hidden or removed on the service", "account hidden or removed", "centsync refresh"),
    (
        "the local rows are what the service sent",
        "service disagrees with its own rows",
        "centsync reconcile --live (to confirm), then report it to the service",
    ),
    (
        "the local accounts are what the service sent",
        "service disagrees with its own rows",
        "centsync reconcile --live (to confirm), then report it to the service",
    ),
    ("no month of this scope was ever read", "never read", "centsync refresh --months {months}"),
)
UNKNOWN_CAUSE = (
    "not explained",
    "centsync reconcile --live, then centsync refresh --months {months}",
)


def months_arg(from_date: dt.date | None, to_date: dt.date | None) -> str:
    """A scope's dates as `refresh --months` takes them: `2025-06` or `2024-01..2024-12`."""
    if from_date is None or to_date is None:
        return ""
    first, last = f"{from_date:%Y-%m}", f"{to_date:%Y-%m}"
    return first if first == last else f"{first}..{last}"


def _changed_in_scope(row: dict[str, Any], changed: Sequence[str]) -> str:
    """The months of changed local rows inside a scope, as one `--months` range ('' if none)."""
    first, last = row.get("from_date"), row.get("to_date")
    inside = [
        m
        for m in changed
        if (first is None or m >= f"{first:%Y-%m}") and (last is None or m <= f"{last:%Y-%m}")
    ]
    if not inside:
        return ""
    return inside[0] if inside[0] == inside[-1] else f"{inside[0]}..{inside[-1]}"


def cause(row: dict[str, Any], changed: Sequence[str] = ()) -> tuple[str, str]:
    """A difference's cause class and the command (or step) that resolves it; `changed` is the
    sorted months of the rows whose local copy differs (re-reading just those repairs them)."""
    text = str(row.get("explanation") or "")
    months = months_arg(row.get("from_date"), row.get("to_date"))
    label, action = UNKNOWN_CAUSE
    for phrase, cls, todo in CAUSES:
        if phrase in text:  # (a sentence may start with a count: "3 rows the service sent ...")
            label, action = cls, todo
            break
    if label == "local copy changed" and changed:
        months = _changed_in_scope(row, changed) or months
    if not months:  # no dated scope (accounts, net worth): the whole refresh
        action = action.replace(" --months {months}", "")
    return label, action.format(months=months)


def drill_target(row: dict[str, Any]) -> dict[str, str]:
    """What a difference's scope drills into: a month, a category or a merchant (or nothing)."""
    check, scope = str(row["check"]), str(row["scope"])
    head, _, tail = scope.partition("/")
    target: dict[str, str] = {}
    if check == "spending.month":
        target["month"] = scope
    elif check in ("spending.category", "spending.merchant") and tail:
        target["category" if check == "spending.category" else "merchant"] = tail
        if len(head) == 7:  # a month of its own: 2025-03/Transport
            target["month"] = head
    elif check.startswith("transactions.") and len(scope) == 7:
        target["month"] = scope
    return target


def difference_rows(diffs: Iterable[dict[str, Any]], changed: list[str]) -> list[dict[str, Any]]:
    """The differences for the page: money as text, cause, command, drill-down target."""
    out = []
    for d in diffs:
        label, action = cause(d, changed)
        out.append(
            {
                **d,
                "local": cents_text(d["local_cents"]),
                "server": cents_text(d["server_cents"]),
                "difference": cents_text(d["difference_cents"]),
                "cause": label,
                "action": action,
                "drill": json.dumps(drill_target(d)),
            }
        )
    return out


# ---- the rows behind the differences, field by field ----------------------------------------

KIND_WORDS = {
    "different": "different",
    "only_local": "only in the warehouse",
    "only_server": "only on the service",
}
_MONEY_FIELDS = {"amount", "balance"}


def _field_text(field: str, value: Any, names: dict[str, str]) -> str:
    """One field's value as a person reads it: money in units, ids named where known."""
    if value is None:
        return ""
    if field in _MONEY_FIELDS and isinstance(value, int):
        return cents_text(value)
    if field.endswith("_id") and str(value) in names:
        return f"{names[str(value)]}"
    return str(value)


def readable_row_differences(rows: pl.DataFrame, names: dict[str, str]) -> list[dict[str, Any]]:
    """Each row behind a difference as (field, local, service) triples: the differing fields
    first, then the identifying ones (date, concept, amount), never raw JSON."""
    out = []
    for r in rows.to_dicts():
        local = json.loads(r["local"]) if r["local"] else {}
        server = json.loads(r["server"]) if r["server"] else {}
        differing = [f.strip() for f in str(r["fields"] or "").split(",") if f.strip()]
        shown = differing + [
            f
            for f in ("booked_at", "concept", "amount", "name", "balance")
            if f not in differing and (f in local or f in server)
        ]
        out.append(
            {
                "kind": KIND_WORDS.get(r["kind"], r["kind"]),
                "entity": r["entity"],
                "id": r["id"],
                "month": r["month"] or "",
                "fields": [
                    {
                        "field": f,
                        "local": _field_text(f, local.get(f), names) if local else "(none)",
                        "server": _field_text(f, server.get(f), names) if server else "(none)",
                        "differs": f in differing or not (local and server),
                    }
                    for f in shown
                ],
            }
        )
    return out


def readable_rejected(rows: pl.DataFrame) -> list[dict[str, Any]]:
    """Rejected rows: entity, reason and the record's identifying fields."""
    out = []
    for r in rows.to_dicts():
        try:
            record = json.loads(r["record"]) if r["record"] else {}
        except json.JSONDecodeError:
            record = {}
        if not isinstance(record, dict):
            record = {"record": record}
        amount = record.get("amount")
        out.append(
            {
                "entity": r["entity"],
                "reason": r["reason"],
                "id": str(record.get("id", "")),
                "date": str(record.get("booked_at", "")),
                "concept": str(record.get("concept", record.get("name", ""))),
                "amount": cents_text(amount) if isinstance(amount, int) else str(amount or ""),
            }
        )
    return out


# ---- the drill-down block -------------------------------------------------------------------

DRILL_COLUMNS = (
    "id",
    "date",
    "month",
    "account",
    "category",
    "merchant",
    "concept",
    "type",
    "amount_cents",
    "service_amount_cents",
    "service_note",
    "state",
)


def months_to_embed(
    counts: pl.DataFrame, differing: set[str], budget: int | None = None
) -> list[str]:
    """Whole months within the row budget: the differing ones first, then the newest."""
    budget = MAX_EMBEDDED_ROWS if budget is None else budget
    rows = dict(zip(counts["month"].to_list(), counts["rows"].to_list(), strict=True))
    if sum(rows.values()) <= budget:
        return sorted(rows)
    chosen: list[str] = []
    used = 0
    for month in [m for m in sorted(differing) if m in rows] + list(rows):  # rows: newest first
        if month in chosen or used + rows[month] > budget:
            continue
        chosen.append(month)
        used += rows[month]
    return sorted(chosen)


def _service_side(diffs: pl.DataFrame) -> dict[str, dict[str, Any]]:
    """Transaction id -> how the service's copy differs (for the drill-down's service columns)."""
    side: dict[str, dict[str, Any]] = {}
    for r in diffs.filter(pl.col("entity") == "transactions").to_dicts():
        server = json.loads(r["server"]) if r["server"] else None
        side[r["id"]] = {"kind": r["kind"], "fields": r["fields"] or "", "server": server}
    return side


def _note(entry: dict[str, Any], names: dict[str, str]) -> tuple[int | None, str, str]:
    """(service amount, what the service has where it differs, the row's state) of one row."""
    server = entry["server"]
    kind = entry["kind"]
    if kind == "only_local" or server is None:
        return None, "(not on the service)", "only in the warehouse"
    fields = [f.strip() for f in str(entry["fields"]).split(",") if f.strip()]
    note = "; ".join(f"{f}: {_field_text(f, server.get(f), names)}" for f in fields)
    state = "only on the service" if kind == "only_server" else "differs: " + ", ".join(fields)
    amount = server.get("amount")
    return (amount if isinstance(amount, int) else None), note, state


def _service_only_rows(
    side: dict[str, dict[str, Any]], months: set[str], names: dict[str, str]
) -> list[list[Any]]:
    """Rows the service sent that the warehouse lacks, in the drill-down's shape."""
    out = []
    for tid, entry in side.items():
        s = entry["server"]
        if entry["kind"] != "only_server" or not s or str(s.get("booked_at", ""))[:7] not in months:
            continue
        amount, note, state = _note(entry, names)
        concept = str(s.get("concept", ""))
        out.append(
            [
                tid,
                str(s.get("booked_at", "")),
                str(s.get("booked_at", ""))[:7],
                names.get(str(s.get("account_id")), ""),
                names.get(str(s.get("category_id")), ""),
                " ".join(concept.split()).lower(),
                "",  # no local concept: the service's is in the note
                str(s.get("type", "")),
                None,
                amount,
                f"concept: {concept}; {note}" if note else f"concept: {concept}",
                state,
            ]
        )
    return out


def drill_block(
    con: duckdb.DuckDBPyConnection, recon_id: str, differing: set[str]
) -> dict[str, Any]:
    """The drill-down's rows (whole months, within the budget) with the service's side where
    it differs, plus which months are embedded and how many rows each month has."""
    counts = report_reads.month_row_counts(con)
    months = months_to_embed(counts, differing)
    tx = report_reads.transactions_of_months(con, months).with_columns(
        merchant=merchant_key(pl.col("concept"))
    )
    diffs = report_reads.row_differences(con, recon_id, MAX_EMBEDDED_ROWS)
    names = {**report_reads.category_names(con), **report_reads.account_names(con)}
    side = _service_side(diffs)
    rows: list[list[Any]] = []
    for t in tx.iter_rows(named=True):
        entry = side.get(t["id"])
        service_amount, note, state = _note(entry, names) if entry else (None, "", "")
        rows.append([t[c] for c in DRILL_COLUMNS[:9]] + [service_amount, note, state])
    rows += _service_only_rows(side, set(months), names)
    return {
        "columns": list(DRILL_COLUMNS),
        "rows": rows,
        "embedded": months,
        "month_rows": dict(zip(counts["month"].to_list(), counts["rows"].to_list(), strict=True)),
        "budget": MAX_EMBEDDED_ROWS,
        "open_all_below": OPEN_ALL_BELOW,
        "differing": sorted(differing),
        "total_rows": int(counts["rows"].sum() or 0),
    }
