"""Everything the `centsync` commands print for people (the `--json` objects are the commands')."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from centsync.pipelines.cli import failures as errors
from centsync.transform.money import cents_text

VERDICT_COLOUR = {"agree": "green", "explained": "yellow", "differ": "red"}
VERDICT_WORDS = {
    "agree": "every number agrees with the service's own, to the cent",
    "explained": "every difference from the service's own numbers is explained",
    "differ": "differences from the service's own numbers are not explained",
}


def warn(text: str) -> None:
    """A warning line, in yellow."""
    click.echo(click.style(f"Warning: {text}", fg="yellow"))


def money(cents: int) -> str:
    """Cents as an amount in euros."""
    return f"{cents_text(cents)} EUR"


def failure(f: errors.Failure, log: Path | None, *, debug: bool) -> None:
    """An expected failure on stderr: the headline, what to do, where the whole log is."""
    head = click.style(f"Error: {f.kind.headline}", fg="red", bold=True)
    lines = [f"{head}: {f.message}"]
    if f.kind.todo:
        lines.append(f"  What to do: {f.kind.todo}")
    where = f"  Full log: {log}" if log else ""
    if f.run_id:
        where += f" (Dagster run {f.run_id}; `centsync ui` shows it)"
    if where:
        lines.append(where)
    if debug:
        lines.append(f.detail)
    click.echo("\n".join(lines), err=True)


def refresh_summary(meta: dict[str, Any], warehouse: Path) -> None:
    """A refresh's summary: rows, requests, verification, rejections, write-back, verdict."""
    report = meta.get("report") or {}
    click.echo(
        f"Refresh done in {meta['seconds']} s ({meta.get('mode', '')}): {meta.get('rows', 0):,} transactions in the warehouse, "
        f"{meta.get('rows_changed', 0):,} rows changed, {(report.get('rows') or {}).get('rejected', 0)} rejected.\n"
        f"Requests: {meta.get('requests_total', 0)} (ceil(rows read / 200) = {meta.get('requests_floor', 0)}); "
        f"months checked {meta.get('months_checked', 0)}, windows re-read {meta.get('months_reread', 0)}, drift re-reads {meta.get('rereads', 0)}.\n"
        f"Warehouse: {warehouse}   Dagster run: {meta.get('run_id')}"
    )
    verification = report.get("verification") or {}
    if verification.get("months") or verification.get("oldest_verified"):
        click.echo(
            f"Verification: {verification.get('months', 0)} month(s) re-read because they were "
            f"verified longest ago; the oldest verification is now {verification.get('oldest_verified') or 'none'}."
        )
    rejected = (report.get("rows") or {}).get("rejected", 0)
    if rejected:
        click.echo(
            click.style(
                f"Rejected: {rejected} row(s) the service sent broke the API's documented types or "
                "rules and were not landed; each is in raw.rejected_rows with its reason "
                "(SELECT entity, reason, record FROM raw.rejected_rows).",
                fg="yellow",
            )
        )
    if report.get("backup"):
        click.echo(f"Rebound: the previous warehouse is kept as {report['backup']}")
    _writeback_line(meta.get("writeback") or {}, report.get("outbox") or {})
    for warning in report.get("warnings") or []:
        warn(warning)
    if meta.get("verdict"):
        verdict(
            meta["verdict"],
            checked=meta.get("recon_checked", 0),
            explained=meta.get("recon_explained", 0),
            differ=meta.get("recon_differ", 0),
            differences=meta.get("differences") or [],
        )


def _writeback_line(wb: dict[str, Any], outbox: dict[str, Any]) -> None:
    """What the refresh's write-back step did, when it did anything or the outbox holds rows."""
    states = outbox.get("states") or {}
    if wb.get("plan") or any(states.values()):
        click.echo(
            f"Write-back: {wb.get('sent', 0)} sent, {wb.get('rejected', 0) + wb.get('rejected_by_service', 0)} "
            f"rejected, {outbox.get('confirmed', 0)} confirmed by this refresh; outbox "
            + ", ".join(f"{k} {v}" for k, v in states.items() if v)
        )


