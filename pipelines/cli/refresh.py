"""`centsync refresh` and `centsync demo`: the refresh as a Dagster run, and its summary."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import render, runner
from centsync.pipelines.cli.group import (
    JSON_OUTPUT,
    Failed,
    all_owners_option,
    command_name,
    finish,
    json_option,
    settings,
)
from centsync.pipelines.embedded import embedded_api

if TYPE_CHECKING:
    from centsync.pipelines.results import RefreshResult
    from centsync.pipelines.settings import Settings


@dataclass(frozen=True)
class RefreshRun:
    """A refresh the CLI ran: its Dagster run and the refresh's result (its write-back step's
    in it)."""

    run_id: str
    refresh: RefreshResult
    seconds: float = 0.0


def run_refresh_job(
    config: Settings, mode: str, months: str = "", *, rebind: bool = False, report: bool = False
) -> RefreshRun:
    """Run the refresh as a Dagster run recorded in the instance; what its assets recorded."""
    from centsync.pipelines.results import RefreshResult, WritebackResult

    # progress: on a terminal (stderr), or wherever CENTSYNC_PROGRESS asks (`defs/refresh._run`);
    # never by default in a cron log
    ops = {
        "refresh": {"config": {"mode": mode, "months": months, "rebind": rebind, "report": report}}
    }
    tags = {"centsync/command": command_name(), "centsync/mode": mode}
    if not config.warehouse.exists():  # a first sync: its new file's schema made meanwhile
        from centsync.warehouse.migrate import prepare_new_file

        prepare_new_file()
    run = runner.execute(config, "refresh_job", ops=ops, tags=tags)
    refreshed = runner.recorded(run, "transactions")
    # a run whose data landed but whose blocking reconciliation checks failed reports the
    # verdict (exit 1), not a failure of the refresh itself
    if refreshed is None or (not run.success and not refreshed["verdict"]):
        raise Failed(runner.failure(run))
    written = runner.recorded(run, "outbox")
    result = RefreshResult.from_json(refreshed)
    if written is not None:
        result.writeback = WritebackResult.from_json(written)
    return RefreshRun(run.run_id, result)


@click.command()
@click.option("--full", is_flag=True, help="Re-read every month, whatever the fingerprints say.")
@click.option(
    "--hot", is_flag=True, help="Re-read only the hot window (what the hourly schedule does)."
)
@click.option(
    "--months",
    default="",
    help="Force-read months: 2024-03, 2024-01..2024-06, or 2024-01.. (to the current month).",
)
@click.option(
    "--rebind",
    is_flag=True,
    help="The warehouse holds another source's data: keep it as a backup, start a new one.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="The warehouse file is damaged or not a warehouse: keep it aside as "
    "<warehouse>.damaged-<time> and build a new one (the outbox is left as it is).",
)
@click.option(
    "--report", "with_report", is_flag=True, help="Write the HTML reconciliation report too."
)
@click.option(
    "--plan",
    "--dry-run",
    "dry_run",
    is_flag=True,
    help="Print what the refresh would read and prove and its request estimate; write nothing.",
)
@click.option(
    "--verbose",
    "-v",
    is_flag=True,
    help="After the one-line summary: the plan, every count, the requests, the time's parts.",
)
@json_option("Print the summary as one JSON object.")
@all_owners_option(
    "Refresh every owner of the owners file (a few at a time, in shards); a table of the "
    "owners (one JSON object with --json)."
)
@click.option(
    "--concurrency",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    help="With --all: how many owners refresh at once.",
)
@click.option(
    "--no-lake",
    is_flag=True,
    help="As an owner (--owner): do not publish into the shared lake.",
)
def refresh(
    full: bool,
    hot: bool,
    months: str,
    rebind: bool,
    rebuild: bool,
    with_report: bool,
    dry_run: bool,
    verbose: bool,
    as_json: bool,
    all_owners: bool,
    concurrency: int,
    no_lake: bool,
) -> None:
    """Bring the warehouse exactly in step with the service, spending the fewest requests.

    Ends with the marts and their reconciliation against the service's own numbers.

    Example: centsync refresh --months 2024-01..2024-03 --json | jq .rows
    """
    JSON_OUTPUT.set(as_json)
    mode, months = _mode(full, hot, months)
    if all_owners and rebuild:
        raise click.UsageError(
            "--rebuild sets one warehouse aside: run `centsync --owner NAME refresh --rebuild`"
        )
    if all_owners:
        _refresh_all(mode, months, with_report, dry_run, rebind, concurrency, as_json)
        return
    config = settings()
    if dry_run:
        _plan(config, mode, months, as_json)
        return
    if rebuild:
        _rebuild(config.warehouse)
    started = time.monotonic()
    with runner.interruptible(), embedded_api(config, rebind=rebind) as run_settings:
        run = run_refresh_job(run_settings, mode, months, rebind=rebind, report=with_report)
    run = dataclasses.replace(run, seconds=round(time.monotonic() - started, 2))
    result = run.refresh
    result.durations.total_seconds = run.seconds
    if config.owner and not no_lake:  # an owner of the owners file: into the shared lake too
        from centsync.pipelines.fleet.run_all import publish_owner

        result.lake = publish_owner(config)
    code = (
        errors.DIFFER
        if result.verdict == "differ"
        else errors.REJECTED
        if result.rejected
        else errors.OK
    )
    show = lambda: _show(run, config.warehouse, verbose)  # noqa: E731
    finish(result, as_json, show, exit_code=code, run_id=run.run_id)


def _rebuild(warehouse: Path) -> None:
    """`--rebuild`: an unusable warehouse is kept aside (named on stderr) before the refresh,
    which then builds a new one; a sound one is refreshed as it is."""
    from centsync.warehouse.outbox import outbox_path
    from centsync.warehouse.paths import rebuild_aside

    kept = rebuild_aside(warehouse)
    if kept is None:
        click.echo(f"--rebuild: {warehouse} is sound (or absent): nothing set aside.", err=True)
        return
    aside, why = kept
    click.echo(
        f"--rebuild: {warehouse} could not be used ({why}); it is kept as {aside}. Building a "
        f"new warehouse from the service; the outbox {outbox_path(warehouse)} is left as it is.",
        err=True,
    )


def _show(run: RefreshRun, warehouse: Path, verbose: bool) -> None:
    """The refresh's summary for a person, and where its report is, if it wrote one."""
    render.refresh_summary(run, warehouse, verbose=verbose)
    if run.refresh.report_path:
        click.echo(f"Report: {run.refresh.report_path}")


