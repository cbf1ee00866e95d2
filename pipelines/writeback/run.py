"""Write-back: inbox files and analysts' requests into the outbox, then the outbox to the service.

    intake   read the inbox's CSV files and ops.outbox_requests, check every row against the
             warehouse (transform.writeback), write each request with its exact body and key
             (or its reason) into the outbox in one transaction per source, then move the file
             to inbox/done/ or inbox/rejected/ (with a .errors.csv beside it)
    drain    send each pending row with its key; record the outcome before the next one
    confirm  (in a refresh) rows the refresh read back from the service become confirmed

Crash safety: a row is on disk before its request leaves, and its attempt is noted before the
send; a send whose outcome is unknown is resent with the same key and body, which the service
replays. The service keeps keys 24 hours (contract section 4): a row whose outcome is unknown
and whose first send is older than that is looked up on the service (account, date, amount,
concept) before it is resent, so a late retry cannot create a second transaction.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from centsync.extract import (
    ApiClient,
    ApiError,
    IdempotencyConflict,
    IdempotencyKeyReused,
    InsufficientScope,
    KeyExpired,
    RateLimited,
    TransportFailure,
    Unauthenticated,
)
from centsync.transform import writeback as rules
from centsync.warehouse import connect_readonly
from centsync.warehouse.outbox import STATES, Outbox, outbox_path

log = logging.getLogger("centsync.pipelines.writeback")

INBOX_ENV = "CENTSYNC_INBOX"
KEY_TTL = dt.timedelta(hours=24)  # contract section 4: the service keeps keys this long
REQUESTS_NAME = "ops.outbox_requests"


class WriteScopeMissing(Exception):
    """The key cannot write (no data.write scope): nothing was sent, every row stays pending."""


class DrainStopped(Exception):
    """The service could not be reached or refused the key: the rest stays pending."""


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def inbox_path(warehouse: Path) -> Path:
    """`$CENTSYNC_INBOX`, else `inbox/` beside the warehouse."""
    env = os.environ.get(INBOX_ENV)
    return Path(env).absolute() if env else Path(warehouse).absolute().parent / "inbox"


@dataclass
class WritebackOptions:
    dry_run: bool = False
    strict: bool = True  # the write-back job: a read-only key fails; in a refresh it is a warning
    now: Callable[[], dt.datetime] = utcnow
    inbox: Path | None = None


@dataclass
class WritebackSummary:
    files: list[dict[str, Any]] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)
    queued: int = 0
    duplicates: int = 0
    rejected: int = 0
    conflicts: int = 0
    sent: int = 0
    replayed: int = 0
    found_by_lookup: int = 0
    rejected_by_service: int = 0
    needs_attention: int = 0
    unknown: int = 0
    confirmed: int = 0
    requests: int = 0
    stopped: str | None = None
    warnings: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    outbox: str = ""
    inbox: str = ""
    dry_run: bool = False

    def report(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def line(self) -> str:
        """One line for a refresh summary or a log."""
        if self.dry_run:
            would = sum(1 for p in self.plan if p["action"] == "send")
            return f"write-back (dry run): {would} would be sent, {self.rejected} rejected"
        parts = [f"{self.sent} sent"]
        if self.replayed:
            parts.append(f"{self.replayed} replayed")
        if self.found_by_lookup:
            parts.append(f"{self.found_by_lookup} found on the service")
        parts.append(f"{self.rejected + self.rejected_by_service} rejected")
        if self.needs_attention or self.conflicts:
            parts.append(f"{self.needs_attention + self.conflicts} need attention")
        if self.confirmed:
            parts.append(f"{self.confirmed} confirmed")
        pending = self.counts.get("pending", 0)
        if pending:
            parts.append(f"{pending} pending")
        return "write-back: " + ", ".join(parts)


# ------------------------------------------------------------------------------ reference data


def reference(warehouse: Path, rows: list[rules.SourceRow]) -> rules.Reference | None:
    """What the published warehouse knows (None before the first refresh)."""
    if not Path(warehouse).exists():
        return None
    con = connect_readonly(warehouse)
    try:
        accounts = pl.from_arrow(
            con.sql("SELECT id::VARCHAR AS id, name, currency FROM core.accounts").to_arrow_table()
        )
        categories = pl.from_arrow(
            con.sql("SELECT id::VARCHAR AS id, name FROM core.categories").to_arrow_table()
        )
        goals = [
            str(r[0])
            for r in con.execute(
                "SELECT DISTINCT expense_goal_id FROM core.transactions "
                "WHERE expense_goal_id IS NOT NULL"
            ).fetchall()
        ]
        wanted = rules.referenced_transactions(rows)
        tx = pl.from_arrow(
            con.sql(
                "SELECT id::VARCHAR AS id, type FROM core.transactions "
                "WHERE id::VARCHAR IN (SELECT unnest(?::VARCHAR[]))",
                params=[wanted],
            ).to_arrow_table()
        )
        currency = con.execute("SELECT any_value(currency) FROM core.settings").fetchall()[0][0]
    finally:
        con.close()
    assert isinstance(accounts, pl.DataFrame) and isinstance(categories, pl.DataFrame)
    assert isinstance(tx, pl.DataFrame)
    if accounts.height == 0:
        return None
    return rules.Reference.from_frames(accounts, categories, goals, tx, currency or "EUR")


# ---------------------------------------------------------------------------------------- intake


def _record(p: rules.Planned) -> dict[str, Any]:
    return {
        "idempotency_key": p.key,
        "body_sha256": p.body_sha256,
        "operation": p.operation,
        "method": p.method,
        "path": p.path,
        "body": p.body_json,
        "state": "rejected" if p.reason else "pending",
        "reason": f"not sent: {p.reason}" if p.reason else None,
        "source": p.source,
        "source_name": p.source_name,
        "source_line": p.line,
        "event_ref": p.event_ref,
        "row_text": p.text,
        "account_id": p.account_id,
        "booked_at": p.booked_at,
        "amount": p.amount,
        "concept": p.concept,
        "transaction_id": p.transaction_id,
    }


def _plan_entry(p: rules.Planned, action: str) -> dict[str, Any]:
    return {
        "source": p.source_name,
        "line": p.line,
        "operation": p.operation,
        "action": action,  # send, duplicate, rejected, conflict
        "request": f"{p.method} {p.path}".strip(),
        "body": p.body or None,
        "reason": p.reason,
        "idempotency_key": p.key,
    }


def _move(path: Path, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    n = 1
    while target.exists():
        target = folder / f"{path.stem}.{n}{path.suffix}"
        n += 1
    shutil.move(str(path), target)
    return target


def intake(
    outbox: Outbox,
    warehouse: Path,
    inbox: Path,
    now: dt.datetime,
    summary: WritebackSummary,
    *,
    dry_run: bool,
) -> None:
    """Inbox files and request rows into the outbox (or, dry, into the plan only)."""
    files = sorted(p for p in inbox.glob("*.csv") if p.is_file()) if inbox.is_dir() else []
    request_rows = rules.request_rows(outbox.request_records())
    if not files and not request_rows:
        return
    read = {f: rules.read_csv(f.read_bytes()) for f in files}
    every = request_rows + [r for rf in read.values() for r in rf.rows]
    ref = reference(warehouse, every)
    if ref is None:
        summary.warnings.append(
            f"{len(files)} inbox file(s) and {len(request_rows)} request row(s) wait for the first "
            "refresh: the write-back checks rows against the warehouse's accounts and categories"
        )
        return
    existing = (
        {(r["idempotency_key"], r["body_sha256"]) for r in outbox.rows()} if dry_run else set()
    )
    for f in files:
        rf = read[f]
        entry: dict[str, Any] = {"file": f.name, "rows": len(rf.rows)}
        if rf.problem is not None:
            entry.update(rows=0, rejected_file=rf.problem)
            summary.plan.append(
                {
                    "source": f.name,
                    "line": 0,
                    "operation": "",
                    "action": "rejected",
                    "request": "",
                    "body": None,
                    "reason": rf.problem,
                    "idempotency_key": None,
                }
            )
            if not dry_run:
                moved = _move(f, inbox / "rejected")
                errors_file = moved.with_name(moved.name + ".errors.csv")
                errors_file.write_text(f'line,reason,row\n0,"{rf.problem}",\n', "utf-8")
                entry.update(moved_to=str(moved), errors_file=str(errors_file))
            summary.files.append(entry)
            continue
        planned = rules.plan(
            rf.rows, ref, source="inbox", source_name=f.name, decimal_comma=rf.decimal_comma
        )
        _enqueue(outbox, planned, existing, now, summary, entry, dry_run=dry_run)
        if not dry_run:
            bad = [p for p in planned if p.reason]
            moved = _move(f, inbox / ("rejected" if bad else "done"))
            entry["moved_to"] = str(moved)
            if bad:
                errors_file = moved.with_name(moved.name + ".errors.csv")
                errors_file.write_text(rules.errors_csv(planned, rf.delimiter), "utf-8")
                entry["errors_file"] = str(errors_file)
        summary.files.append(entry)
    if request_rows:
        planned = rules.plan(request_rows, ref, source="requests", source_name=REQUESTS_NAME)
        entry = {"file": REQUESTS_NAME, "rows": len(request_rows)}
        _enqueue(outbox, planned, existing, now, summary, entry, dry_run=dry_run)
        summary.files.append(entry)


def _enqueue(
    outbox: Outbox,
    planned: list[rules.Planned],
    existing: set[tuple[str, str]],
    now: dt.datetime,
    summary: WritebackSummary,
    entry: dict[str, Any],
    *,
    dry_run: bool,
) -> None:
    if dry_run:
        outcomes = ["duplicate" if (p.key, p.body_sha256) in existing else "new" for p in planned]
    else:
        outcomes = outbox.enqueue([_record(p) for p in planned], now)
    counts = {"queued": 0, "duplicates": 0, "rejected": 0, "conflicts": 0}
    for p, outcome in zip(planned, outcomes, strict=True):
        if outcome == "duplicate":
            counts["duplicates"] += 1
            action = "duplicate"
        elif outcome == "conflict":
            counts["conflicts"] += 1
            action = "conflict"
        elif p.reason:
            counts["rejected"] += 1
            action = "rejected"
        else:
            counts["queued"] += 1
            action = "send"
        summary.plan.append(_plan_entry(p, action))
    entry.update(counts)
    summary.queued += counts["queued"]
    summary.duplicates += counts["duplicates"]
    summary.rejected += counts["rejected"]
    summary.conflicts += counts["conflicts"]


# ----------------------------------------------------------------------------------------- drain


def _unknown(row: dict[str, Any]) -> bool:
    sent, answered = row["last_sent_at"], row["last_response_at"]
    return sent is not None and (answered is None or answered < sent)


def lookup(client: ApiClient, row: dict[str, Any], claimed: set[str]) -> str | None:
    """The service's transaction this create made, if it exists (key expired, outcome unknown)."""
    frame, _ = client.transactions_page(
        1,
        limit=200,
        from_=row["booked_at"],
        to=row["booked_at"],
        account_id=str(row["account_id"]),
        search=row["concept"],
        raw=False,
    )
    for t in frame.iter_rows(named=True):
        tid = str(t["id"])
        if t["concept"] == row["concept"] and t["amount"] == row["amount"] and tid not in claimed:
            return tid
    return None


