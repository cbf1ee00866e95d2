"""The console script (`centsync` = `pipelines.cli.console:entry`): its start-up settings and exit."""

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


IMPORT_PROBE = r"""
import gc, os, sys

# collections that start while the CLI's main module is still being imported (its `entry`,
# defined after its imports, not there yet)
during = []

def record(phase, info):
    main = sys.modules.get("centsync.pipelines.cli.main")
    if phase == "start" and main is not None and not hasattr(main, "entry"):
        during.append(info["generation"])

gc.callbacks.append(record)
exit_now = os._exit
os._exit = lambda code: (print("probe", len(during), code), sys.stdout.flush(), exit_now(code))
sys.argv = ["centsync", "--version"]
if os.environ.get("PROBE_ENTRY") == "console":
    from centsync.pipelines.cli.console import entry
else:
    from centsync.pipelines.cli.main import entry
entry()
"""


def _import_probe(how: str) -> list[str]:
    import os

    done = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PROBE_ENTRY": how},
    )
    probe = [line for line in done.stdout.splitlines() if line.startswith("probe ")]
    assert len(probe) == 1, done.stdout + done.stderr
    return probe[0].split()[1:]


def test_the_console_script_imports_the_cli_with_the_collector_off() -> None:
    """`console.entry` turns the collector off before it imports the CLI (about 0.3 s of
    imports that set off collections, ~35 ms of them); importing the CLI's main module first,
    as the console script did, collects during that import."""
    collections, code = _import_probe("console")
    assert (collections, code) == ("0", "0")
    collections, code = _import_probe("main")
    assert int(collections) > 0 and code == "0"
