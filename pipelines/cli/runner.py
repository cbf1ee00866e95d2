"""Running a job of the Dagster definitions in process, recorded in the CLI's instance, and
getting back what its assets recorded; Ctrl-C and SIGTERM as clean stops."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from centsync.pipelines import failures as errors
from centsync.pipelines.alerts import CLI_TAG
from centsync.pipelines.cli.group import DEBUG, Failed, command_name, imports_done

if TYPE_CHECKING:
    from dagster import ExecuteInProcessResult

    from centsync.pipelines.settings import Settings


def dagster_home(settings: Settings) -> Path:
    """The settings' Dagster home, made, with our dagster.yaml in it (written once) and the
    workspace file naming this code location (`workspace_file`)."""
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text((Path(__file__).parent.parent / "dagster.yaml").read_text())
    workspace = workspace_file(home)
    text = WORKSPACE.format(python=sys.executable, home=home)
    if not workspace.exists() or workspace.read_text() != text:
        workspace.write_text(text)
    return home


# Dagster names a schedule's state by its code location, the Python that loads it included:
# `centsync schedule`, `centsync daemon` and `centsync ui` all load this one file, so a schedule
# turned on by one is on for the others.
WORKSPACE = """\
# Written by centsync (pipelines/cli/runner.py): the code location of this Dagster home.
load_from:
  - python_module:
      module_name: centsync.pipelines.definitions
      location_name: centsync
      working_directory: {home}
      executable_path: {python}
"""


def workspace_file(home: Path) -> Path:
    """The Dagster workspace file of a Dagster home (`-w` of Dagster's own commands)."""
    return home / "workspace.yaml"


def execute(
    settings: Settings,
    job: str,
    *,
    ops: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
) -> ExecuteInProcessResult:
    """Run `job` in process with `settings` as its resource, recorded in the instance."""
    from centsync.pipelines import instance as dagster_storage
    from centsync.pipelines.definitions import build

    imports_done()
    home = dagster_home(settings)
    config: dict[str, Any] = {
        # The run's full event log is in the instance (and the UI); the terminal gets the
        # summary, its warnings, and a short message on a failure (tracebacks with --debug).
        "loggers": {"console": {"config": {"log_level": "DEBUG" if DEBUG.get() else "CRITICAL"}}},
    }
    if ops:
        config["ops"] = ops
    definition = build(settings).resolve_job_def(job)
    # Dagster's SQLite storage, keeping its connections for the run (pipelines/instance.py)
    with dagster_storage.instance(home) as instance:
        run = definition.execute_in_process(
            run_config=config,
            instance=instance,
            raise_on_error=False,
            tags={CLI_TAG: command_name() or job, **(tags or {})},
        )
    if settings.alert_url:
        alert(settings, job, run)
    return run


def alert(settings: Settings, job: str, run: ExecuteInProcessResult) -> int:
    """Send the alerts this CLI run calls for (`recorded.alerts`); how many went out.

    Runs that Dagster starts (schedules, the sensor) are alerted by `defs/alerts.py` instead,
    read the same way: the same failure gives the same text.
    """
    from centsync.pipelines import alerts, recorded

    found = recorded.alerts(
        job, run.run_id, run.all_events, failed=not run.success, warehouse=str(settings.warehouse)
    )
    return alerts.send(settings.alert_url, found, secrets=(settings.api_key,))


def recorded(run: ExecuteInProcessResult, asset: str) -> dict[str, Any] | None:
    """The result `asset` recorded in this run (its `centsync/result` entry), else None."""
    from centsync.pipelines import recorded as reader

    return reader.result(run.all_events, asset)


def failure(run: ExecuteInProcessResult) -> errors.Failure:
    """The classified error of a failed in-process run."""
    from centsync.pipelines import recorded as reader

    return reader.failure(run.all_events, run.run_id)


def run_job(settings: Settings, job: str, asset: str) -> tuple[str, dict[str, Any]]:
    """Run a job that must succeed: its run id and the result `asset` recorded."""
    run = execute(settings, job)
    found = recorded(run, asset) if run.success else None
    if found is None:
        raise Failed(failure(run))
    return run.run_id, found


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop a command cleanly: the refresh keeps what it read (published,
    marked 'interrupted'), the next one resumes; exit 130 (SIGINT) or 143 (SIGTERM)."""
    previous = signal.signal(signal.SIGTERM, errors.on_sigterm)
    try:
        yield
    except KeyboardInterrupt as exc:
        _quiet_teardown()
        terminated = isinstance(exc, errors.Terminated) or errors.SIGTERM_RECEIVED
        code = errors.TERMINATED if terminated else errors.INTERRUPTED
        message = errors.INTERRUPTED_MESSAGE
        raise Failed(
            errors.Failure(errors.Kind(code, "interrupted", ""), "Interrupted", message, message)
        ) from None
    except Failed as failed:
        if failed.failure.code in errors.STOPS:
            _quiet_teardown()
            if errors.SIGTERM_RECEIVED and failed.failure.code != errors.TERMINATED:
                f = failed.failure
                kind = errors.Kind(errors.TERMINATED, "interrupted", "")
                raise Failed(errors.Failure(kind, f.cls, f.message, f.detail, f.run_id)) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet_teardown() -> None:
    """An interrupted read leaves the client's event loop with pending tasks: their
    garbage-collection warnings are not the user's business on the way out."""
    sys.unraisablehook = lambda _unraisable: None
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
