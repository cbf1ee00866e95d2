"""Schedules in the person's time: each cron line a setting, run by Dagster in the service's own
time zone (the embedded sandbox's settings say Europe/Madrid), labelled by what the cron line
says, its next run shown in that zone; a bad cron line exits 2 naming its setting; a scheduled
run logs one line at INFO."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import pytest

from centsync.pipelines import instance as dagster_storage
from centsync.pipelines.cli import runner
from centsync.pipelines.definitions import build
from centsync.pipelines.embedded import embedded_api
from centsync.pipelines.settings import Settings

from .conftest import cli

pytestmark = pytest.mark.e2e

MADRID = ZoneInfo("Europe/Madrid")


def _listed() -> dict:
    code, out, err = cli("schedule", "list", "--json")
    assert code == 0, err
    return json.loads(out)


def _next_at(hour: int, minute: int, now: dt.datetime, weekday: int | None = None) -> dt.datetime:
    """The next wall-clock hour:minute in Madrid after `now` (on `weekday`, Monday 0), by hand."""
    day = now.astimezone(MADRID).date()
    while True:
        at = dt.datetime.combine(day, dt.time(hour, minute), MADRID)
        if at > now and (weekday is None or at.weekday() == weekday):
            return at
        day += dt.timedelta(days=1)


def test_schedules_run_in_the_services_time_zone_with_true_labels(
    embedded: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before the first refresh: UTC, and said to be the default
    before = _listed()
    assert (before["timezone"], before["timezone_from"]) == ("UTC", "default")
    assert cli("refresh")[0] == 0  # the service's settings: Europe/Madrid
    monkeypatch.setenv("CENTSYNC_HOT_WINDOW_CRON", "* * * * *")
    monkeypatch.setenv("CENTSYNC_NIGHTLY_CRON", "15 7 * * *")
    now = dt.datetime.now(dt.UTC)
    listed = _listed()
    assert (listed["timezone"], listed["timezone_from"]) == ("Europe/Madrid", "service")
    by_name = {s["name"]: s for s in listed["schedules"]}
    hot, nightly, weekly = (
        by_name[n] for n in ("hourly_hot_window", "nightly_fingerprints", "weekly_full")
    )
    # labels say what the cron line says, never "every hour" over a one-minute cron
    assert hot["cron"] == "* * * * *" and hot["description"].startswith("Every minute")
    assert nightly["description"].startswith("At 07:15 (Europe/Madrid)")
    assert weekly["description"].startswith("At 04:00, only on Sunday")
    assert [s["setting"] for s in listed["schedules"]] == [
        "CENTSYNC_HOT_WINDOW_CRON",
        "CENTSYNC_NIGHTLY_CRON",
        "CENTSYNC_WEEKLY_CRON",
    ]
    # next runs are Madrid's wall clock (07:15 there is 06:15 or 05:15 UTC)
    for s, want in ((nightly, _next_at(7, 15, now)), (weekly, _next_at(4, 0, now, weekday=6))):
        got = dt.datetime.fromisoformat(s["next_run"])
        assert got == want and got.utcoffset() == want.utcoffset(), s
    # Dagster's own definitions carry the zone, and its scheduler's iterator agrees on the time
    from dagster._utils.schedules import cron_string_iterator

    defs = build(Settings.from_env())
    nightly_def = defs.get_schedule_def("nightly_fingerprints")
    assert nightly_def.execution_timezone == "Europe/Madrid"
    ticks = cron_string_iterator(now.timestamp(), "15 7 * * *", "Europe/Madrid")
    assert next(ticks) == dt.datetime.fromisoformat(nightly["next_run"])
    # the words a person reads
    code, out, _ = cli("schedule", "list")
    assert code == 0 and out.startswith("Times are in Europe/Madrid (the service's time zone")
    assert re.search(r"nightly_fingerprints +next \w{3} \d{4}-\d\d-\d\d 07:15", out), out


@pytest.mark.parametrize(
    "env", ["CENTSYNC_HOT_WINDOW_CRON", "CENTSYNC_NIGHTLY_CRON", "CENTSYNC_WEEKLY_CRON"]
)
def test_a_bad_cron_line_exits_2_naming_its_setting(
    embedded: Path, monkeypatch: pytest.MonkeyPatch, env: str
) -> None:
    monkeypatch.setenv(env, "0 25 * * *")
    code, _, err = cli("schedule", "list")
    assert code == 2 and f"{env}='0 25 * * *' is not a cron line" in err, err


def test_a_scheduled_run_logs_one_line_at_the_default_level(
    embedded: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    assert cli("refresh")[0] == 0
    config = Settings.from_env()
    schedule = build(config).get_schedule_def("hourly_hot_window")
    # what the daemon would launch: the schedule's own run request, in a real Dagster run
    tick = schedule.evaluate_tick(dg.build_schedule_context())
    (request,) = tick.run_requests or []
    capfd.readouterr()
    with (
        embedded_api(config) as run_settings,
        dagster_storage.instance(runner.dagster_home(run_settings)) as instance,
    ):
        job = build(run_settings).resolve_job_def("refresh_job")
        run = job.execute_in_process(run_config=request.run_config, instance=instance)
    assert run.success
    logged = [line for line in capfd.readouterr().err.splitlines() if " - dagster - " in line]
    assert len(logged) == 1, logged
    assert re.search(
        r" - INFO - .* - refresh \d\d:\d\d CES?T \(hot\): 0 new, 0 updated, AGREE (\d+)/\1 \([\d.]+ s\)$",
        logged[0],
    ), logged
