"""When refreshes run on their own: hourly hot window, nightly fingerprints, weekly full re-read.

They start stopped (Dagster's default for a new deployment): turn them on in the UI
(`centsync ui`, Automation) or with `dagster schedule start --start-all` from the project
root (with the same DAGSTER_HOME).
"""

import dagster as dg

from centsync.pipelines.defs.jobs import refresh_job


def _schedule(name: str, cron: str, mode: str, description: str) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=name,
        cron_schedule=cron,
        job=refresh_job,
        run_config={"ops": {"refresh": {"config": {"mode": mode}}}},
        description=description,
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )


schedules = [
    _schedule(
        "hourly_hot_window",
        "5 * * * *",
        "hot",
        "Every hour: re-read the hot window (current and previous month).",
    ),
    _schedule(
        "nightly_fingerprints",
        "30 2 * * *",
        "auto",
        "Every night: fingerprint-checked refresh of the whole history.",
    ),
    _schedule("weekly_full", "0 4 * * 0", "full", "Every Sunday: a full re-read."),
]
