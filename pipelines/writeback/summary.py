"""What a write-back is asked to do (its options) and what it did (its summary, the plan)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


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


@dataclass
class WritebackSummary:
    """What one write-back did, per file and per request (its report is the command's JSON)."""

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
        """The summary as plain values (JSON-ready)."""
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
) -> dict[str, Any]:
    """One line of the plan: a request and what happens to it (or a file rejected whole)."""
    return {
        "source": source,
        "line": line,
        "operation": operation,
        "action": action,  # send, duplicate, rejected, conflict
        "request": f"{method} {path}".strip(),
        "body": dict(body) if body else None,
        "reason": reason,
        "idempotency_key": idempotency_key,
    }
