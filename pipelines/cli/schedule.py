"""`centsync schedule on|off|list` and `centsync daemon`: the schedules of this warehouse's
Dagster instance, run by Dagster's own daemon with no browser and no webserver."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from centsync.pipelines.cli import render, runner
from centsync.pipelines.cli.group import finish, json_option, settings

if TYPE_CHECKING:
    from dagster import DagsterInstance

    from centsync.pipelines.settings import Settings

NAMES = ("hourly_hot_window", "nightly_fingerprints", "weekly_full")


@click.group()
def schedule() -> None:
    """Turn the refresh schedules on or off, or list them (this warehouse's Dagster instance)."""


def _names(names: tuple[str, ...]) -> list[str]:
    """The schedules named (all of them when none is), each checked."""
    for name in names:
        if name not in NAMES:
            raise click.BadParameter(f"{name!r} is not a schedule; choose from {', '.join(NAMES)}")
    return list(names) or list(NAMES)


@schedule.command("on")
@click.argument("names", nargs=-1)
def schedule_on(names: tuple[str, ...]) -> None:
    """Turn schedules on (all three when none is named); `centsync daemon` runs them.

    Example: centsync schedule on hourly_hot_window
    """
    config = settings()
    home = runner.dagster_home(config)
    chosen = _names(names)
    # Dagster's own command: one code-location load per call (about 5 s)
    if set(chosen) == set(NAMES):
        _dagster(config, home, "schedule", "start", "--start-all")
    else:
        for name in chosen:
            _dagster(config, home, "schedule", "start", name)
    click.echo(f"On: {', '.join(chosen)} (DAGSTER_HOME={home}).")
    if not _daemon_alive(config):
        render.echo("Nothing runs them until `centsync daemon` (or `centsync ui`) runs.")


@schedule.command("off")
@click.argument("names", nargs=-1)
def schedule_off(names: tuple[str, ...]) -> None:
    """Turn schedules off (all three when none is named).

    Example: centsync schedule off
    """
    from centsync.pipelines import instance as dagster_storage

    config = settings()
    home = runner.dagster_home(config)
    chosen = _names(names)
    with dagster_storage.instance(home) as instance:
        stopped = stop_schedules(instance, chosen)
    click.echo(f"Off: {', '.join(chosen)} (DAGSTER_HOME={home}; {stopped} were on).")


@schedule.command("list")
@json_option("Print them as one JSON object.")
def schedule_list(as_json: bool) -> None:
    """List the schedules: on or off, when they run, what they do.

    Example: centsync schedule list --json
    """
    from centsync.pipelines.results import ScheduleResult

    result = ScheduleResult.from_json(schedules_state(settings()))

    def show() -> None:
        from centsync.pipelines.cli.render import schedules

        schedules(result)

    finish(result, as_json, show)


def schedules_state(config: Settings, now: dt.datetime | None = None) -> dict[str, Any]:
    """The documented `schedule list --json` object: each schedule, on or off, its next run in
    the service's time zone, and the daemon."""
    from centsync.pipelines import instance as dagster_storage
    from centsync.pipelines.defs.schedules import PLANNED, next_runs, schedules, service_timezone

    home = runner.dagster_home(config)
    with dagster_storage.instance(home) as instance:
        running = running_schedules(instance)
        alive = daemon_alive(instance)
    learned = service_timezone(config.warehouse)
    zone = learned or "UTC"
    now = now or dt.datetime.now(dt.UTC)
    envs = {p.name: p.env for p in PLANNED}
    return {
        "dagster_home": str(home),
        "timezone": zone,
        "timezone_from": "service" if learned else "default",
        "schedules": [
            {
                "name": s.name,
                "on": s.name in running,
                "cron": s.cron_schedule,
                "description": s.description,
                "setting": envs[s.name],
                "next_run": next_runs(str(s.cron_schedule), zone, now)[0].isoformat(),
            }
            for s in schedules(config, zone)
        ],
        "daemon_running": alive,
    }


def _daemon_alive(config: Settings) -> bool:
    from centsync.pipelines import instance as dagster_storage

    with dagster_storage.instance(runner.dagster_home(config)) as instance:
        return daemon_alive(instance)


def _dagster(config: Settings, home: Path, *args: str) -> None:
    """Run one of Dagster's own commands on this Dagster home and workspace."""
    cmd = [sys.executable, "-m", "dagster", *args, "-w", str(runner.workspace_file(home))]
    done = subprocess.run(
        cmd, env=config.child_environ(), cwd=home, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise click.ClickException(f"`dagster {' '.join(args)}` failed: {last}")


@click.command()
def daemon() -> None:
    """Run Dagster's daemon on this warehouse's instance: the schedules that are on, the sensors.

    No webserver. SIGTERM or Ctrl-C stops it and every process it started. For systemd and cron,
    see docs/operations.md.
    """
    from centsync.pipelines.cli.ui import run_group
    from centsync.pipelines.embedded import embedded_api

    config = settings()
    home = runner.dagster_home(config)
    on = [s["name"] for s in schedules_state(config)["schedules"] if s["on"]]
    render.echo(
        f"Dagster daemon on DAGSTER_HOME={home} (warehouse {config.warehouse}); "
        f"schedules on: {', '.join(on) or 'none (`centsync schedule on`)'}. SIGTERM stops it.",
        err=True,
    )
    with embedded_api(config) as run_settings:
        daemon_bin = Path(sys.executable).parent / "dagster-daemon"
        cmd = [str(daemon_bin), "run", "-w", str(runner.workspace_file(home))]
        # SIGINT: the daemon's own clean shutdown; it stops its code server itself
        code, stopping = run_group(cmd, run_settings.child_environ(), home, signal.SIGINT)
    if stopping:
        raise SystemExit(130 if stopping[0] == signal.SIGINT else 0)
    if code:
        # it stopped by itself: its own log above says why (an instance it cannot use, mostly)
        click.echo(f"The Dagster daemon stopped by itself (exit {code}): see above.", err=True)
        raise SystemExit(6)


# --- what the instance says of the schedules and the daemon (Dagster's public API) ---


def running_schedules(instance: DagsterInstance) -> set[str]:
    """The names of the schedules this instance has turned on."""
    return {
        state.instigator_name
        for state in instance.all_instigator_state()
        if state.instigator_type.value == "SCHEDULE" and state.status.value == "RUNNING"
    }


def stop_schedules(instance: DagsterInstance, names: list[str]) -> int:
    """Turn these schedules off in the instance's schedule storage; how many were on.

    A schedule's stored state names its code location, so this needs no code location loaded
    (Dagster's `dagster schedule stop` loads one per name).
    """
    stopped = 0
    for state in instance.all_instigator_state():
        if (
            state.instigator_type.value == "SCHEDULE"
            and state.instigator_name in names
            and state.status.value == "RUNNING"
        ):
            instance.stop_schedule(state.instigator_origin_id, state.selector_id, None)
            stopped += 1
    return stopped


# the daemon beats every 30 s (Dagster's default); two missed beats and it is taken for gone
DAEMON_HEARTBEAT_SECONDS = 70


def daemon_alive(instance: DagsterInstance, now: float | None = None) -> bool:
    """Whether a Dagster daemon's scheduler beat on this instance within the last minute."""
    import time

    beat = instance.get_daemon_heartbeats().get("SCHEDULER")
    return beat is not None and (now or time.time()) - beat.timestamp < DAEMON_HEARTBEAT_SECONDS
