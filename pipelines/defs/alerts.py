"""Alerts for the runs Dagster starts itself (a schedule, the sensor), under the daemon.

Two run-status sensors: a failed run, and a run that succeeded but recorded a DIFFER verdict,
rejected rows or a key about to expire. Both read the run as the CLI reads its own
(`recorded.alerts`: the failure classified from its `dg.Failure` metadata, the results its
assets recorded), so the same failure sends the same text whoever started the run; and both
send through `_alert`. A run the CLI started carries the `centsync/command` tag and is skipped:
the CLI sent its alerts itself. They are on by default and do nothing without
`CENTSYNC_ALERT_URL`.
"""

import dagster as dg

from centsync.pipelines import alerts, recorded
from centsync.pipelines.settings import Settings


def _alert(context: dg.RunStatusSensorContext, settings: Settings, *, failed: bool) -> int:
    """Send the alerts a finished run calls for, unless the CLI started it; how many went out."""
    run = context.dagster_run
    if not settings.alert_url or alerts.CLI_TAG in run.tags:
        return 0
    events = recorded.events(context.instance, run.run_id)
    found = recorded.alerts(
        run.job_name, run.run_id, events, failed=failed, warehouse=str(settings.warehouse)
    )
    return alerts.send(settings.alert_url, found, secrets=(settings.api_key,))


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
    _alert(context, settings, failed=False)


@dg.run_failure_sensor(
    name="alert_on_failure",
    description="Alert (CENTSYNC_ALERT_URL) when a scheduled or sensor-started run fails.",
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def alert_on_failure(
    context: dg.RunFailureSensorContext, settings: dg.ResourceParam[Settings]
) -> None:
    _alert(context, settings, failed=True)
