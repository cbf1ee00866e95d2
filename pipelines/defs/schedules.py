"""When refreshes run on their own: the hot window, the fingerprints, a full re-read.

They start stopped (Dagster's default for a new deployment): `centsync schedule on` turns them
on in the warehouse's own Dagster instance, and `centsync daemon` (or `centsync ui`) runs them
(docs/operations.md). Each cron line is a setting, read in the service's own time zone (its
`/v1/settings`, as the last refresh stored it in core.settings; UTC before the first refresh),
and each schedule's label is its cron line in words (cron-descriptor), so it cannot say "every
hour" over a cron line that runs every minute. A scheduled run logs one line at INFO (its
summary, `defs/refresh.py`); Dagster's own DEBUG events stay in the run's event log.
"""

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from centsync.extract import ConfigurationError
from centsync.pipelines.defs.jobs import DAEMON_RUN_LOGGERS, refresh_job
from centsync.pipelines.settings import Settings


@dataclass(frozen=True)
class Planned:
    """One schedule: its name, the setting that holds its cron line, its mode and what it does."""

    name: str
    setting: str  # the Settings field (and its CENTSYNC_ variable, docs/configuration.md)
    env: str
    mode: str
    does: str


PLANNED = (
    Planned(
        "hourly_hot_window",
        "hot_window_cron",
        "CENTSYNC_HOT_WINDOW_CRON",
        "hot",
        "re-read the hot window (current and previous month)",
    ),
    Planned(
        "nightly_fingerprints",
        "nightly_cron",
        "CENTSYNC_NIGHTLY_CRON",
        "auto",
        "fingerprint-checked refresh of the whole history",
    ),
    Planned("weekly_full", "weekly_cron", "CENTSYNC_WEEKLY_CRON", "full", "a full re-read"),
)


def cron_words(cron: str) -> str:
    """A cron line in words ("At 5 minutes past the hour", "At 02:30, only on Sunday")."""
    from cron_descriptor import Options, get_description

    options = Options()
    options.use_24hour_time_format = True
    return str(get_description(cron, options))


def service_timezone(warehouse: Path) -> str | None:
    """The service's time zone as the last refresh stored it (None: no refresh yet, or a
    warehouse that cannot be read now: held by a writer that is not ours, or damaged)."""
    from centsync.pipelines.defs.partitions import ledger_facts

    return ledger_facts(warehouse)[1]


def next_runs(cron: str, timezone: str, now: dt.datetime, count: int = 1) -> list[dt.datetime]:
    """The next `count` times `cron` runs after `now`, in `timezone` (aware datetimes)."""
    from zoneinfo import ZoneInfo

    from cronsim import CronSim

    local = now.astimezone(ZoneInfo(timezone)).replace(microsecond=0)
    it = CronSim(cron, local)
    return [next(it) for _ in range(count)]


def _schedule(planned: Planned, cron: str, timezone: str) -> dg.ScheduleDefinition:
    try:
        return dg.ScheduleDefinition(
            name=planned.name,
            cron_schedule=cron,
            execution_timezone=timezone,
            job=refresh_job,
            run_config={
                "ops": {"refresh": {"config": {"mode": planned.mode}}},
                "loggers": DAEMON_RUN_LOGGERS,
            },
            description=f"{cron_words(cron)} ({timezone}): {planned.does}.",
            default_status=dg.DefaultScheduleStatus.STOPPED,
        )
    except dg.DagsterInvalidDefinitionError as exc:
        raise ConfigurationError(
            f"{planned.env}={cron!r} is not a cron line Dagster runs ({exc}): set it to five "
            "fields (e.g. '5 * * * *'), or unset it for the default"
        ) from None


def schedules(settings: Settings, timezone: str | None = None) -> list[dg.ScheduleDefinition]:
    """The three schedules, each on its setting's cron line in the service's time zone
    (`timezone`, else the warehouse's: read once, when the code location loads; UTC before the
    first refresh)."""
    zone = timezone or service_timezone(settings.warehouse) or "UTC"
    return [_schedule(p, getattr(settings, p.setting), zone) for p in PLANNED]
