"""`centsync reconcile`: rebuild the marts and prove them against the service's numbers."""

from __future__ import annotations

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import render, runner
from centsync.pipelines.cli.group import JSON_OUTPUT, finish, json_option, settings
from centsync.pipelines.embedded import embedded_api


@click.command("reconcile")
@click.option(
    "--live",
    is_flag=True,
    help="Compare with the service's aggregates fetched now, every synced month on its own "
    "(6 requests plus 3 a month).",
)
@json_option("Print the result as one JSON object.")
def reconcile_command(live: bool, as_json: bool) -> None:
    """Rebuild the marts and prove them against the service's own numbers, to the cent.

    Without --live it compares with the aggregates the latest refresh landed (no request).
    Exit 0 when everything agrees or every difference is explained, 1 otherwise.

    Example: centsync reconcile --json | jq .verdict
    """
    from centsync.pipelines.results import ReconcileResult

    JSON_OUTPUT.set(as_json)
    config = settings()
    if live:
        with embedded_api(config) as run_settings:
            run_id, data = runner.run_job(run_settings, "reconcile_live_job", "recon/results")
    else:
        run_id, data = runner.run_job(config, "reconcile_job", "recon/results")
    result = ReconcileResult.from_json(data)
    code = errors.DIFFER if result.verdict == "differ" else errors.OK
    show = lambda: render.reconciliation(result, run_id)  # noqa: E731
    finish(result, as_json, show, exit_code=code, run_id=run_id)
