"""`centsync schedule on|off|list` and `centsync daemon`: schedules run with no browser, on the
warehouse's own Dagster instance, with alerts from the scheduled run; SIGTERM stops it all."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

import dagster as dg
import jsonschema
import psutil
import pytest

from centsync.pipelines import instance as dagster_storage
from centsync.pipelines.cli import schedule
from centsync.pipelines.results import json_schemas
from centsync.pipelines.settings import Settings

from .alert_receiver import Receiver
from .conftest import HttpEnv

pytestmark = pytest.mark.e2e


def _listed(http_env: HttpEnv) -> dict[str, bool]:
    code, out = http_env.cli("schedule", "list", "--json")
    assert code == 0, out
    info = json.loads(out)
    jsonschema.validate(info, json_schemas()["schedule"])
    return {s["name"]: s["on"] for s in info["schedules"]}


def test_schedules_turn_on_and_off_in_the_warehouses_instance(http_env: HttpEnv) -> None:
    assert _listed(http_env) == dict.fromkeys(
        ("hourly_hot_window", "nightly_fingerprints", "weekly_full"), False
    )
    code, out = http_env.cli("schedule", "on", "hourly_hot_window")
    assert code == 0 and "On: hourly_hot_window" in out
    listed = _listed(http_env)
    assert listed["hourly_hot_window"] is True and listed["weekly_full"] is False
    with dagster_storage.instance(http_env.tmp / "dagster") as instance:
        assert schedule.running_schedules(instance) == {"hourly_hot_window"}
    # on, but nothing runs them: the doctor warns (and still exits 0)
    code, out = http_env.cli("doctor", "--json")
    schedules = next(c for c in json.loads(out)["checks"] if c["name"] == "schedules")
    assert code == 0 and schedules["status"] == "warn" and "centsync daemon" in schedules["detail"]
    code, out = http_env.cli("schedule", "off")
    assert code == 0 and "1 were on" in out
    assert not any(_listed(http_env).values())
    code, _ = http_env.cli("schedule", "on", "hourly")  # a name that is not a schedule
    assert code == 2


@pytest.mark.slow  # waits for the next minute's tick: 30 to 90 s
def test_the_daemon_runs_a_due_schedule_alerts_and_stops_with_every_child(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every minute, so the tick is due within seconds; a key expiring within 30 days, so the
    # scheduled run's success carries an alert the daemon's sensor must send
    monkeypatch.setenv("CENTSYNC_HOT_WINDOW_CRON", "* * * * *")
    soon = http_env.admin(
        "POST", "/_sandbox/keys", {"scopes": ["data.read"], "expires_in_days": 10}
    )
    monkeypatch.setenv("CENTSYNC_API_KEY", soon["key"])
    with Receiver() as inbox:
        monkeypatch.setenv("CENTSYNC_ALERT_URL", inbox.url)
        assert http_env.cli("schedule", "on", "hourly_hot_window")[0] == 0
        daemon = subprocess.Popen(
            [sys.executable, "-m", "centsync.pipelines.cli", "daemon"],
            env=dict(os.environ),
            cwd=http_env.tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            run = _scheduled_run(http_env, timeout=150)
            assert run.status == dg.DagsterRunStatus.SUCCESS
            assert run.tags.get("dagster/schedule_name") == "hourly_hot_window"
            got = inbox.wait_for(1, timeout=90)  # the run-status sensor's next evaluation
            family = psutil.Process(daemon.pid).children(recursive=True)
            assert family, "the daemon started no process"
            daemon.send_signal(signal.SIGTERM)
            assert daemon.wait(timeout=60) == 0
            _, alive = psutil.wait_procs(family, timeout=30)
            assert alive == [], [p.cmdline() for p in alive]
        finally:
            if daemon.poll() is None:
                daemon.kill()
    (rows,) = http_env.sql("SELECT count(*) FROM core.transactions")[0]
    assert rows == len(http_env.sb.state()["transactions"])
    assert [m["title"][:33] for m in got] == ["centsync: the API key expires in "]
    assert soon["key"] not in json.dumps(got)


def _scheduled_run(http_env: HttpEnv, timeout: float) -> dg.DagsterRun:
    """The first run the schedule started, once it has finished."""
    deadline = time.monotonic() + timeout
    tags = {"dagster/schedule_name": "hourly_hot_window"}
    while time.monotonic() < deadline:
        with dagster_storage.instance(http_env.tmp / "dagster") as instance:
            runs = instance.get_runs(filters=dg.RunsFilter(tags=tags))
        if runs and runs[-1].is_finished:
            return runs[-1]
        time.sleep(1)
    raise AssertionError("the schedule started no run that finished in time")


def _monthly_keys(settings: Settings) -> list[str]:
    from centsync.pipelines.definitions import build

    asset = build(settings).resolve_assets_def("transactions_by_month")
    assert asset.partitions_def is not None
    return list(asset.partitions_def.get_partition_keys())


def test_partitions_start_at_the_ledgers_first_month(http_env: HttpEnv) -> None:
    today = dt.date.today().replace(day=1).isoformat()
    assert _monthly_keys(Settings.from_env())[0] == today  # no ledger yet: this month
    http_env.refresh()
    (first,) = http_env.sql("SELECT min(booked_at) FROM core.transactions")[0]
    keys = _monthly_keys(Settings.from_env())
    assert keys[0] == first.strftime("%Y-%m-01")
    months = http_env.sql(
        "SELECT count(DISTINCT date_trunc('month', booked_at)) FROM core.transactions"
    )
    assert len(keys) in (months[0][0], months[0][0] + 1)  # + next month (end_offset=1)
    s = dataclasses.replace(Settings.from_env(), partitions_start="2024-01-01")
    assert _monthly_keys(s)[0] == "2024-01-01"


def test_each_warehouse_has_its_own_dagster_history(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME")
    http_env.refresh()
    mine = Settings.from_env().dagster_home
    assert mine == http_env.warehouse.with_name("centsync.dagster")
    monkeypatch.setenv("CENTSYNC_WAREHOUSE", str(http_env.tmp / "other" / "second.duckdb"))
    other = Settings.from_env().dagster_home
    assert other == http_env.tmp / "other" / "second.dagster"
    with dagster_storage.instance(mine) as instance:
        assert len(instance.get_runs()) == 1
    assert not other.exists()  # nothing of the first warehouse's runs lands there


def test_the_code_location_opens_the_warehouse_once_for_its_partitions_and_time_zone(
    http_env: HttpEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    import centsync.warehouse as warehouse
    from centsync.pipelines import definitions
    from centsync.pipelines.defs import schedules as schedule_defs

    http_env.refresh()
    opened: list[object] = []
    real = warehouse.reading

    def counting(path: object, *args: object, **kwargs: object) -> object:
        opened.append(path)
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(warehouse, "reading", counting)
    defs = definitions.build(Settings.from_env())
    assert len(opened) == 1
    monkeypatch.setattr(warehouse, "reading", real)
    zone = schedule_defs.service_timezone(http_env.warehouse)
    assert zone is not None
    assert {s.execution_timezone for s in defs.schedules} == {zone}
    (first,) = http_env.sql("SELECT min(booked_at) FROM core.transactions")[0]
    assert _monthly_keys(Settings.from_env())[0] == first.strftime("%Y-%m-01")