def _refresh_all(
    mode: str,
    months: str,
    with_report: bool,
    dry_run: bool,
    rebind: bool,
    concurrency: int,
    as_json: bool,
) -> None:
    """`refresh --all`: every owner of the owners file, `concurrency` at a time; a table of the
    owners (one object with `--json`)."""
    from centsync.pipelines.cli.group import OWNER_META
    from centsync.pipelines.cli.owners import refresh_all
    from centsync.pipelines.fleet.shard import HowToRefresh

    if dry_run or rebind or click.get_current_context().find_root().meta.get(OWNER_META):
        raise click.UsageError(
            "--all refreshes every owner: it does not go with --owner, --plan or --rebind."
        )
    config = settings()
    if config.owner:
        raise click.UsageError("--all refreshes every owner: unset CENTSYNC_OWNER.")
    # each owner as `centsync --owner NAME refresh` would: its write-back outbox first
    how = HowToRefresh(mode, months, with_report, writeback=True)  # type: ignore[arg-type]
    refresh_all(config, how, concurrency, as_json)


def _plan(config: Settings, mode: str, months: str, as_json: bool) -> None:
    """`refresh --plan`: the plan and its estimate, from the warehouse read only and the
    requests that tell the service's today and timezone (refresh/preview.py); writes nothing."""
    from centsync.pipelines.clients import api_client
    from centsync.pipelines.refresh.preview import preview
    from centsync.pipelines.refresh.summary import RefreshOptions
    from centsync.transform.contract import AskedMode

    forced: tuple[str, str] | None = None
    if months:
        first, last = months.split("..", 1)
        forced = (first, last)
    kind: AskedMode = "full" if mode == "full" else "hot" if mode == "hot" else "auto"
    options = RefreshOptions(
        mode=kind,
        months=forced,
        verify_days=config.verify_days,
        verify_pages=config.verify_pages,
        plan=config.plan,
        contract_file=config.contract_file,
    )
    with embedded_api(config) as run_settings, api_client(run_settings) as client:
        plan = preview(client, config.warehouse, options)
    from centsync.pipelines.results import PlanResult

    finish(PlanResult(plan=plan), as_json, lambda: render.refresh_plan(plan))


