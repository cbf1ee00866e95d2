"""What each command returns: one typed class per result (the package: `base` the base class,
`runs` and `standing` the results, `schemas` the `--json` types and their schemas), its JSON and its JSON Schema
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

from centsync.pipelines.results.base import (
    DIALECT as DIALECT,
)
from centsync.pipelines.results.base import (
    RESULT_KEY as RESULT_KEY,
)
from centsync.pipelines.results.base import (
    Count as Count,
)
from centsync.pipelines.results.base import (
    Envelope as Envelope,
)
from centsync.pipelines.results.base import (
    Open as Open,
)
from centsync.pipelines.results.base import (
    Result as Result,
)
from centsync.pipelines.results.base import (
    Seconds as Seconds,
)
from centsync.pipelines.results.runs import (
    BankFormat as BankFormat,
)
from centsync.pipelines.results.runs import (
    Change as Change,
)
from centsync.pipelines.results.runs import (
    ChangesResult as ChangesResult,
)
from centsync.pipelines.results.runs import (
    Difference as Difference,
)
from centsync.pipelines.results.runs import (
    Durations as Durations,
)
from centsync.pipelines.results.runs import (
    ImportFileResult as ImportFileResult,
)
from centsync.pipelines.results.runs import (
    ImportResult as ImportResult,
)
from centsync.pipelines.results.runs import (
    MonthsReread as MonthsReread,
)
from centsync.pipelines.results.runs import (
    PlanEntry as PlanEntry,
)
from centsync.pipelines.results.runs import (
    ReconcileResult as ReconcileResult,
)
from centsync.pipelines.results.runs import (
    RefreshContract as RefreshContract,
)
from centsync.pipelines.results.runs import (
    RefreshOutbox as RefreshOutbox,
)
from centsync.pipelines.results.runs import (
    RefreshReconciliation as RefreshReconciliation,
)
from centsync.pipelines.results.runs import (
    RefreshResult as RefreshResult,
)
from centsync.pipelines.results.runs import (
    RefreshSource as RefreshSource,
)
from centsync.pipelines.results.runs import (
    Requests as Requests,
)
from centsync.pipelines.results.runs import (
    RowDifference as RowDifference,
)
from centsync.pipelines.results.runs import (
    Rows as Rows,
)
from centsync.pipelines.results.runs import (
    RulesResult as RulesResult,
)
from centsync.pipelines.results.runs import (
    UnavailableCheck as UnavailableCheck,
)
from centsync.pipelines.results.runs import (
    Verification as Verification,
)
from centsync.pipelines.results.runs import (
    WritebackResult as WritebackResult,
)
from centsync.pipelines.results.schemas import (
    COMMANDS as COMMANDS,
)
from centsync.pipelines.results.schemas import (
    TITLES as TITLES,
)
from centsync.pipelines.results.schemas import (
    command_json as command_json,
)
from centsync.pipelines.results.schemas import (
    json_schemas as json_schemas,
)
from centsync.pipelines.results.schemas import (
    schema_files as schema_files,
)
from centsync.pipelines.results.standing import (
    Check as Check,
)
from centsync.pipelines.results.standing import (
    ContractSection as ContractSection,
)
from centsync.pipelines.results.standing import (
    DoctorResult as DoctorResult,
)
from centsync.pipelines.results.standing import (
    Error as Error,
)
from centsync.pipelines.results.standing import (
    FailureResult as FailureResult,
)
from centsync.pipelines.results.standing import (
    FleetResult as FleetResult,
)
from centsync.pipelines.results.standing import (
    LakeResult as LakeResult,
)
from centsync.pipelines.results.standing import (
    LakeTable as LakeTable,
)
from centsync.pipelines.results.standing import (
    LastRefresh as LastRefresh,
)
from centsync.pipelines.results.standing import (
    LastSuccess as LastSuccess,
)
from centsync.pipelines.results.standing import (
    OwnerResult as OwnerResult,
)
from centsync.pipelines.results.standing import (
    PlanResult as PlanResult,
)
from centsync.pipelines.results.standing import (
    RejectedList as RejectedList,
)
from centsync.pipelines.results.standing import (
    RejectedRow as RejectedRow,
)
from centsync.pipelines.results.standing import (
    Schedule as Schedule,
)
from centsync.pipelines.results.standing import (
    ScheduleResult as ScheduleResult,
)
from centsync.pipelines.results.standing import (
    Setting as Setting,
)
from centsync.pipelines.results.standing import (
    StatusOutbox as StatusOutbox,
)
from centsync.pipelines.results.standing import (
    StatusReconciliation as StatusReconciliation,
)
from centsync.pipelines.results.standing import (
    StatusResult as StatusResult,
)
from centsync.pipelines.results.standing import (
    StatusSource as StatusSource,
)
from centsync.pipelines.results.standing import (
    StatusVerification as StatusVerification,
)
from centsync.pipelines.results.standing import (
    Surface as Surface,
)
from centsync.pipelines.results.standing import (
    SyncedRange as SyncedRange,
)
