"""`centsync import`: bank statements (OFX/QFX, CAMT.053) into the write-back's inbox."""

from __future__ import annotations

from pathlib import Path

import click

from centsync.pipelines.cli import render_writeback
from centsync.pipelines.cli.group import JSON_OUTPUT, dry_run_option, finish, json_option, settings


def account_map(map_file: Path | None, pairs: tuple[str, ...]) -> dict[str, str]:
    """The file account id -> account mapping: a TOML file's [accounts], then --account pairs."""
    from centsync.pipelines.writeback.rules import load
    from centsync.transform.rules import RulesError

    accounts: dict[str, str] = {}
    if map_file is not None:
        try:
            accounts.update(load(map_file).accounts)
        except RulesError as e:
            raise click.BadParameter(str(e), param_hint="--account-map") from None
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise click.BadParameter(
                f"{pair!r}: write the file's account id, '=', then an account's name or id",
                param_hint="--account",
            )
        accounts[key.strip()] = value.strip()
    return accounts


@click.command("import")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option(
    "--account-map",
    "map_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A TOML file whose [accounts] table maps the file's account id to an account.",
)
@click.option(
    "--account",
    "pairs",
    multiple=True,
    metavar="ID=ACCOUNT",
    help="Map one file account id to an account's exact name or id (repeatable).",
)
@dry_run_option("Show what would be imported; write nothing.")
@json_option("Print what each file gave as one object.")
def import_command(
    files: tuple[Path, ...],
    map_file: Path | None,
    pairs: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> None:
    """Import bank statements (OFX/QFX, CAMT.053) into the inbox as new transactions.

    Each transaction's event id is the bank's own (FITID, AcctSvcrRef): the same statement
    twice, or two overlapping ones, post each transaction once. Rows are booked on the bank's
    own calendar day. Likely duplicates (same account and amount within 3 days as a bank-feed
    row or another statement's row) and pending entries are held in inbox/held/, not posted.
    `centsync writeback` (or the next refresh) posts the inbox. Exit 2 for a file that cannot be
    read or whose account is not mapped.

    Example: centsync import statement.ofx --account 000123456789="Everyday Checking" --dry-run
    """
    from centsync.pipelines.results import ImportResult
    from centsync.pipelines.writeback.bank_files import BankFileError, import_bank_file

    JSON_OUTPUT.set(as_json)
    config = settings()
    accounts = account_map(map_file, pairs)
    runs = []
    for f in files:
        try:
            runs.append(
                import_bank_file(config.warehouse, config.inbox, f, accounts, dry_run=dry_run)
            )
        except BankFileError as e:
            raise click.UsageError(str(e)) from None
    result = ImportResult(files=runs, inbox=str(config.inbox), dry_run=dry_run)
    finish(result, as_json, lambda: render_writeback.bank_import(result))
