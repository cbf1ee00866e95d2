"""Intake: the inbox's CSV files and the rows of ops.outbox_requests into the outbox.

Every row is checked against the published warehouse (transform.writeback) and written with its
exact body and key (or its reason) in one transaction per source; then the file moves to
`inbox/done/`, or to `inbox/rejected/` with a `.errors.csv` beside it. Dry, nothing is written
or moved: the plan alone is filled in.
"""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from centsync.pipelines.results import PlanEntry, WritebackResult
from centsync.pipelines.writeback import inbox_csv
from centsync.pipelines.writeback.summary import plan_entry
from centsync.transform import writeback as policy
from centsync.warehouse.outbox import Outbox
from centsync.warehouse.paths import reading
from centsync.warehouse.reads import settings_timezone, writeback_reference

REQUESTS_NAME = "ops.outbox_requests"


def reference(
    warehouse: Path,
    rows: list[policy.SourceRow],
    now: dt.datetime | None = None,
    *,
    allow_future: bool = False,
) -> policy.Reference | None:
    """What the published warehouse knows (None before the first refresh); with `now`, the
    service's today: that instant's date in the service's timezone (core.settings)."""
    if not Path(warehouse).exists():
        return None
    with reading(warehouse) as con:
        ref = writeback_reference(con, policy.referenced_transactions(rows))
        timezone = settings_timezone(con)
    if ref.accounts.height == 0:
        return None
    return policy.Reference.from_frames(
        ref.accounts,
        ref.categories,
        ref.expense_goal_ids,
        ref.transactions,
        ref.currency or "EUR",
        today=service_today(now, timezone) if now is not None else None,
        allow_future=allow_future,
    )


