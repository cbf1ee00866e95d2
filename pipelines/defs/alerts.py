"""Alerts for the runs Dagster starts itself (a schedule, the sensor), under the daemon.

Two run-status sensors: a failed run, and a run that succeeded but recorded a DIFFER verdict,
rejected rows or a key about to expire (pipelines/alerts.py builds and sends them). A run the
CLI started carries the `centsync/command` tag and is skipped: the CLI sent its alerts itself.
They are on by default and do nothing without `CENTSYNC_ALERT_URL`.
"""

import dagster as dg

from centsync.pipelines import alerts
from centsync.pipelines.results import RESULT_KEY
from centsync.pipelines.settings import Settings


def _recorded(context: dg.RunStatusSensorContext) -> list[dict]:
    """The results (`centsync/result` entries) the run recorded."""
    found = []
    records = context.instance.get_records_for_run(
        context.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    for record in records:
        mat = record.event_log_entry.asset_materialization
        entry = getattr(mat.metadata.get(RESULT_KEY), "value", None) if mat else None
        if isinstance(entry, dict):
            found.append(entry)
    return found


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    name="alert_on_findings",
    description="Alert (CENTSYNC_ALERT_URL) on a DIFFER verdict, rejected rows or a key expiring within 30 days.",
    default_status=dg.DefaultSensorStatus.RUNNING,
    monitor_all_code_locations=False,
)
def alert_on_findings(
    context: dg.RunStatusSensorContext, settings: dg.ResourceParam[Settings]
) -> None:
    run = context.dagster_run
    if not settings.alert_url or alerts.CLI_TAG in run.tags:
        return
    found = [a for r in _recorded(context) for a in alerts.from_result(r, run.run_id)]
    alerts.send(settings.alert_url, found, secrets=(settings.api_key,))


@dg.run_failure_sensor(
    name="alert_on_failure",
    description="Alert (CENTSYNC_ALERT_URL) when a scheduled or sensor-started run fails.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def alert_on_failure(
    context: dg.RunFailureSensorContext, settings: dg.ResourceParam[Settings]
) -> None:
    run = context.dagster_run
    if not settings.alert_url or alerts.CLI_TAG in run.tags:
        return
    message = context.failure_event.message or "the run failed"
    alert = alerts.failed(run.job_name, run.run_id, message)
    alerts.send(settings.alert_url, [alert], secrets=(settings.api_key,))
