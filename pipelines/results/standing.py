"""What the commands about the set-up return: many owners, doctor, status, schedules, a failure."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from centsync.pipelines.results.base import Count, Open, Result
from centsync.transform.contract import RefreshMode, Verdict

# ----------------------------------------------------------------------------------- owners


class OwnerResult(Result):
    """One owner's refresh among many: its verdict and spend, or the error that stopped it."""

    owner: str
    exit_code: Count = 0
    warehouse: str = ""  # the owner's own warehouse file
    verdict: Verdict | None = None
    mode: RefreshMode | None = None
    rows: Count = 0
    requests: Count = 0
    seconds: float = 0.0
    publish_seconds: float = 0.0
    error: str = ""
    lake: dict[str, Any] = Field(default_factory=dict)  # what its lake publish did
    # what the refresh read for the lake (a warehouse.lake.Collected), published with its
    # shard's; never in the JSON
    collected: Any = Field(default=None, exclude=True, repr=False)


class FleetResult(Result):
    """Many owners refreshed (`refresh --all`, a shard run): each owner's result (by owner,
    as `refresh --all` has always printed them), the worst exit code."""

    owners: dict[str, OwnerResult]
    agree: Count = 0
    failed: Count = 0
    seconds: float = 0.0
    exit_code: Count = 0


class LakeTable(Result):
    """What `centsync lake` did to one lake table (`warehouse.lake.Maintained`)."""

    table: str
    files_before: Count
    files_after: Count
    removed: Count
    seconds: float


class LakeResult(Result):
    """`centsync lake`: the shared lake maintained, table by table."""

    lake: str
    tables: list[LakeTable]


class PlanResult(Result):
    """`centsync refresh --plan`: what a refresh would read and prove (`refresh.preview.preview`;
    its plan is the planner's own record, shaped by `refresh/plan.py`)."""

    plan: dict[str, Any]


# --------------------------------------------------------------------------- doctor, status


class Check(Result):
    """One thing `doctor` checked: `ok`, `warn` (works, but read this), `fail` (its exit code)."""

    name: str
    status: Literal["ok", "warn", "fail"]
    value: str
    detail: str = ""
    exit_code: Count = 0


class Setting(Result):
    env: str
    value: str


class Surface(Result):
    """One API surface as the service's contract holds it (`ops.contract`)."""

    surface: str  # "GET /v1/transactions/summary"
    state: Literal["documented", "learned", "pinned", "unavailable", "not learned yet"]
    detail: str  # the evidence, or why it is unavailable


class ContractSection(Result):
    """The doctor's contract section: each surface documented, learned, pinned or unavailable."""

    learned: bool
    note: str
    surfaces: list[Surface]


class DoctorResult(Result):
    """`centsync doctor`: every check, every setting resolved, all well or the first problem,
    and the service's contract."""

    status: Literal["ok", "problem"]
    checks: list[Check] = Field(min_length=1)
    settings: list[Setting]
    contract: ContractSection


class StatusSource(Open):
    base_url: str
    account_id: str | None = None
    currency: str | None = None
    timezone: str | None = None
    bound_at: str | None = None


class LastRefresh(Open):
    """A refresh as `ops.refreshes` recorded it (one that stopped early recorded no counts)."""

    refresh_id: str | None = None
    status: str  # running, succeeded, failed, interrupted
    mode: str | None = None
    started_at: str | None = None  # ISO 8601, to the second
    finished_at: str | None = None
    seconds: float | None = None
    requests_total: int | None = None
    rows_changed: int | None = None  # rows of every entity (accounts, settings too)
    rows_rejected: int | None = None
    months_checked: int | None = None
    error: str | None = None
    # the transactions alone (None: recorded before they were counted, or stopped early)
    transactions_new: int | None = None
    transactions_updated: int | None = None
    transactions_removed: int | None = None


class LastSuccess(Open):
    refresh_id: str | None = None
    finished_at: str | None = None


class SyncedRange(Open):
    transactions: Count
    first: dt.date | None  # the first and last booked day
    last: dt.date | None
    months: Count


class StatusVerification(Open):
    oldest_month: str | None = None  # YYYY-MM, verified longest ago
    oldest_verified_at: str | None = None  # the service's clock
    newest_verified_at: str | None = None
    months: int | None = None


class StatusReconciliation(Open):
    recon_id: str
    refresh_id: str | None = None
    ran_at: str | None = None
    source: str | None = None
    verdict: Verdict
    checked: Count = 0
    explained: Count = 0
    differ: Count = 0


class StatusOutbox(Open):
    path: str  # the outbox file
    states: dict[str, int]  # its rows per state (the truth, newer than the warehouse's copy)
    inbox: str
    inbox_files: Count = 0  # CSV files waiting in the inbox


class RejectedRow(Result):
    """One row set aside (`status`, `writeback --rejected`); `source`: entity and id, or line."""

    origin: Literal["refresh", "writeback"]
    state: str  # rejected, needs_attention
    source: str
    reason: str
    at: str
    whose: str
    row: str


class RejectedList(Result):
    rows: list[RejectedRow]  # `centsync writeback --rejected`


class StatusResult(Result):
    """`centsync status`: what the warehouse holds (`outputs.status.read_status`)."""

    warehouse: str
    size_mb: float = Field(ge=0)
    source: StatusSource | None  # None: not bound yet
    last_refresh: LastRefresh | None
    last_success: LastSuccess | None
    synced_range: SyncedRange | None
    verification: StatusVerification | None
    tables: dict[str, int]
    reconciliation: StatusReconciliation | None
    outbox: StatusOutbox | None
    key_expires_at: str | None = None
    warnings: list[str]
    rejected: list[RejectedRow] = Field(default_factory=list)  # `outputs.status.rejected`


class Schedule(Result):
    name: Literal["hourly_hot_window", "nightly_fingerprints", "weekly_full"]
    on: bool
    cron: str  # read in the result's `timezone`
    description: str | None  # the cron line in words, the time zone, what the run does
    setting: str = ""  # the variable that sets its cron line (CENTSYNC_..._CRON)
    next_run: str | None = None  # ISO 8601 with the offset of `timezone` (whether on or not)


class ScheduleResult(Result):
    """`centsync schedule list`: each schedule, on or off, when it runs next (in the
    service's time zone), and whether the daemon runs."""

    dagster_home: str
    schedules: list[Schedule]
    daemon_running: bool
    timezone: str = "UTC"  # the time zone the cron lines run in
    # where it comes from: the service's settings (the last refresh), or UTC before any
    timezone_from: Literal["service", "default"] = "default"


class Error(Result):
    class_: str = Field(alias="class")  # the exception's class
    message: str
    what_to_do: str


class FailureResult(Result):
    """What a failing command prints with `--json` (`pipelines/failures.py`, `Failure`)."""

    status: Literal["failed", "interrupted"]
    exit_code: int = Field(ge=2)  # never 0, never 1 (docs/cli.md, exit codes)
    error: Error
    run_id: str | None
    log: str | None
