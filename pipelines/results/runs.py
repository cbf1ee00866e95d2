"""What a run of the data returns: reconcile, write-back (rules, bank files), refresh, changes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field
from typing_extensions import TypedDict  # pydantic wants its TypedDict before Python 3.12

from centsync.pipelines.results.base import Count, Open, Result
from centsync.transform.contract import AskedMode, RefreshMode, Verdict

# ------------------------------------------------------------------------------- reconcile


class Difference(Open):
    """One comparison that does not agree (its other columns, such as its dates, kept too)."""

    check: str
    scope: str | None
    status: Verdict
    local_cents: int | None
    server_cents: int | None
    difference_cents: int | None
    explanation: str | None = None  # why an explained difference is one


class RowDifference(Open):
    """One row behind a difference: missing, extra or changed, with the fields that differ."""

    entity: str  # transactions or accounts
    id: str | None
    kind: Literal["only_local", "only_server", "different"]
    month: str | None
    fields: str | None  # the differing fields, comma-separated
    local: str | None  # the local row as JSON (null when only on the server)
    server: str | None  # the reference row as JSON (null when only local)
    source: str | None  # received (what the service sent) or server (read now)


class UnavailableCheck(Result):
    """A check whose service side could not be read (`ops.contract` says why)."""

    check: str
    explanation: str | None


class ReconcileResult(Result):
    """One reconciliation (`centsync reconcile`): its verdict, its counts, its differences."""

    verdict: Verdict
    refresh_id: str | None
    recon_id: str
    source: Literal["refresh", "offline", "live"]
    checked: Count
    # the numbers compared with the service's own (checked less the unavailable ones)
    proved: Count
    agree: Count
    explained: Count
    differ: Count
    # checks whose service side could not be read: listed with why, never counted as agreeing
    unavailable: Count = 0
    unavailable_checks: list[UnavailableCheck] = Field(default_factory=list)
    # the comparisons that do not agree, unexplained first, narrowest scope first
    differences: list[Difference]
    # the rows behind them, by month then id
    row_differences: list[RowDifference]


# ------------------------------------------------------------------------------- write-back


class PlanEntry(TypedDict):
    """One line of a write-back's plan: a request and what happens to it (`plan_entry`)."""

    source: str
    line: int
    operation: str
    action: str  # send, warn, duplicate, rejected, conflict (a plan entry stays a mutable dict)
    request: str
    body: dict[str, Any] | None
    reason: str | None
    idempotency_key: str | None


class WritebackResult(Result):
    """What one write-back did, per file and per request (`centsync writeback`, and the first
    step of every refresh); the write-back fills it as it runs."""

    files: list[dict[str, Any]] = Field(default_factory=list)
    plan: list[PlanEntry] = Field(default_factory=list)
    queued: Count = 0
    duplicates: Count = 0
    rejected: Count = 0
    conflicts: Count = 0
    sent: Count = 0
    replayed: Count = 0
    found_by_lookup: Count = 0
    rejected_by_service: Count = 0
    needs_attention: Count = 0
    unknown: Count = 0
    confirmed: Count = 0
    requests: Count = 0
    stopped: str | None = None
    warnings: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)
    outbox: str = ""
    inbox: str = ""
    dry_run: bool = False
    refused: list[dict[str, Any]] = Field(default_factory=list)  # by the service, with reasons

    @property
    def bad(self) -> int:
        """Rows rejected (by the checks or the service) or needing attention: exit 7."""
        return self.rejected + self.rejected_by_service + self.needs_attention + self.conflicts


class RulesResult(Result):
    """What one `centsync rules` planned (and, unless dry, queued)."""

    rules_file: str
    rules: Count
    transactions: Count
    changes: list[dict[str, Any]] = Field(default_factory=list)
    plan: list[PlanEntry] = Field(default_factory=list)
    queued: Count = 0
    duplicates: Count = 0
    rejected: Count = 0
    dry_run: bool = False
    outbox: str = ""
    # the [merchants] display names the file sets (kept beside the warehouse unless dry)
    merchant_renames: Count = 0


BankFormat = Literal["ofx", "camt053"]  # a bank statement's format (`centsync import`)


