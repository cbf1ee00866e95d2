"""`centsync writeback`: post the inbox's rows and the requested edits, each exactly once."""

from __future__ import annotations

import json

import click

from centsync.pipelines.cli import failures as errors
from centsync.pipelines.cli import render, runner
from centsync.pipelines.cli.group import JSON_OUTPUT, settings
from centsync.pipelines.cli.sandbox import embedded_api


@click.command("writeback")
@click.option(
    "--dry-run", is_flag=True, help="Print the plan only: nothing is written, moved or sent."
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the plan and result as one JSON object."
)
def writeback_command(dry_run: bool, as_json: bool) -> None:
    """Post the inbox's CSV files and ops.outbox_requests' rows to the service, each exactly once.

    Every row is checked first (a bad row is rejected with its reason, the good rows of the same
    file go on), written to the outbox with its derived idempotency key, then sent; a resend after
    any failure reuses the key, so nothing is posted twice. Exit 7 when rows were rejected or need
    attention, 3 when the key cannot write (every row stays pending).

    Example: cp receipts.csv ~/.local/share/centsync/inbox/ && centsync writeback --dry-run
    """
    from centsync.pipelines.writeback import run as writeback

    JSON_OUTPUT.set(as_json)
    config = settings()
    if dry_run:
        # TODO(writeback): pass config.inbox once run_writeback takes it
        options = writeback.WritebackOptions(dry_run=True)
        report = writeback.run_writeback(None, config.warehouse, options).report()
    else:
        with runner.interruptible(), embedded_api(config) as run_settings:
            meta = runner.run_job(run_settings, "writeback_job", "outbox")
        report = dict(meta.get("writeback") or {})
        report["run_id"] = meta.get("run_id")
    bad = (
        report.get("rejected", 0)
        + report.get("rejected_by_service", 0)
        + report.get("needs_attention", 0)
        + report.get("conflicts", 0)
    )
    report["exit_code"] = errors.REJECTED if bad else errors.OK
    if as_json:
        click.echo(json.dumps(report, default=str))
    else:
        render.writeback(report)
    if report["exit_code"]:
        raise SystemExit(report["exit_code"])