def service_today(now: dt.datetime, timezone: str | None) -> dt.date:
    """The calendar day `now` falls on in the service's timezone (UTC when unknown)."""
    try:
        zone: dt.tzinfo = ZoneInfo(timezone) if timezone else dt.UTC
    except (ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC
    return now.astimezone(zone).date()


def outbox_record(p: policy.Planned) -> dict[str, Any]:
    """A planned request as the outbox stores it (warehouse.outbox.PLAN_FIELDS)."""
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


def planned_entry(p: policy.Planned, action: str) -> PlanEntry:
    """The plan's line for a planned request."""
    return plan_entry(
        p.source_name,
        p.line,
        p.operation,
        action,
        method=p.method,
        path=p.path,
        body=p.body,
        reason=p.reason or p.warning,
        idempotency_key=p.key,
    )


def move(path: Path, folder: Path) -> Path:
    """Move a file into a folder, numbering its name when one of that name is there already."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    n = 1
    while target.exists():
        target = folder / f"{path.stem}.{n}{path.suffix}"
        n += 1
    shutil.move(str(path), target)
    return target


def _reject(path: Path, inbox: Path, errors: str) -> dict[str, str]:
    """Move a file to inbox/rejected/ and write its errors file beside it."""
    moved = move(path, inbox / "rejected")
    errors_file = moved.with_name(moved.name + ".errors.csv")
    errors_file.write_text(errors, "utf-8")
    return {"moved_to": str(moved), "errors_file": str(errors_file)}


def inbox_files(inbox: Path) -> list[Path]:
    """The CSV files waiting in the inbox, by name."""
    return sorted(p for p in inbox.glob("*.csv") if p.is_file()) if inbox.is_dir() else []


def intake(
    outbox: Outbox,
    warehouse: Path,
    inbox: Path,
    now: dt.datetime,
    summary: WritebackResult,
    *,
    dry_run: bool,
    allow_future: bool = False,
) -> None:
    """Inbox files and request rows into the outbox (or, dry, into the plan only)."""
    files = inbox_files(inbox)
    request_rows = policy.request_rows(outbox.request_records())
    if not files and not request_rows:
        return
    read = {f: inbox_csv.read_csv(f.read_bytes()) for f in files}
    every = request_rows + [r for rf in read.values() for r in rf.rows]
    ref = reference(warehouse, every, now, allow_future=allow_future)
    if ref is None:
        summary.warnings.append(
            f"{len(files)} inbox file(s) and {len(request_rows)} request row(s) wait for the first "
            "refresh: the write-back checks rows against the warehouse's accounts and categories"
        )
        return
    existing = outbox.keys_and_bodies() if dry_run else set()
    for f in files:
        entry = _take_file(outbox, f, read[f], ref, inbox, existing, now, summary, dry_run=dry_run)
        summary.files.append(entry)
    if request_rows:
        planned = policy.plan(request_rows, ref, source="requests", source_name=REQUESTS_NAME)
        entry = {"file": REQUESTS_NAME, "rows": len(request_rows)}
        _enqueue(outbox, planned, existing, now, summary, entry, dry_run=dry_run)
        summary.files.append(entry)


def _take_file(
    outbox: Outbox,
    f: Path,
    rf: inbox_csv.ReadFile,
    ref: policy.Reference,
    inbox: Path,
    existing: set[tuple[str, str]],
    now: dt.datetime,
    summary: WritebackResult,
    *,
    dry_run: bool,
) -> dict[str, Any]:
    """One inbox file into the outbox, then moved (unless dry); its entry in the summary."""
    entry: dict[str, Any] = {"file": f.name, "rows": len(rf.rows)}
    if not dry_run:
        _drop_stale_errors(f, inbox, entry)
    if rf.problem is not None:
        entry.update(rows=0, rejected_file=rf.problem)
        summary.plan.append(plan_entry(f.name, 0, "", "rejected", reason=rf.problem))
        if not dry_run:
            entry.update(_reject(f, inbox, inbox_csv.file_errors_csv(rf.problem)))
            entry["fate"] = fate(entry, 0, 0, dry_run=False)
        return entry
    planned = policy.plan(
        rf.rows, ref, source="inbox", source_name=f.name, decimal_comma=rf.decimal_comma
    )
    _enqueue(outbox, planned, existing, now, summary, entry, dry_run=dry_run)
    bad = sum(1 for p in planned if p.reason)
    if not dry_run:
        if bad == len(planned) and planned:
            entry.update(_reject(f, inbox, inbox_csv.errors_csv(planned, rf.delimiter)))
        else:
            entry["moved_to"] = str(move(f, inbox / "done"))
            if bad:
                entry.update(_split(f.name, inbox, rf, planned))
    entry["fate"] = fate(entry, len(planned), bad, dry_run=dry_run)
    return entry


def _drop_stale_errors(f: Path, inbox: Path, entry: dict[str, Any]) -> None:
    """A file dropped again after its rejection (fixed in `rejected/`, then moved or copied
    back): the errors file of the earlier drop no longer describes it, so it goes (and the
    rejected copy too when it is the very file dropped); this drop writes its own if need be."""
    folder = inbox / "rejected"
    errors_file = folder / f"{f.name}.errors.csv"
    if not errors_file.exists():
        return
    kept = folder / f.name
    if kept.exists() and kept.read_bytes() != f.read_bytes():
        return  # another file of that name, still rejected: its errors stay
    errors_file.unlink()
    kept.unlink(missing_ok=True)
    entry["stale_errors_removed"] = str(errors_file)


def _split(
    name: str, inbox: Path, rf: inbox_csv.ReadFile, planned: list[policy.Planned]
) -> dict[str, str]:
    """A file's rejected rows, split out: `rejected/<name>` (its header and those rows, as
    written, to fix and drop again) and `<name>.errors.csv` beside it (line, reason, row)."""
    folder = inbox / "rejected"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    n = 1
    while target.exists():
        target = folder / f"{Path(name).stem}.{n}{Path(name).suffix}"
        n += 1
    target.write_text(inbox_csv.rejected_rows_csv(rf.header, planned), "utf-8")
    errors_file = target.with_name(target.name + ".errors.csv")
    errors_file.write_text(inbox_csv.errors_csv(planned, rf.delimiter), "utf-8")
    return {"rejected_rows_file": str(target), "errors_file": str(errors_file)}


def fate(entry: dict[str, Any], rows: int, bad: int, *, dry_run: bool) -> str:
    """What became of a file, in one sentence (the summary prints it)."""
    good = rows - bad
    if dry_run:
        return f"{good} row(s) good, {bad} rejected (dry run: nothing written or moved)"
    if "rejected_file" in entry:
        return f"rejected whole, nothing posted: moved to {entry['moved_to']}"
    if bad == rows and rows:
        return (
            f"every row rejected, nothing posted: moved to {entry['moved_to']}, "
            f"reasons in {entry['errors_file']}"
        )
    if bad:
        return (
            f"{good} good row(s) queued, file moved to {entry['moved_to']}; {bad} row(s) "
            f"rejected, split out to {entry['rejected_rows_file']} "
            f"(reasons in {entry['errors_file']}): fix them there and drop that file again"
        )
    return f"{good} row(s) queued, moved to {entry['moved_to']}"


def _enqueue(
    outbox: Outbox,
    planned: list[policy.Planned],
    existing: set[tuple[str, str]],
    now: dt.datetime,
    summary: WritebackResult,
    entry: dict[str, Any],
    *,
    dry_run: bool,
) -> None:
    """Write planned requests to the outbox (dry: compare with it) and count each outcome."""
    if dry_run:
        outcomes = ["duplicate" if (p.key, p.body_sha256) in existing else "new" for p in planned]
    else:
        outcomes = outbox.enqueue([outbox_record(p) for p in planned], now)
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
            # sent all the same (the service decides), but said before it is: `warn`
            action = "warn" if p.warning else "send"
        summary.plan.append(planned_entry(p, action))
    entry.update(counts)
    summary.queued += counts["queued"]
    summary.duplicates += counts["duplicates"]
    summary.rejected += counts["rejected"]
    summary.conflicts += counts["conflicts"]