def verdict(
    verdict: str,
    *,
    checked: int,
    explained: int,
    differ: int,
    differences: list[dict[str, Any]],
    limit: int = 10,
) -> None:
    """The verdict first, in words and colour, then the differences narrowest first."""
    head = click.style(f"Reconciliation: {verdict.upper()}", fg=VERDICT_COLOUR[verdict], bold=True)
    click.echo(
        f"{head}: {VERDICT_WORDS[verdict]} ({checked} checks, {explained} explained, {differ} differ)."
    )
    if not differences:
        return
    click.echo(
        f"  {'status':<9} {'check':<22} {'scope':<28} {'local':>14} {'server':>14} {'difference':>12}"
    )
    for d in differences[:limit]:
        click.echo(
            f"  {d['status']:<9} {d['check']:<22} {str(d['scope'])[:28]:<28} "
            f"{cents_text(d['local_cents']):>14} {cents_text(d['server_cents']):>14} {cents_text(d['difference_cents']):>12}"
        )
        if d.get("explanation"):
            click.echo(f"            {d['explanation']}")
    if len(differences) > limit:
        click.echo(f"  ... and {len(differences) - limit} more (recon.results)")


def reconciliation(report: dict[str, Any], run_id: str) -> None:
    """`centsync reconcile`: the verdict, the differences, the rows behind them, the ids."""
    verdict(
        report["verdict"],
        checked=report["checked"],
        explained=report["explained"],
        differ=report["differ"],
        differences=report["differences"],
        limit=25,
    )
    for r in report["row_differences"][:10]:
        click.echo(
            f"  row {r['kind']:<11} {r['entity']:<12} {r['id']}  month {r['month'] or '-'}"
            + (f"  fields {r['fields']}" if r["fields"] else "")
        )
    click.echo(
        f"Reconciliation {report['recon_id']} of refresh {report['refresh_id']}; Dagster run {run_id}"
    )


def writeback(report: dict[str, Any]) -> None:
    """The write-back's plan and result, for people."""
    _writeback_plan(report)
    for f in report.get("files") or []:
        if f.get("moved_to"):
            extra = f"; reasons in {f['errors_file']}" if f.get("errors_file") else ""
            click.echo(f"File {f['file']}: moved to {f['moved_to']}{extra}")
    if not report.get("dry_run"):
        _writeback_counts(report)
    counts = report.get("counts") or {}
    click.echo(
        "Outbox: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f"  ({report.get('outbox')})"
    )
    for w in report.get("warnings") or []:
        warn(w)
    if counts.get("needs_attention"):
        click.echo(
            "Rows that need attention: SELECT id, reason FROM ops.outbox WHERE state = 'needs_attention' "
            "(in the outbox file, or the warehouse after the next refresh)."
        )


def _writeback_plan(report: dict[str, Any]) -> None:
    """One line per planned row (duplicates shown only in a dry run), at most 200."""
    plan = report.get("plan") or []
    if report.get("dry_run"):
        click.echo("Write-back plan (dry run: nothing is written to the outbox, moved or sent):")
    shown = [p for p in plan if report.get("dry_run") or p["action"] != "duplicate"]
    for p in shown[:200]:
        where = f"{p['source']}:{p['line']}"
        colour = {"send": "green", "rejected": "red", "conflict": "yellow"}.get(p["action"])
        action = click.style(f"{p['action']:<9}", fg=colour)
        what = p["reason"] if p["action"] in ("rejected", "conflict") else _request_text(p)
        click.echo(f"  {where:<28} {p['operation'] or '-':<6} {action} {what}")
    if len(shown) > 200:
        click.echo(f"  ... and {len(shown) - 200} more (--json lists them all)")


def _writeback_counts(report: dict[str, Any]) -> None:
    """What was read, queued and sent."""
    queued, dup = report.get("queued", 0), report.get("duplicates", 0)
    click.echo(
        f"Read: {queued} new request(s) queued, {dup} already in the outbox (not sent again), "
        f"{report.get('rejected', 0)} rejected before sending."
    )
    sent, replayed, found = (
        report.get("sent", 0),
        report.get("replayed", 0),
        report.get("found_by_lookup", 0),
    )
    click.echo(
        f"Sent: {sent} accepted by the service ({replayed} were replays of an earlier attempt), "
        f"{found} found on the service instead of resent, "
        f"{report.get('rejected_by_service', 0)} refused by the service, "
        f"{report.get('needs_attention', 0) + report.get('conflicts', 0)} need attention."
    )


def _request_text(p: dict[str, Any]) -> str:
    body = p.get("body") or {}
    if p["operation"] == "create":
        return (
            f"{p['request']}  {cents_text(body.get('amount'))} {body.get('concept', '')!r} "
            f"on {body.get('booked_at')}"
        )
    return f"{p['request']}  {body}"


