"""The console script (`centsync` = `pipelines.cli:entry`): its start-up settings and exit."""

from __future__ import annotations

import subprocess
import sys

PROBE = r"""
import gc, sys, click
from centsync.pipelines.cli import main as cli
from centsync.pipelines.cli import group as cli_support
cli_support.JOB_COMMANDS = cli_support.JOB_COMMANDS | {"probe-job"}

def state():
    return f"gc={gc.isenabled()} frozen={gc.get_freeze_count() > 0}"

@cli.main.command("probe-job")
def probe_job():
    click.echo("before " + state())
    cli_support.imports_done()
    click.echo("after " + state())
    raise SystemExit(3)

@cli.main.command("probe-other")
def probe_other():
    click.echo("other " + state())

sys.argv = ["centsync", sys.argv[1]]
cli.entry()
"""


def _run(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, command], capture_output=True, text=True, timeout=120
    )


def test_a_job_command_imports_with_the_collector_off_then_runs_with_it_on() -> None:
    done = _run("probe-job")
    assert done.returncode == 3, done.stderr  # the command's exit code, through os._exit
    lines = done.stdout.splitlines()
    assert lines[0] == "before gc=False frozen=False"
    assert lines[1] == "after gc=True frozen=True"


def test_any_other_command_runs_with_the_collector_on() -> None:
    done = _run("probe-other")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "other gc=True frozen=True"
