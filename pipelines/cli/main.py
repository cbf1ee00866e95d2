"""The `centsync` command line: the group, its commands (one module per group), the entry."""

from __future__ import annotations

import gc
import logging
import os
import sys
import traceback
import warnings
from contextlib import suppress
from typing import Any

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.analysts import docs, notebook
from centsync.pipelines.cli.bank_import import import_command
from centsync.pipelines.cli.changes import changes_command
from centsync.pipelines.cli.doctor import doctor
from centsync.pipelines.cli.export import export_command
from centsync.pipelines.cli.group import DEBUG, CentsyncGroup
from centsync.pipelines.cli.owners import lake_command
from centsync.pipelines.cli.reconcile import reconcile_command
from centsync.pipelines.cli.refresh import demo, refresh
from centsync.pipelines.cli.rules import rules_command
from centsync.pipelines.cli.sandbox import sandbox, tour
from centsync.pipelines.cli.schedule import daemon, schedule
from centsync.pipelines.cli.sql import sql
from centsync.pipelines.cli.status import report_command, status
from centsync.pipelines.cli.ui import ui
from centsync.pipelines.cli.warm_server import warm_command
from centsync.pipelines.cli.writeback import writeback_command
from centsync.pipelines.kept import private_umask


@click.group(cls=CentsyncGroup)
@click.version_option(package_name="centsync")
@click.option(
    "--debug", is_flag=True, help="Print the whole error chain (tracebacks) on a failure."
)
def main(debug: bool) -> None:
    """centsync: keep a personal-finance service's data in a local DuckDB warehouse."""
    DEBUG.set(debug)
    private_umask()  # what it creates is its owner's alone, whatever the umask (kept.py)
    # The client's own warnings (rate-limit waits, long backoffs) are lines of their own.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("centsync: %(message)s"))
    handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    root = logging.getLogger("centsync")
    if not any(getattr(h, "_centsync_cli", False) for h in root.handlers):
        handler._centsync_cli = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    # Dagster flags beta parameters on every import; they are noise on a terminal.
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", message=".*is currently in beta.*")


# in the order of `centsync --help` before the split (click lists them sorted anyway)
for command in (
    sandbox,
    tour,
    notebook,
    docs,
    refresh,
    demo,
    report_command,
    reconcile_command,
    ui,
    writeback_command,
    status,
    schedule,
    daemon,
    doctor,
    sql,
    export_command,
    rules_command,
    import_command,
    lake_command,
    changes_command,
    warm_command,
):
    main.add_command(command)


def entry() -> None:
    """The `centsync` console script: `main`, then an immediate exit with its code.

    By the time a command returns, everything it wrote is committed, closed and flushed; the
    interpreter's own teardown (freeing every module Dagster, Polars and DuckDB loaded, joining
    idle pools) took about 0.6 s of a 4 s household refresh (docs/benchmarks.md) and does
    nothing a user needs, so it is skipped: `os._exit` also means no `atexit` hook runs, ours
    or a third party's (none of ours needs to; a library's flush-on-exit would not happen).
    An exception that escaped (a bug shown whole under `--debug`) exits 70, never 1.

    The cyclic garbage collector is off until the command's imports are in
    (`group.imports_done`: at once for most commands, after the Dagster imports for those that
    run a job): its full collections during the imports were 0.34 s (docs/benchmarks.md).

    What Polars must be told before it loads is said by the console script (`console.py`):
    importing this module imports Polars.
    """
    gc.disable()
    code: Any = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = errors.INTERNAL
    except Exception:  # `--debug` lets a bug's traceback through: still exit 70, never 1
        traceback.print_exc()
        code = errors.INTERNAL
    for stream in (sys.stdout, sys.stderr):
        with suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code or 0)