def _mode(full: bool, hot: bool, months: str) -> tuple[str, str]:
    """The refresh's mode and months from the flags (contradicting flags are usage errors)."""
    from centsync.transform.calendar import parse_month_range

    chosen = [
        name for name, on in (("--full", full), ("--hot", hot), ("--months", bool(months))) if on
    ]
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} contradict each other: choose one.")
    if months:
        try:
            first, last = parse_month_range(months)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--months") from None
        months = f"{first}..{last}"
    return ("full" if full else "hot" if hot else "auto"), months


# The demo's example queries: printed as the `centsync sql` commands that run them, with what
# they return (lines for people to copy: no double quote, `$` or backslash in them).
EXAMPLE_QUERIES = [
    (
        "Spending by category, last 12 months",
        """SELECT category_name, sum(transactions) AS n, sum(amount_cents) AS cents
        FROM marts.spending_by_month_category
        WHERE month > (SELECT max(month) FROM marts.spending_by_month_category) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY 3 LIMIT 6""",
    ),
    (
        "Cash flow per month (last 6; partial: the month is still running)",
        """SELECT strftime(month, '%Y-%m') AS month, income_cents, spending_cents, net_cents,
        partial FROM marts.cash_flow_by_month ORDER BY month DESC LIMIT 6""",
    ),
    (
        "Net worth, first of the month (last 6)",
        """SELECT date, assets_cents, liabilities_cents, net_worth_cents FROM marts.net_worth_daily
        WHERE day(date) = 1 ORDER BY date DESC LIMIT 6""",
    ),
]


@click.command()
def demo() -> None:
    """The main job on the embedded sandbox: a full refresh, marts, reconciliation, queries."""
    config = settings()
    started = time.monotonic()
    with embedded_api(config) as run_settings:
        # the README's example inbox file is posted too (write-back, with a read-write key)
        example = _seed_inbox_example(config.inbox)
        if example is None:
            render.echo(
                "The example inbox file was posted by an earlier demo (inbox/done/): nothing to "
                "post this time, and the sandbox still holds its rows (`centsync sandbox reset` "
                "starts it over).",
                err=True,
            )
        run = run_refresh_job(run_settings, "full", report=True)
        if example is not None and example.exists():
            # a first demo: the write-back checks rows against a warehouse, so it waited for
            # this refresh; an incremental one posts them and reads them back
            run = run_refresh_job(run_settings, "auto", report=True)
    run = dataclasses.replace(run, seconds=round(time.monotonic() - started, 2))
    render.refresh_summary(run, config.warehouse, with_verdict=False)
    _example_queries(config.warehouse)
    verdict = run.refresh.verdict
    if verdict:
        click.echo()
        render.refresh_verdict(run.refresh)
    render.demo_outro(run.refresh.report_path)
    if verdict == "differ":
        raise SystemExit(errors.DIFFER)


def _example_queries(path: Path) -> None:
    """Run the example queries on the published warehouse and print them with their rows."""
    import polars as pl

    from centsync.pipelines.cli.sql import _currency, as_money
    from centsync.warehouse import analysis, connect_readonly

    render.demo_intro(path)
    con = connect_readonly(path)
    try:
        for title, sql in EXAMPLE_QUERIES:
            # money as `centsync sql` shows it: cents as the settings' currency
            frame = as_money(analysis.result_frame(con.sql(sql)), _currency(con))
            # true/false as `centsync sql` prints them, not Python's True/False
            frame = frame.with_columns(pl.col(pl.Boolean).cast(pl.String))
            render.query(title, sql, frame.columns, frame.rows())
    finally:
        con.close()


def _seed_inbox_example(inbox: Path) -> Path | None:
    """Copy the example inbox file into the inbox unless it was processed before."""
    from importlib import resources

    name = "cash-receipts.csv"
    if any((inbox / d / name).exists() for d in ("done", "rejected")):
        return None
    inbox.mkdir(parents=True, exist_ok=True)
    target = inbox / name
    source = resources.files("centsync.pipelines").joinpath("examples", name)
    target.write_bytes(source.read_bytes())
    return target
