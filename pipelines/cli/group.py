"""What every `centsync` command shares: its settings, its flags, the group that turns an
expected failure into a short message and its exit code."""

from __future__ import annotations

import contextvars
import gc
import json
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from centsync.pipelines import failures as errors

if TYPE_CHECKING:
    from centsync.pipelines.results import Result
    from centsync.pipelines.settings import Settings

# the running command prints its failure as JSON (`--json`)
JSON_OUTPUT: contextvars.ContextVar[bool] = contextvars.ContextVar("json", default=False)
DEBUG: contextvars.ContextVar[bool] = contextvars.ContextVar("debug", default=False)

# Commands whose work is a Dagster run: the console script (`cli.console.entry`) starts them with
# the cyclic garbage collector off, and `imports_done` turns it on once the run's imports are in.
JOB_COMMANDS = frozenset({"refresh", "demo", "reconcile", "writeback"})


def settings() -> Settings:
    """The command's settings: read from the environment once, on first use, then kept.

    Built lazily so that `--help` and the commands that need no setting run whatever the
    environment holds; a value that cannot be used stops the command with exit code 2.
    """
    from centsync.pipelines.settings import Settings

    root = click.get_current_context().find_root()
    if not isinstance(root.obj, Settings):
        config = Settings.from_env()
        owner = root.meta.get(OWNER_META)
        # `centsync --owner NAME`: that owner's service, key, warehouse and Dagster home
        root.obj = config.for_owner(owner) if owner else config
    return root.obj


OWNER_META = "centsync.owner"
STARTED_META = "centsync.started"  # time.monotonic() when the command started (`finish`)


def _remember_owner(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.find_root().meta[OWNER_META] = value


OWNER_OPTION = click.Option(
    ["--owner"],
    metavar="NAME",
    expose_value=False,
    is_eager=True,
    callback=_remember_owner,
    help="Run the command as this owner of the owners file (CENTSYNC_OWNERS_FILE): its key, "
    "its own warehouse and Dagster home. Default: CENTSYNC_OWNER, else the single-owner settings.",
)


# what a command's options take or give: one file (never a folder), as a Path
FILE = click.Path(dir_okay=False, path_type=Path)

CommandFunction = TypeVar("CommandFunction", bound=Callable[..., Any])


def json_option(text: str) -> Callable[[CommandFunction], CommandFunction]:
    """`--json` (as `as_json`): the command prints its result as one JSON object."""
    return click.option("--json", "as_json", is_flag=True, help=text)


def dry_run_option(text: str) -> Callable[[CommandFunction], CommandFunction]:
    """`--dry-run`: the command shows what it would do and writes nothing."""
    return click.option("--dry-run", is_flag=True, help=text)


def all_owners_option(text: str) -> Callable[[CommandFunction], CommandFunction]:
    """`--all` (as `all_owners`): the command works on every owner of the owners file."""
    return click.option("--all", "all_owners", is_flag=True, help=text)


def finish(
    result: Result,
    as_json: bool,
    show: Callable[[], None],
    *,
    exit_code: int = 0,
    run_id: str | None = None,
) -> None:
    """Print the command's result, then leave with `exit_code` when that is not 0.

    With `--json`: one object, the result's own fields and the CLI's envelope (the run id, the
    warehouse, the exit code, the seconds since the command started), added here and nowhere
    else (`results.command_json` is its type); else `show()`, for people.
    """
    if as_json:
        from centsync.pipelines.results import Envelope

        started = click.get_current_context().find_root().meta.get(STARTED_META)
        seconds = 0.0 if started is None else round(time.monotonic() - started, 2)
        warehouse = None
        with suppress(Exception):  # settings that cannot be read (`doctor` says why)
            warehouse = str(settings().warehouse)
        envelope = Envelope(
            run_id=run_id, warehouse=warehouse, exit_code=exit_code, seconds=seconds
        )
        click.echo(json.dumps(result.to_json() | envelope.to_json()))
    else:
        show()
    if exit_code:
        raise SystemExit(exit_code)


def command_name() -> str:
    """The running centsync command's name (a Dagster run's `centsync/command` tag)."""
    ctx = click.get_current_context(silent=True)
    return ctx.info_name if ctx is not None and ctx.info_name else ""


def imports_done() -> None:
    """Turn the garbage collector on, if the console script turned it off for the imports.

    Importing what a run needs (about 1,900 modules: Dagster, Polars, DuckDB, SQLAlchemy ...)
    allocates enough objects to set off full collections over everything imported so far:
    0.34 s of a 1.45 s import (bench/fixed_cost.py, docs/benchmarks.md). What the imports made
    lives as long as the process, so it is frozen out of the collections that follow.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


class Failed(click.ClickException):
    """An expected failure: one short message, what to do, where the log is; its exit code."""

    def __init__(self, failure: errors.Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.exit_code = failure.code  # type: ignore[misc]
        # where the log goes, known while the command's context is (`show` runs after it)
        self.home: Path | None = None
        with suppress(Exception):  # settings that cannot be read are this failure, maybe
            self.home = settings().dagster_home

    def show(self, file: Any = None) -> None:
        from centsync.pipelines.cli import render

        log = None
        # a usage error outside a run (a flag, a setting, a query DuckDB refused) is said whole
        # on the spot: no log file, and nothing written into the Dagster home
        said_whole = self.failure.code == errors.USAGE and self.failure.run_id is None
        if self.home is not None and not said_whole:
            with suppress(OSError):
                log = errors.write_log(self.home, self.failure)
        if JSON_OUTPUT.get():
            from centsync.pipelines.results import FailureResult

            click.echo(json.dumps(FailureResult.from_json(self.failure.to_json(log)).to_json()))
        render.failure(self.failure, log, debug=DEBUG.get())


class CentsyncGroup(click.Group):
    """Expected failures raised outside a run print like those of a run (`Failed`); the
    root group takes `--owner NAME` for every command (`centsync --owner alice refresh`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.append(OWNER_OPTION)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name not in JOB_COMMANDS:
            imports_done()  # any other command runs with the collector on from the start
        return name, command, rest

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # `--json` is known before any option is parsed, so that a usage error prints its object
        if "--json" in args:
            JSON_OUTPUT.set(True)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        ctx.meta.setdefault(STARTED_META, time.monotonic())
        try:
            return super().invoke(ctx)
        except Failed:
            raise
        except click.UsageError as exc:
            if not JSON_OUTPUT.get():
                raise
            raise Failed(_usage_failure(exc)) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `centsync status | head`: the reader left, nothing to say
            sys.stderr.close()
            raise SystemExit(0) from None
        except KeyboardInterrupt as exc:  # before or after a run (a run's own is the runner's)
            terminated = isinstance(exc, errors.Terminated) or bool(errors.SIGTERM_RECEIVED)
            name = "Terminated" if terminated else "KeyboardInterrupt"
            kind = errors.INTERRUPTS[name]
            raise Failed(errors.Failure(kind, name, "stopped before the work began", "")) from None
        except Exception as exc:
            failure = errors.from_exception(exc)
            if failure.kind is errors.UNEXPECTED and DEBUG.get():
                raise
            raise Failed(failure) from None


def _usage_failure(exc: click.UsageError) -> errors.Failure:
    """A usage error as a failure, for `--json` (its object, exit 2)."""
    kind = errors.Kind(errors.USAGE, "usage", "see `centsync COMMAND --help`.")
    return errors.Failure(kind, type(exc).__name__, exc.format_message(), "")
