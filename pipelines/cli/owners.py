"""Many owners from the CLI: `refresh --all` (one call of the fleet's engine) and `lake`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from centsync.pipelines.cli import runner
from centsync.pipelines.cli.group import finish, imports_done, json_option, settings

if TYPE_CHECKING:
    from centsync.pipelines.fleet.shard import HowToRefresh
    from centsync.pipelines.settings import Settings


def refresh_all(config: Settings, how: HowToRefresh, concurrency: int, as_json: bool) -> None:
    """`refresh --all`: every owner of the owners file through the fleet's engine
    (`fleet/run_all.py`), `concurrency` at a time; a table of the owners (one JSON object with
    `--json`), the highest exit code."""
    from centsync.pipelines.cli import render
    from centsync.pipelines.fleet.run_all import refresh_all

    imports_done()  # the console script started `refresh` with the collector off
    with runner.interruptible():
        result = refresh_all(config, concurrency, how)
    finish(result, as_json, lambda: render.fleet(result), exit_code=result.exit_code)


@click.command("lake")
@click.option(
    "--retain-hours",
    type=click.IntRange(min=0),
    default=24,
    show_default=True,
    help="Keep the files of every lake version younger than this (readers of older fail; "
    "0 only while no owner publishes).",
)
@json_option("Print one JSON object.")
def lake_command(retain_hours: int, as_json: bool) -> None:
    """Maintain the shared lake: compact each shard's files, checkpoint, delete old files.

    Run it after the owners' daily refreshes (the fleet's `lake_maintenance` schedule does):
    a cross-owner query then reads one file per shard, and the lake keeps one day of versions.
    """
    from centsync.warehouse.lake import NoLakeError, lake_tables, maintain

    lake = settings().lake
    if not lake_tables(lake):
        raise NoLakeError(f"the lake {lake} holds no tables yet")
    done = maintain(lake, retain_hours=retain_hours)
    from centsync.pipelines.results import LakeResult

    result = LakeResult.model_validate({"lake": str(lake), "tables": [d.to_json() for d in done]})

    def show() -> None:
        for d in result.tables:
            click.echo(
                f"{d.table:<40} files {d.files_before:>5} -> {d.files_after:<5} "
                f"removed {d.removed:>5}  {d.seconds:.2f} s"
            )

    finish(result, as_json, show)