def drain(
    client: ApiClient, outbox: Outbox, options: WritebackOptions, summary: WritebackSummary
) -> None:
    """Send every pending row, in order, each outcome recorded before the next send."""
    pending = outbox.rows("state = 'pending'")
    if not pending:
        return
    me = client.me()
    if not me.can_write:
        message = (
            f"{len(pending)} write-back request(s) wait in the outbox, but this API key is "
            f"read-only (scopes: {', '.join(me.scopes) or 'none'}). Writing needs a key with the "
            "data.write scope: set CENTSYNC_API_KEY to a read and write key and run "
            "`centsync writeback`. Nothing was sent; every row stays pending."
        )
        raise WriteScopeMissing(message)
    claimed = {str(r["server_id"]) for r in outbox.rows("server_id IS NOT NULL")}
    for row in pending:
        now = options.now()
        body = orjson.loads(row["body"])
        if (
            row["operation"] == "create"
            and _unknown(row)
            and row["first_sent_at"] is not None
            and now - row["first_sent_at"] > KEY_TTL
        ):
            found = lookup(client, row, claimed)
            summary.requests += 1
            if found is not None:
                claimed.add(found)
                outbox.record(
                    row["id"],
                    now,
                    state="sent",
                    event="found_by_lookup",
                    server_id=found,
                    reason="its key had expired (24 h) with the outcome unknown; found on the "
                    "service, so not sent again",
                    found_by_lookup=True,
                )
                summary.found_by_lookup += 1
                continue
        outbox.mark_attempt(row["id"], now)
        try:
            summary.requests += 1
            t = client.write(
                row["method"], row["path"], body, idempotency_key=row["idempotency_key"]
            )
        except InsufficientScope as e:
            outbox.record(
                row["id"],
                options.now(),
                state="pending",
                event="refused",
                reason=f"{e.error_code}: needs a key with the data.write scope",
                status=e.status,
            )
            raise WriteScopeMissing(
                "the service refused to write with this key (insufficient_scope): set "
                "CENTSYNC_API_KEY to a read and write key (data.write scope) and run "
                "`centsync writeback`; every row stays pending."
            ) from None
        except (Unauthenticated, KeyExpired) as e:
            outbox.record(
                row["id"],
                options.now(),
                state="pending",
                event="refused",
                reason=f"{e.error_code}: the key was refused",
                status=e.status,
            )
            raise
        except IdempotencyKeyReused as e:
            outbox.record(
                row["id"],
                options.now(),
                state="needs_attention",
                event="key_reused",
                status=e.status,
                reason=(
                    f"idempotency_key_reused: the service holds an earlier request under this key "
                    f"with a different body (it does not return that body). This body: {row['body']}. "
                    f"{_earlier_bodies(outbox, row)}Give the row a new event_id to send it as a new "
                    "request, or leave it if the earlier one is right."
                ),
            )
            summary.needs_attention += 1
        except IdempotencyConflict as e:
            outbox.note_unknown(row["id"], options.now(), f"{e.error_code}: still being processed")
            summary.unknown += 1
        except (TransportFailure, RateLimited) as e:
            outbox.note_unknown(row["id"], options.now(), _short(e))
            summary.unknown += 1
            raise DrainStopped(str(e)) from e
        except ApiError as e:
            if e.status >= 500:
                outbox.note_unknown(row["id"], options.now(), _short(e))
                summary.unknown += 1
                raise DrainStopped(str(e)) from e
            outbox.record(
                row["id"],
                options.now(),
                state="rejected",
                event="rejected_by_service",
                status=e.status,
                response=_error_body(e),
                reason=f"{e.error_code}: {e.message}",
            )
            summary.rejected_by_service += 1
        else:
            outbox.record(
                row["id"],
                options.now(),
                state="sent",
                event="replayed" if t.replayed else "sent",
                status=201 if row["operation"] == "create" else 200,
                response=t.raw,
                server_id=t.id,
                replayed=t.replayed,
            )
            claimed.add(t.id)
            summary.sent += 1
            summary.replayed += int(t.replayed)