def status(info: dict[str, Any]) -> None:
    """`centsync status`: the warehouse, its source, the last refresh, counts, the verdict."""
    src = info["source"] or {}
    click.echo(f"Warehouse: {info['warehouse']} ({info['size_mb']} MB)")
    click.echo(
        f"Source:    {src.get('base_url') or 'not bound yet'}"
        + (
            f"  owner {src['account_id']}, {src.get('currency')}, {src.get('timezone')}"
            if src.get("account_id")
            else ""
        )
    )
    _status_history(info)
    _status_outbox(info["outbox"])
    for warning in info["warnings"]:
        warn(warning)
    click.echo("Rows: " + ", ".join(f"{t} {n:,}" for t, n in info["tables"].items()))


def _status_history(info: dict[str, Any]) -> None:
    """The last refresh, the synced range, verification and the latest verdict."""
    last = info["last_refresh"]
    if last:
        click.echo(
            f"Last refresh: {last['status']} {last['mode']} at {last['started_at']} "
            f"({last['seconds']} s, {last['requests_total']} requests, {last['rows_changed']} rows changed)"
            + (f"; error: {last['error']}" if last.get("error") else "")
        )
    rng = info["synced_range"]
    if rng:
        click.echo(
            f"Transactions: {rng['transactions']:,} booked {rng['first']} .. {rng['last']} ({rng['months']} months)"
        )
    ver = info.get("verification")
    if ver and ver.get("oldest_verified_at"):
        click.echo(
            f"Verification: oldest month re-read {ver['oldest_month']} at "
            f"{str(ver['oldest_verified_at'])[:16]} (service clock); every month is re-read "
            "within the verification period (docs/refresh.md)"
        )
    recon = info["reconciliation"]
    if recon:
        colour = VERDICT_COLOUR.get(recon["verdict"], "white")
        click.echo(
            "Reconciliation: "
            + click.style(recon["verdict"].upper(), fg=colour, bold=True)
            + f" at {recon['ran_at']} ({recon['checked']} checks, {recon['differ']} differ)"
        )


def _status_outbox(outbox: dict[str, Any] | None) -> None:
    click.echo(
        "Outbox: "
        + (
            "empty (drop CSV files into the inbox, then `centsync writeback`)"
            if not outbox or not any(outbox["states"].values())
            else ", ".join(f"{k} {v}" for k, v in outbox["states"].items())
            + (
                f"; waiting in the inbox: {outbox['inbox_files']} file(s)"
                if outbox["inbox_files"]
                else ""
            )
        )
    )


def query(title: str, sql: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """One of the demo's example queries and what it returned."""
    click.echo(f"\n-- {title}\n{' '.join(sql.split())}")
    click.echo("  " + " | ".join(columns))
    for r in rows:
        click.echo("  " + " | ".join(str(v) for v in r))


def demo_intro(path: Path) -> None:
    """Where the demo's warehouse is and how to open it."""
    click.echo(f"\nThe warehouse is {path}. Open it read-only (even while a refresh runs):")
    click.echo(
        f"  duckdb -readonly {path}     or     python -c \"import duckdb; duckdb.connect('{path}', read_only=True)\""
    )


def demo_outro(report_path: Any) -> None:
    """Where the demo's report is, and the notebooks."""
    if report_path:
        click.echo(
            f"\nThe reconciliation report (open it in a browser, no network needed): {report_path}"
        )
    click.echo(
        "Notebooks on this warehouse: centsync notebook spending (net_worth, reconciliation, writeback)"
    )


def tour(
    me: dict[str, Any],
    accounts: list[dict[str, Any]],
    page: dict[str, Any],
    net_worth: dict[str, Any],
    spending: dict[str, Any],
) -> None:
    """`centsync tour`: the sandbox as a client sees it."""
    click.echo(
        f"\nIdentity: owner {me['account_id']}, scopes {', '.join(me['scopes'])}, key expires {me['key']['expires_at']}"
    )
    click.echo(
        f"Rate limit: {me['rate_limit']['minute_limit']}/minute, {me['rate_limit']['hour_limit']}/hour"
    )
    click.echo("\nAccounts:")
    for a in accounts:
        click.echo(f"  {a['name']:<24} {a['type']:<11} {money(a['balance']):>14}")
    click.echo(f"\nNewest transactions (page 1 of {page['pages']}, {page['total']} in all):")
    for t in page["data"]:
        click.echo(
            f"  {t['booked_at']}  {t['concept'][:30]:<30} {t['type']:<9} {money(t['amount']):>12}"
        )
    nw = net_worth
    click.echo(
        f"\nNet worth: {money(nw['total'])} (assets {money(nw['assets'])}, liabilities {money(nw['liabilities'])})"
    )
    click.echo(
        f"\nSpending by category, {spending['from']} to {spending['to']}: {money(spending['total'])}"
    )
    for row in spending["data"][:8]:
        click.echo(f"  {row['label']:<16} {row['count']:>4} tx {money(row['amount']):>12}")
