"""`centsync writeback`: post the inbox's rows and the requested edits, each exactly once."""

from __future__ import annotations

import dataclasses

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import render, render_writeback, runner
from centsync.pipelines.cli.group import JSON_OUTPUT, dry_run_option, finish, json_option, settings
from centsync.pipelines.embedded import embedded_api
from centsync.pipelines.settings import Settings


@click.command("writeback")
@dry_run_option("Print the plan only: nothing is written, moved or sent.")
@json_option("Print the plan and result as one JSON object.")
@click.option(
    "--allow-future",
    is_flag=True,
    help="Post rows dated after the service's today (refused otherwise, with their reason).",
)
@click.option(
    "--rejected",
    "list_rejected",
    is_flag=True,
    help="List every row set aside (rejected, refused by the service, needing attention), "
    "with its source and reason; send nothing.",
)
def writeback_command(
    dry_run: bool, as_json: bool, allow_future: bool, list_rejected: bool
) -> None:
    """Post the inbox's CSV files and ops.outbox_requests' rows to the service, each exactly once.

    Every row is checked first (a bad row is rejected with its reason, the good rows of the same
    file go on), written to the outbox with its derived idempotency key, then sent; a resend after
    any failure reuses the key, so nothing is posted twice. Exit 7 when rows were rejected or need
    attention, 3 when the key cannot write (every row stays pending).

    The inbox folder is printed by `centsync status` and in this command's summary.

    `--rejected` lists every row set aside that still is: the write-back's rows rejected by
    its checks, refused by the service or needing attention (not fixed since), and the rows
    the latest refresh rejected of what the service sent; with its source and reason.

    Example: centsync writeback --dry-run
    """
    from centsync.pipelines.results import WritebackResult
    from centsync.pipelines.writeback import run as writeback

    JSON_OUTPUT.set(as_json)
    config = settings()
    if list_rejected:
        _list_rejected(config, as_json)
        return
    if allow_future:
        config = dataclasses.replace(config, allow_future=True)
    run_id = None
    if dry_run:
        options = writeback.WritebackOptions(
            dry_run=True, inbox=config.inbox, allow_future=config.allow_future
        )
        result = writeback.run_writeback(None, config.warehouse, options)
    else:
        with runner.interruptible(), embedded_api(config) as run_settings:
            run_id, data = runner.run_job(run_settings, "writeback_job", "outbox")
        result = WritebackResult.from_json(data)
    code = errors.REJECTED if result.bad else errors.OK
    finish(
        result, as_json, lambda: render_writeback.writeback(result), exit_code=code, run_id=run_id
    )


def _list_rejected(config: Settings, as_json: bool) -> None:
    """`writeback --rejected`: every row set aside, read from the files (no request)."""
    from centsync.pipelines.outputs.status import rejected
    from centsync.pipelines.results import RejectedList

    result = RejectedList.from_json({"rows": rejected(config.warehouse)})
    code = errors.REJECTED if result.rows else errors.OK
    finish(result, as_json, lambda: render.rejected_rows(result.rows), exit_code=code)