def _short(e: BaseException) -> str:
    return str(e).splitlines()[0][:300]


def _error_body(e: ApiError) -> str:
    return orjson.dumps({"error": {"code": e.error_code, "message": e.message}}).decode()


def _earlier_bodies(outbox: Outbox, row: dict[str, Any]) -> str:
    others = outbox.rows("idempotency_key = ? AND id <> ?", [row["idempotency_key"], row["id"]])
    if not others:
        return ""
    listed = "; ".join(f"#{r['id']} ({r['state']}): {r['body']}" for r in others)
    return f"Earlier bodies in the outbox under this key: {listed}. "


# ------------------------------------------------------------------------------------- the run


def run_writeback(
    client: ApiClient | None, warehouse: Path, options: WritebackOptions
) -> WritebackSummary:
    """Intake then drain (or, dry, the plan only: nothing is written, moved or sent)."""
    warehouse = Path(warehouse)
    outbox = Outbox(outbox_path(warehouse))
    inbox = options.inbox or inbox_path(warehouse)
    summary = WritebackSummary(outbox=str(outbox.path), inbox=str(inbox), dry_run=options.dry_run)
    if options.dry_run:
        intake(outbox, warehouse, inbox, options.now(), summary, dry_run=True)
        for row in outbox.rows("state = 'pending'"):
            summary.plan.append(
                {
                    "source": row["source_name"],
                    "line": row["source_line"],
                    "operation": row["operation"],
                    "action": "send",
                    "request": f"{row['method']} {row['path']}",
                    "body": orjson.loads(row["body"]),
                    "reason": row["reason"],
                    "idempotency_key": row["idempotency_key"],
                }
            )
        summary.counts = outbox.counts()
        return summary
    with outbox.draining():
        intake(outbox, warehouse, inbox, options.now(), summary, dry_run=False)
        if client is not None:
            try:
                drain(client, outbox, options, summary)
            except (WriteScopeMissing, DrainStopped) as e:
                summary.stopped = str(e)
                if options.strict:
                    summary.counts = outbox.counts()
                    raise
                summary.warnings.append(str(e))
    summary.counts = outbox.counts()
    return summary


__all__ = [
    "STATES",
    "DrainStopped",
    "WriteScopeMissing",
    "WritebackOptions",
    "WritebackSummary",
    "inbox_path",
    "run_writeback",
]
