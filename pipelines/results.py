"""What each command returns: one typed class per result, its JSON and its JSON Schema
generated from it (never written by hand).

Every result is a `Result`, a pydantic model (pydantic comes with Dagster, whose own config is
pydantic: docs/architecture.md says why it was chosen). One verb serialises: `to_json()`; one
rebuilds: `from_json()`; `json_schema()` is generated from the fields. A run's asset records its
result as one JSON metadata entry, `RESULT_KEY`; the CLI finds it in the run's events, rebuilds
the object and renders it by its attributes. What the CLI adds to every `--json` object (the
run id, the warehouse, the exit code, the seconds) is one `Envelope`, added in one place
(`cli/group.py`, `finish`); `command_json(cls)` is the result with its envelope, whose schema is
what `docs/schemas/<command>.json` holds.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, create_model
from typing_extensions import TypedDict  # pydantic wants its TypedDict before Python 3.12

from centsync.transform.contract import AskedMode, RefreshMode, Verdict

# the one metadata entry a result travels in
RESULT_KEY = "centsync/result"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
Count = Annotated[int, Field(ge=0)]  # a count (or an exit code), never negative
Seconds = Annotated[float, Field(ge=0)]


class Result(BaseModel):
    """The base of every result: `to_json`, `from_json`, `json_schema`.

    Not frozen: a write-back, a rules run or an owner's refresh fills its result as it goes.
    A recorded object may carry keys it does not declare (the envelope's): they are ignored.
    """

    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        # each model is built on its first use, not on import: a command pays for its own
        defer_build=True,
        # a field with a default is always written, so the schema requires it too
        json_schema_serialization_defaults_required=True,
    )

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values (what `--json` prints, what a run records)."""
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        """The result back from what `to_json` made (keys it does not declare are ignored)."""
        return cls.model_validate(data)

    @classmethod
    def json_schema(cls) -> dict[str, Any]:
        """The JSON Schema (draft 2020-12) of `to_json`'s object, generated from the fields."""
        return {"$schema": DIALECT, **cls.model_json_schema(mode="serialization", by_alias=True)}


class Open(Result):
    """A nested object whose declared fields are checked, and whose other keys are kept."""

    model_config = ConfigDict(extra="allow")


class Envelope(Result):
    """What the CLI adds to every command's `--json` object, in one place (`group.finish`)."""

    run_id: str | None = None  # the Dagster run, when the command ran one
    warehouse: str | None = None  # None: settings that could not be read (`doctor`)
    exit_code: Count = 0
    seconds: Seconds = 0.0  # since the command started


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
    action: str  # send, duplicate, rejected, conflict (a plan entry stays a mutable dict)
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


BankFormat = Literal["ofx", "camt053"]  # a bank statement's format (`centsync import`)


class ImportFileResult(Result):
    """What one `centsync import` did with one bank file."""

    file: str
    format: BankFormat
    rows: Count
    new: list[dict[str, Any]] = Field(default_factory=list)
    already_imported: list[dict[str, Any]] = Field(default_factory=list)
    held: list[dict[str, Any]] = Field(default_factory=list)
    inbox_file: str | None = None
    held_file: str | None = None
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
    total: Count
    changed: Count
    rejected: Count
    landed: Count


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
    rows_changed: int | None = None
    rows_rejected: int | None = None
    months_checked: int | None = None
    error: str | None = None


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


class Schedule(Result):
    name: Literal["hourly_hot_window", "nightly_fingerprints", "weekly_full"]
    on: bool
    cron: str
    description: str | None


class ScheduleResult(Result):
    """`centsync schedule list`: each schedule, on or off, and whether the daemon runs."""

    dagster_home: str
    schedules: list[Schedule]
    daemon_running: bool


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


# -------------------------------------------------------------------------- the schemas


@functools.cache
def command_json(cls: type[Result]) -> type[Result]:
    """`cls` with the CLI's envelope: the type of a command's `--json` object."""
    return create_model(cls.__name__ + "Json", __base__=(cls, Envelope))


# each command's --json type (a failure's, whatever the command, is `FailureResult`)
COMMANDS: dict[str, type[Result]] = {
    "refresh": RefreshResult,
    "reconcile": ReconcileResult,
    "writeback": WritebackResult,
    "rules": RulesResult,
    "import": ImportResult,
    "doctor": DoctorResult,
    "status": StatusResult,
    "schedule": ScheduleResult,
    "refresh-all": FleetResult,
    "refresh-plan": PlanResult,
    "lake": LakeResult,
}
TITLES = {
    "schedule": "centsync schedule list --json",
    "failure": "a failing command's --json",
    "refresh-all": "centsync refresh --all --json",
    "refresh-plan": "centsync refresh --plan --json",
}


def json_schemas() -> dict[str, dict[str, Any]]:
    """The `--json` schema of each command that has one, and of a failure's object."""
    types: dict[str, type[Result]] = {name: command_json(cls) for name, cls in COMMANDS.items()}
    types["failure"] = FailureResult
    out = {}
    for name, cls in types.items():
        schema = cls.json_schema()
        schema["title"] = TITLES.get(name, f"centsync {name} --json")
        out[name] = schema
    return out


def schema_files() -> dict[str, str]:
    """`docs/schemas/<command>.json`: each command's `--json` schema as committed (generated)."""
    return {
        command: json.dumps(schema, indent=2, sort_keys=True) + "\n"
        for command, schema in json_schemas().items()
    }
