"""What a write-back is asked to do (its options) and the lines of its plan (what it did is
`pipelines.results.WritebackResult`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from centsync.pipelines.results import PlanEntry, WritebackResult


def utcnow() -> dt.datetime:
    """The current time, in UTC (the default clock of a write-back)."""
    return dt.datetime.now(dt.UTC)


@dataclass
class WritebackOptions:
    """How a write-back runs: dry or not, strict or not, its clock and its inbox folder."""

    dry_run: bool = False
    strict: bool = True  # the write-back job: a read-only key fails; in a refresh it is a warning
    now: Callable[[], dt.datetime] = utcnow
    # The inbox folder (Settings.inbox, resolved at the edge); None: `inbox/` beside the warehouse.
    inbox: Path | None = None
    # A booked_at after the service's today is refused unless this is set (`--allow-future`).
    allow_future: bool = False


def plan_entry(
    source: str,
    line: int,
    operation: str,
    action: str,
    *,
    method: str = "",
    path: str = "",
    body: Mapping[str, Any] | None = None,
    reason: str | None = None,
    idempotency_key: str | None = None,
) -> PlanEntry:
    """One line of the plan: a request and what happens to it (or a file rejected whole)."""
    return {
        "source": source,
        "line": line,
        "operation": operation,
        "action": action,  # send, warn (sent, likely refused: reason says why), duplicate, rejected, conflict
        "request": f"{method} {path}".strip(),
        "body": dict(body) if body else None,
        "reason": reason,
        "idempotency_key": idempotency_key,
    }


def line(result: WritebackResult) -> str:
    """What a write-back did, in one line (for a log)."""
    if result.dry_run:
        would = sum(1 for p in result.plan if p["action"] in ("send", "warn"))
        return f"write-back (dry run): {would} would be sent, {result.rejected} rejected"
    parts = [f"{result.sent} sent"]
    if result.replayed:
        parts.append(f"{result.replayed} replayed")
    if result.found_by_lookup:
        parts.append(f"{result.found_by_lookup} found on the service")
    parts.append(f"{result.rejected + result.rejected_by_service} rejected")
    if result.needs_attention or result.conflicts:
        parts.append(f"{result.needs_attention + result.conflicts} need attention")
    if result.confirmed:
        parts.append(f"{result.confirmed} confirmed")
    pending = result.counts.get("pending", 0)
    if pending:
        parts.append(f"{pending} pending")
    return "write-back: " + ", ".join(parts)