class ImportFileResult(Result):
    """What one `centsync import` did with one bank file."""

    file: str
    format: BankFormat
    rows: Count
    new: list[dict[str, Any]] = Field(default_factory=list)
    already_imported: list[dict[str, Any]] = Field(default_factory=list)
    held: list[dict[str, Any]] = Field(default_factory=list)  # each with its "candidate"
    pending: list[dict[str, Any]] = Field(default_factory=list)  # not booked yet: held
    superseded: list[dict[str, Any]] = Field(default_factory=list)  # pending, "by" its booking
    inbox_file: str | None = None
    held_file: str | None = None
    pending_file: str | None = None
    dry_run: bool = False


class ImportResult(Result):
    """`centsync import`: each file's result, and the inbox they went into."""

    files: list[ImportFileResult]
    inbox: str
    dry_run: bool


# ---------------------------------------------------------------------------------- refresh


class RefreshSource(Result):
    base_url: str
    owner: str


class Rows(Result):
    total: Count  # transactions in the warehouse after the refresh
    changed: Count  # rows of every entity added, altered or removed (accounts, settings too)
    rejected: Count
    landed: Count
    # the transactions alone: new to the warehouse, altered, gone from the service
    new: Count = 0
    updated: Count = 0
    removed: Count = 0


class Requests(Result):
    total: Count
    floor: Count
    retries: Count
    by_endpoint: dict[str, int]


class MonthsReread(Result):
    """One window of months read again: its range, size and why."""

    from_: str = Field(alias="from")
    to: str
    months: Count
    rows: Count
    changed: Count
    reason: str


class Verification(Result):
    months: Count  # months re-read because they were verified longest ago
    oldest_verified: str | None  # the oldest verification left (the service's clock)


class Durations(Result):
    # the one a person reads (the summary's and `status`'s): the refresh as ops.refreshes
    # records it, from its start to its data, marts and reconciliation being ready to publish
    # (neither the command's start-up nor Dagster's)
    seconds: float = Field(default=0.0, ge=0)
    # its parts: reading and loading; the marts and reconciliation
    refresh_seconds: float = Field(ge=0)
    reconcile_seconds: float = Field(ge=0)
    # the whole command's, including the Dagster run (None: recorded by the run, not the CLI)
    total_seconds: float | None = None


class RefreshReconciliation(Result):
    recon_id: str | None
    checked: Count
    explained: Count
    differ: Count
    unavailable: Count = 0  # checks whose service side could not be read (not agreeing)
    differences: list[Difference]


class RefreshContract(Result):
    """The "not shown" answers this refresh could not use (surface: why, and what doing
    without cost), and the shapes that changed or were re-learned (`ops.contract` has all)."""

    unavailable: dict[str, Any] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class RefreshOutbox(Result):
    confirmed: Count  # outbox rows this refresh saw on the service
    states: dict[str, int] | None  # the outbox per state after it


class RefreshResult(Result):
    """One refresh (`centsync refresh`): what it was asked, what it did and spent, its verdict."""

    status: Literal["ok", "rejected", "differ"]
    asked: AskedMode  # what the refresh was asked to do (`--full`, `--hot`, `--months`, auto)
    mode: RefreshMode  # what it did
    reason: str  # why that mode
    refresh_id: str
    source: RefreshSource
    rows: Rows
    requests: Requests
    months_checked: Count
    months_reread: list[MonthsReread]
    verification: Verification
    rereads: Count
    durations: Durations
    verdict: Verdict | None
    reconciliation: RefreshReconciliation
    outbox: RefreshOutbox
    contract: RefreshContract
    warnings: list[str]
    key_expires_at: str | None
    backup: str | None  # where --rebind kept the old warehouse
    report_path: str | None = None  # the HTML report: `--report` wrote it, or one was there
    writeback: WritebackResult | None = None  # its write-back step (the CLI adds it)
    # an owner of the owners file: its publish into the shared lake (`--owner`, not `--no-lake`)
    lake: dict[str, Any] | None = None

    @property
    def rejected(self) -> int:
        return self.rows.rejected


class Change(Open):
    """A change (`centsync changes`); also id, refresh_no, seen_on, before, after, origin."""

    month: str  # YYYY-MM of the month's category total it changes (the version's month)
    category: str
    kind: Literal["added", "changed", "deleted", "came back"]
    effect_cents: int  # on that total, integer cents (a moved row: once in each month)
    explanation: str  # e.g. 'MERCADONA amount -45.10 -> -57.50 on 2026-11-03 (by the service)'


class ChangesResult(Result):
    """What the service changed after refresh `since_refresh`, by month and category."""

    since_refresh: Count
    to_refresh: Count
    changes: list[Change]
