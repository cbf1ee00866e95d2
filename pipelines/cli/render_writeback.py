"""What the write-back commands print for a person: a write-back's plan and result, a rules run,
bank files imported (`render.py` prints the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from centsync.pipelines.cli.render import echo, money, warn
from centsync.transform.money import cents_text

if TYPE_CHECKING:
    from centsync.pipelines.results import (
        ImportResult,
        PlanEntry,
        RulesResult,
        WritebackResult,
    )


def writeback(result: WritebackResult) -> None:
    """The write-back's plan and result, for people."""
    _writeback_plan(result)
    for f in result.files:
        if f.get("fate"):
            echo(f"File {f['file']}: {f['fate']}")
        elif f.get("moved_to"):
            extra = f"; reasons in {f['errors_file']}" if f.get("errors_file") else ""
            echo(f"File {f['file']}: moved to {f['moved_to']}{extra}")
    if result.inbox:
        echo(f"Inbox: {result.inbox}")
    if not result.dry_run:
        _writeback_counts(result)
    echo(
        "Outbox: "
        + ", ".join(f"{k} {v}" for k, v in result.counts.items())
        + f"  ({result.outbox})"
    )
    for w in result.warnings:
        warn(w)
    if result.counts.get("needs_attention"):
        echo(
            "Rows that need attention: `centsync writeback --rejected` lists each with its file, "
            "line and reason (ops.outbox holds them too)."
        )


def _writeback_plan(result: WritebackResult) -> None:
    """One line per planned row (duplicates shown only in a dry run), at most 200."""
    if result.dry_run:
        echo("Write-back plan (dry run: nothing is written to the outbox, moved or sent):")
    shown = [p for p in result.plan if result.dry_run or p["action"] != "duplicate"]
    for p in shown[:200]:
        where = f"{p['source']}:{p['line']}"
        colour = {"send": "green", "rejected": "red", "conflict": "yellow", "warn": "yellow"}
        action = click.style(f"{p['action']:<9}", fg=colour.get(p["action"]))
        what = (p["reason"] or "") if p["action"] in ("rejected", "conflict") else _request_text(p)
        if p["action"] == "warn":
            what += f"\n  {'':<28} {'':<6} {'':<9} {p['reason']}"
        echo(f"  {where:<28} {p['operation'] or '-':<6} {action} {what}")
    if len(shown) > 200:
        echo(f"  ... and {len(shown) - 200} more (--json lists them all)")


def _writeback_counts(result: WritebackResult) -> None:
    """What was read, queued and sent."""
    echo(
        f"Read: {result.queued} new request(s) queued, {result.duplicates} already in the outbox "
        f"(not sent again), {result.rejected} rejected before sending."
    )
    echo(
        f"Sent: {result.sent} accepted by the service ({result.replayed} were replays of an earlier attempt), "
        f"{result.found_by_lookup} found on the service instead of resent, "
        f"{result.rejected_by_service} refused by the service, "
        f"{result.needs_attention + result.conflicts} need attention."
    )
    for r in result.refused:
        label = "refused" if r["state"] == "rejected" else "attention"
        echo(
            f"  {click.style(f'{label:<9}', fg='red')} {r['source_name']}:{r['line']} "
            f"{r['request']}: {r['reason']}"
            + (f" (in {r['errors_file']})" if r.get("errors_file") else "")
        )


def _request_text(p: PlanEntry) -> str:
    body = p.get("body") or {}
    if p["operation"] == "create":
        return (
            f"{p['request']}  {cents_text(body.get('amount'))} {body.get('concept', '')!r} "
            f"on {body.get('booked_at')}"
        )
    return f"{p['request']}  {body}"


def rules(run: RulesResult) -> None:
    """A rules run: each change, before and after, then what was queued."""
    dry = run.dry_run
    head = "Rules preview (dry run: nothing is written)" if dry else "Rules"
    echo(
        f"{head}: {run.rules_file}, {run.rules} rule(s) against "
        f"{run.transactions} transaction(s): {len(run.changes)} change(s)"
    )
    for c in run.changes[:200]:
        before = "(none)" if c["before"] is None else repr(c["before"])
        echo(
            f"  {c['rule']:<18} {c['booked_at']} {money(c['amount']):>11}  {c['concept'][:32]:<32} "
            f"{c['field']}: {before} -> {c['after']!r}"
        )
    if len(run.changes) > 200:
        echo(f"  ... and {len(run.changes) - 200} more (--json lists them all)")
    for p in run.plan:
        if p["action"] == "rejected":
            echo(f"  {click.style('rejected', fg='red')} {p['source']}:{p['line']} {p['reason']}")
    verb = "would queue" if dry else "queued"
    echo(
        f"{verb} {run.queued} request(s), {run.duplicates} already in the outbox, "
        f"{run.rejected} rejected"
        + ("" if dry or not run.queued else "; `centsync writeback` sends them")
    )
    if run.merchant_renames:
        click.echo(
            f"{run.merchant_renames} merchant name(s) from [merchants]"
            + (" (not kept: dry run)" if dry else ": shown from the next refresh or reconcile")
        )


def bank_import(result: ImportResult) -> None:
    """Bank files imported: per file, its rows new, already imported, held (with the row each
    may duplicate), pending (held) and superseded."""
    for f in result.files:
        echo(
            f"{f.file} ({f.format}): {f.rows} transaction(s): {len(f.new)} new, "
            f"{len(f.already_imported)} already imported, {len(f.held)} held as likely "
            f"duplicates, {len(f.pending)} pending (held), {len(f.superseded)} superseded"
        )
        for c in f.new[:200]:
            echo(f"  new   {_bank_row(c)}")
        for c in f.held:
            echo(f"  held  {_bank_row(c)}\n        {_candidate(c['candidate'])}")
        for c in f.pending:
            more = f"\n        {_candidate(c['candidate'])}" if c.get("candidate") else ""
            echo(f"  pending {_bank_row(c)}{more}")
        for c in f.superseded:
            by = c["by"]
            echo(
                f"  superseded {_bank_row(c)}\n        booked as {by['id']} on {by['booked_at']} "
                f"{by['concept'][:40]!r}: the pending row is not posted"
            )
        if f.inbox_file:
            echo(f"  into the inbox: {f.inbox_file}")
        if f.held_file:
            echo(
                f"  held: {f.held_file} (each row is the same account and amount as the row "
                "named, within a few days: move the file into the inbox to post them anyway)"
            )
        if f.pending_file:
            echo(
                f"  pending: {f.pending_file} (not booked yet: never posted; a later statement's "
                "booked entry replaces each)"
            )
    tail = (
        "dry run: nothing written"
        if result.dry_run
        else "`centsync writeback` (or the next refresh) posts them"
    )
    echo(f"Inbox: {result.inbox} ({tail})")


def _bank_row(c: dict[str, Any]) -> str:
    return f"{c['booked_at']} {c['amount']:>10} {c['concept'][:40]}  ({c['event_id']})"


def _candidate(c: dict[str, Any]) -> str:
    """The row a statement row may duplicate: what it is, its day, payee and id."""
    return f"likely the {c['kind']} row {c['booked_at']} {c['concept'][:40]!r} ({c['id']})"
