"""`centsync ui`: the Dagster UI and its daemon on this project's instance, stopped cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import runner
from centsync.pipelines.cli.group import settings
from centsync.pipelines.embedded import embedded_api


@click.command()
@click.option("--port", default=3000, show_default=True, type=int)
def ui(port: int) -> None:
    """Start the Dagster UI (and its daemon) on this project's instance.

    SIGINT and SIGTERM stop the webserver, the daemon and their code servers: nothing is left
    running. Schedules start stopped: turn them on in the UI (Automation).
    """
    config = settings()
    home = runner.dagster_home(config)
    click.echo(f"Dagster UI on http://127.0.0.1:{port} (DAGSTER_HOME={home}); Ctrl-C stops it.")
    with embedded_api(config) as run_settings:
        cmd = [sys.executable, "-m", "dagster", "dev", "-p", str(port)]
        # the same code location as `centsync schedule` and `centsync daemon` (one schedule state)
        cmd += ["-w", str(runner.workspace_file(home))]
        # dagster dev shuts down cleanly on SIGINT
        code, stopping = run_group(cmd, run_settings.child_environ(), home, signal.SIGINT)
    if stopping:
        raise SystemExit(errors.INTERRUPTED if stopping[0] == signal.SIGINT else 0)
    raise SystemExit(code)


def run_group(
    cmd: list[str], env: dict[str, str], cwd: Path, stop: signal.Signals
) -> tuple[int, list[int]]:
    """Run `cmd` in its own process group until it exits or we are told to stop (SIGINT,
    SIGTERM: `stop` is sent to the whole group); no process of the group outlives the call.
    Returns its exit code and the signals that asked us to stop."""
    # its own process group: a stop reaches the webserver, the daemon and every code server;
    # they read the settings (the embedded sandbox's too) from their environment
    child = subprocess.Popen(cmd, start_new_session=True, env=env, cwd=cwd)
    stopping: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        stopping.append(signum)
        with suppress(ProcessLookupError):
            os.killpg(child.pid, stop)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = child.wait()
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        _stop_group(child.pid)
    return code, stopping


def _stop_group(pgid: int, grace: float = 20.0) -> None:
    """Make sure no process of the group outlives us: SIGTERM, then SIGKILL after a grace."""
    deadline = time.monotonic() + grace
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        deadline = time.monotonic() + 5
