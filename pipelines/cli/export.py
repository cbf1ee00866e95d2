"""`centsync export`: the warehouse as files other tools read (Parquet, CSV, a Beancount ledger)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click

from centsync.pipelines.cli.group import settings

FORMATS = ("parquet", "csv", "beancount")


@click.command("export")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="parquet",
    show_default=True,
    help="Parquet or CSV files (one per table, and manifest.json), or a Beancount ledger.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="The folder (parquet, csv) or file (beancount); default: beside the warehouse.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Replace an existing file at --out (or in its folder) (never one centsync keeps: the warehouse, outbox...).",
)
@click.option(
    "--tables",
    help="Only these, comma-separated: a schema (marts, core, recon, history) or schema.table.",
)
@click.option(
    "--since",
    help="Only rows from this day or month on (2026-01-31, 2026-01); undated tables whole.",
)
def export_command(
    fmt: str, out: Path | None, force: bool, tables: str | None, since: str | None
) -> None:
    """Export the marts, core, recon and history as files other tools read, from the
    warehouse as the last refresh published it (read only).

    Parquet (the column comments as key-value metadata) or CSV, one file per table or view,
    and manifest.json (row counts, comments, the refresh it came from); or, with --format
    beancount, a ledger that bean-check accepts.

    Example: centsync export --tables marts --out ~/finance-export
    """
    from centsync.pipelines.kept import guard_folder, guard_output
    from centsync.pipelines.outputs.export import AnalystUsageError, parse_since

    config = settings()
    warehouse = config.warehouse
    since_day = parse_since(since) if since else None
    requested = [t.strip() for t in (tables or "").split(",") if t.strip()]
    if fmt == "beancount":
        if requested:
            raise AnalystUsageError("--tables chooses Parquet or CSV files; a ledger has no tables")
        target = out or warehouse.with_name("centsync.beancount")
        if out is not None and out.is_dir():
            target = out / "centsync.beancount"
        if out is not None:  # the default place is the ledger's own: rewritten every time
            guard_output(target, config, force=force)
        _ledger(warehouse, target, since_day, config.category_names)
        return
    from centsync.pipelines.outputs.export import export_tables

    folder = out or warehouse.parent / "export"
    guard = (lambda names: guard_folder(folder, names, config, force=force)) if out else None
    if guard is not None:
        guard([])  # the folder itself, before the warehouse is opened
    from centsync.pipelines.outputs.export import category_names

    names = category_names(config.category_names)
    manifest = export_tables(warehouse, folder, fmt, requested, since_day, guard, names)
    since_note = f", rows since {manifest.since}" if manifest.since else ""
    click.echo(
        f"Exported {len(manifest.tables)} tables and views ({manifest.rows:,} rows{since_note}) "
        f"as {fmt} to {folder}"
    )
    click.echo(f"From refresh {manifest.refresh_id}; manifest: {folder / 'manifest.json'}")


def _ledger(warehouse: Path, out: Path, since: dt.date | None, names_file: Path) -> None:
    """The Beancount ledger, and what it holds."""
    from centsync.pipelines.outputs.beancount import write_ledger
    from centsync.pipelines.outputs.export import category_names

    ledger = write_ledger(warehouse, out, since, category_names(names_file))
    click.echo(
        f"Ledger: {ledger.path} ({ledger.transactions:,} transactions, {ledger.accounts} "
        f"accounts, {ledger.assertions} balance assertions) from refresh {ledger.refresh_id}"
    )
    for s in ledger.skipped:
        click.echo(
            f"Not asserted: {s.account} on {s.day}: the snapshot of refresh {s.refresh_id} does "
            "not hold against today's rows (the service changed them since)."
        )
    if ledger.from_payee:
        named = ", ".join(f"{a} ({c[:8]})" for a, c in sorted(ledger.from_payee.items()))
        click.echo(
            f"Named after their most frequent payee (the service lists no name): {named}. Name "
            f'them in {_home_short(names_file)}: [categories] "{next(iter(sorted(ledger.from_payee.values())))[:8]}" '
            '= "Salary" (docs/analysts.md).'
        )
    click.echo(f"Check it with: bean-check {ledger.path}")


def _home_short(path: Path) -> str:
    """A path under the home folder as a person writes it (`~/.config/...`)."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)
