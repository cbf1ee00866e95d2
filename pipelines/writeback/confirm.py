"""What a refresh does with the write-back outbox: read back the months written to, confirm the
rows it sees on the service, and copy the outbox into the warehouse's ops.outbox."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import orjson

from centsync.warehouse.outbox import Outbox, mirror, outbox_path
from centsync.warehouse.reads import months_of_transactions, transactions_as_sent


def written_months(con: duckdb.DuckDBPyConnection, warehouse: Path) -> list[dt.date]:
    """First days of the months that sent (not yet confirmed) rows changed on the service: a
    create's month, and an edited or assigned transaction's month (old and new date)."""
    outbox = Outbox(outbox_path(Path(warehouse)))
    if not outbox.exists():
        return []
    months: set[dt.date] = set()
    edited = []
    for r in outbox.in_state("sent"):
        if r["booked_at"] is not None:
            months.add(r["booked_at"].replace(day=1))
        if r["transaction_id"] is not None:
            edited.append(str(r["transaction_id"]))
        body = orjson.loads(r["body"]) if r["body"] else {}
        if r["operation"] == "edit" and "booked_at" in body:
            months.add(dt.date.fromisoformat(body["booked_at"]).replace(day=1))
    if edited:
        months.update(months_of_transactions(con, edited))
    return sorted(months)


# the fields an edit or assign sends that the list returns (notes it does not)
_COMPARED = ("concept", "category_id", "amount", "booked_at", "type", "expense_goal_id")


def confirm(
    con: duckdb.DuckDBPyConnection, outbox: Outbox, refresh_id: str, now: dt.datetime
) -> int:
    """Sent rows that this refresh read back from the service become confirmed.

    A create is confirmed when its transaction is in core.transactions; an edit or assign when
    the transaction carries the fields it sent (notes are not in the list, so not compared).
    """
    sent = outbox.accepted()
    if not sent:
        return 0
    seen = transactions_as_sent(con, [str(r["server_id"]) for r in sent])
    done = []
    for r in sent:
        local = seen.get(str(r["server_id"]))
        if local is None:
            continue
        if r["operation"] != "create":
            body = orjson.loads(r["body"])
            if any(local[f] != body[f] for f in _COMPARED if f in body):
                continue
        done.append(int(r["id"]))
    outbox.confirm(done, refresh_id, now)
    return len(done)


def after_refresh(
    con: duckdb.DuckDBPyConnection, warehouse: Path, refresh_id: str
) -> tuple[int, dict[str, int]] | None:
    """In a refresh's working copy: confirm what it read back, copy the outbox in.

    Returns (rows confirmed, outbox rows per state), or None when there is no outbox.
    """
    outbox = Outbox(outbox_path(Path(warehouse)))
    if not outbox.exists():
        return None
    confirmed = confirm(con, outbox, refresh_id, dt.datetime.now(dt.UTC))
    mirror(con, outbox.frame())
    return confirmed, outbox.counts()
