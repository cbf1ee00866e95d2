"""`centsync status` and `centsync report`: what the warehouse holds, for people and browsers."""

from __future__ import annotations

from pathlib import Path

import click

from centsync.pipelines.cli import render
from centsync.pipelines.cli.group import FILE, JSON_OUTPUT, finish, json_option, settings


def _many_owners(warehouse: Path, owner: str | None, owners_file: Path) -> None:
    """No warehouse here, no `--owner`, and an owners file: name its owners and how to see each
    (a NoWarehouseError of its own words, with its exit code)."""
    if warehouse.exists() or owner or not owners_file.exists():
        return
    from centsync.pipelines import owners
    from centsync.warehouse.errors import NoWarehouseError  # lazily: it brings DuckDB

    names = list(owners.load(owners_file).owners)

    class ManyOwnersError(NoWarehouseError):
        """Each owner has its own warehouse, and there is none outside them."""

        headline = "this is a many-owner setup: each owner has its own warehouse"
        what_to_do = (
            f"see one owner's with `centsync --owner NAME status` (e.g. `centsync --owner "
            f"{names[0]} status`); refresh them all with `centsync refresh --all`."
        )

    raise ManyOwnersError(f"the owners file {owners_file} names {', '.join(names)}")


@click.command()
@json_option("Print the status as one JSON object.")
def status(as_json: bool) -> None:
    """What the warehouse holds: its source, the last refresh, row counts, the verdict.

    Reads the warehouse only (no request to the service).

    Example: centsync status --json | jq .last_refresh
    """
    from centsync.pipelines.outputs.status import read_status
    from centsync.pipelines.results import StatusResult

    JSON_OUTPUT.set(as_json)
    config = settings()
    _many_owners(config.warehouse, config.owner, config.owners_file)
    info = StatusResult.from_json(read_status(config.warehouse, inbox=config.inbox))
    finish(info, as_json, lambda: render.status(info))


@click.command("report")
@click.option(
    "--out",
    type=FILE,
    help="Where to write it (default: centsync-report.html next to the warehouse).",
)
@click.option("--open", "open_it", is_flag=True, help="Open it in the default browser.")
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing file at --out (never one centsync keeps: the warehouse, outbox...).",
)
def report_command(out: Path | None, open_it: bool, force: bool) -> None:
    """Write the reconciliation report: one HTML file that needs no network to view.

    It shows the latest reconciliation's verdict, each difference with its cause and the command
    that resolves it, the rows behind them, rejected rows, write-back, charts and a per-month
    table; any month, category or merchant drills into its transactions (searchable).

    Example: centsync report --out /tmp/report.html
    """
    from centsync.pipelines.kept import guard_output
    from centsync.pipelines.outputs import report

    if out is not None:  # the default place is the report's own: rewritten every time
        guard_output(out, settings(), force=force)
    path = report.write(settings().warehouse, out)
    click.echo(f"Report: {path} ({path.stat().st_size / 2**20:.1f} MB)")
    if open_it:
        import webbrowser

        webbrowser.open(path.as_uri())
