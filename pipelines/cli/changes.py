"""`centsync changes`: what the service changed since a day or a refresh, by month and category,
each change with its effect on the month's category total (read only)."""

from __future__ import annotations

import click

from centsync.pipelines.cli.group import JSON_OUTPUT, finish, json_option, settings


@click.command("changes")
@click.option(
    "--since",
    help="A day (2026-11-01) or a refresh number (12); default: what the last refresh changed.",
)
@json_option("Print the changes as one JSON object.")
def changes_command(since: str | None, as_json: bool) -> None:
    """What the service changed: rows added, changed (before and after) and removed, by month
    and category, each with its effect on that month's category total; and who changed it (the
    service, our write-back, our rule). Reads the warehouse only.

    Example: centsync changes --since 2026-11-01
    """
    from centsync.pipelines import history
    from centsync.transform.changes import lines
    from centsync.warehouse import connect_readonly

    JSON_OUTPUT.set(as_json)
    con = connect_readonly(settings().warehouse)
    try:
        result = history.changes(con, since)
    finally:
        con.close()

    def show() -> None:
        span = f"after refresh {result.since_refresh} up to refresh {result.to_refresh}"
        if not result.changes:
            click.echo(f"No change {span}.")
            return
        click.echo(f"{len({c.id for c in result.changes})} rows changed {span}:")  # type: ignore[attr-defined]
        for line in lines(c.model_dump() for c in result.changes):
            click.echo(line)

    finish(result, as_json, show)
