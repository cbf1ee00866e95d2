"""When refreshes run on their own: hourly hot window, nightly fingerprints, weekly full re-read.

They start stopped (Dagster's default for a new deployment): `centsync schedule on` turns them
on in the warehouse's own Dagster instance, and `centsync daemon` (or `centsync ui`) runs them
(docs/operations.md).
"""

import dagster as dg

from centsync.pipelines.defs.jobs import refresh_job
from centsync.pipelines.settings import Settings


def _schedule(name: str, cron: str, mode: str, description: str) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=name,
        cron_schedule=cron,
        job=refresh_job,
        run_config={"ops": {"refresh": {"config": {"mode": mode}}}},
        description=description,
        default_status=dg.DefaultScheduleStatus.STOPPED,
    )


def schedules(settings: Settings) -> list[dg.ScheduleDefinition]:
    """The three schedules; the hot window's cron line is a setting (`CENTSYNC_HOT_WINDOW_CRON`)."""
    return [
        _schedule(
            "hourly_hot_window",
            settings.hot_window_cron,
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
