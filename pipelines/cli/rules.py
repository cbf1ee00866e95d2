"""`centsync rules`: categorise in bulk with a rules file, through the write-back's outbox."""

from __future__ import annotations

from pathlib import Path

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli import render_writeback
from centsync.pipelines.cli.group import (
    FILE,
    JSON_OUTPUT,
    dry_run_option,
    finish,
    json_option,
    settings,
)


@click.command("rules")
@click.argument("rules_file", type=FILE)
@dry_run_option("Preview which rows change, before and after; write nothing.")
@json_option("Print the changes and plan as one object.")
def rules_command(rules_file: Path, dry_run: bool, as_json: bool) -> None:
    """Apply a TOML rules file (match on concept, merchant, amount, account; set category,
    Expense, notes) to the warehouse's transactions.

    Each change is queued in the outbox as an edit or assign whose key derives from (rule id,
    rule version, transaction id): re-running queues nothing new, a changed rule only the
    difference. `centsync writeback` (or the next refresh) sends them. Exit 2 for a rules file
    that cannot be used (the message says where), 7 when planned rows were rejected.

    Example: centsync rules pipelines/examples/rules.toml --dry-run
    """
    from centsync.pipelines.writeback.rules import apply_rules
    from centsync.pipelines.writeback.summary import utcnow
    from centsync.transform.rules import RulesError

    JSON_OUTPUT.set(as_json)
    try:
        run = apply_rules(settings().warehouse, rules_file, utcnow(), dry_run=dry_run)
    except RulesError as e:
        raise click.UsageError(str(e)) from None
    code = errors.REJECTED if run.rejected else errors.OK
    finish(run, as_json, lambda: render_writeback.rules(run), exit_code=code)
