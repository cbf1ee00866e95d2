"""What a finished Dagster run recorded, read one way for every reader: the results its assets
recorded (`results.RESULT_KEY`), its classified failure, and the alerts they call for.

The CLI reads the events of the run it has just run in process (`cli/runner.py`); the sensors
read the same events of a run from the instance (`defs/alerts.py`, `events`). Both go through
the functions here, so a failure is classified by the same `failures.classify` (from the
`dg.Failure` metadata a known failure carries) and alerted with the same text, whoever started
the run.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from centsync.pipelines import alerts as alerting
from centsync.pipelines import failures
from centsync.pipelines.results import RESULT_KEY

if TYPE_CHECKING:
    from dagster import DagsterEvent, DagsterInstance


def events(instance: DagsterInstance, run_id: str) -> list[DagsterEvent]:
    """The events of a stored run that the readers below use: materializations, failures."""
    from dagster import DagsterEventType

    wanted = {
        DagsterEventType.ASSET_MATERIALIZATION,
        DagsterEventType.STEP_FAILURE,
        DagsterEventType.RUN_FAILURE,
        DagsterEventType.RUN_CANCELED,
    }
    records = instance.get_records_for_run(run_id, of_type=wanted).records
    found = (record.event_log_entry.dagster_event for record in records)
    return [event for event in found if event is not None]


def results(events: Iterable[DagsterEvent]) -> list[tuple[str, dict[str, Any]]]:
    """(asset, result) for each materialization that recorded a result, in the run's order."""
    found = []
    for event in events:
        if not event.is_step_materialization:
            continue
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        entry = getattr(mat.metadata.get(RESULT_KEY), "value", None) if mat else None
        if isinstance(entry, dict):
            found.append((mat.asset_key.to_user_string(), entry))
    return found


def result(events: Iterable[DagsterEvent], asset: str) -> dict[str, Any] | None:
    """The result `asset` recorded last in the run, else None."""
    return next((r for name, r in reversed(results(events)) if name == asset), None)


def failure(events: Iterable[DagsterEvent], run_id: str) -> failures.Failure:
    """The classified error of a failed run: its failed step's (by the `dg.Failure` metadata a
    known failure carries), else the run's own failure."""
    events = list(events)
    for event in events:
        if event.is_step_failure:
            data = event.event_specific_data
            user = getattr(data, "user_failure_data", None)
            metadata = {
                k: getattr(v, "value", v) for k, v in (user.metadata if user else {}).items()
            }
            return failures.classify(getattr(data, "error", None), run_id, metadata)
    failed = next((e for e in events if e.is_failure), None)
    data = getattr(failed, "event_specific_data", None)
    return failures.classify(getattr(data, "error", None), run_id)


# a blocking asset check that failed (rejected rows, a mart that differs): the run's findings
# say what it found; the run itself did its work
CHECKS_FAILED = "DagsterAssetCheckFailedError"


def alerts(
    job: str,
    run_id: str,
    events: Iterable[DagsterEvent],
    *,
    failed: bool,
    warehouse: str | None = None,
) -> list[alerting.Alert]:
    """The alerts a finished run calls for: its failure (unless it was stopped on purpose, or
    only its blocking checks failed over findings it recorded: those findings are the alerts),
    then the findings of each result it recorded (`warehouse`: named in each)."""
    events = list(events)
    found: list[alerting.Alert] = []
    recorded = results(events)
    findings = [
        a for _, r in recorded for a in alerting.from_result(r, run_id, warehouse=warehouse)
    ]
    if failed:
        f = failure(events, run_id)
        if f.code in failures.STOPS:
            return []  # a stop asked for is not a problem to report
        if not (f.cls == CHECKS_FAILED and findings):
            found.append(alerting.failed(job, f))
    return found + findings
