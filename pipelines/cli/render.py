"""Everything the `centsync` commands print for people (the `--json` objects are the commands')."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.invocation import command, runnable, standing
from centsync.transform.money import cents_text

if TYPE_CHECKING:
    from centsync.pipelines.cli.refresh import RefreshRun
    from centsync.pipelines.results import (
        Difference,
        FleetResult,
        ReconcileResult,
        RefreshOutbox,
        RefreshResult,
        RejectedRow,
        ScheduleResult,
        StatusOutbox,
        StatusResult,
        WritebackResult,
    )

from centsync.pipelines.outputs.verdict_words import VERDICT_WORDS, refresh_headline

VERDICT_COLOUR = {"agree": "green", "explained": "yellow", "differ": "red"}


def echo(message: Any = None, *, err: bool = False) -> None:
    """click.echo, with every `centsync ...` in the text as the person runs it from where they
    stand (`invocation.runnable`: `.venv/bin/centsync ...` when `centsync` is not on the PATH)."""
    click.echo(runnable(message) if isinstance(message, str) else message, err=err)


def warn(text: str) -> None:
    """A warning line, in yellow."""
    echo(click.style(f"Warning: {text}", fg="yellow"))


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
    echo("\n".join(lines), err=True)


def refresh_summary(
    run: RefreshRun, warehouse: Path, *, with_verdict: bool = True, verbose: bool = False
) -> None:
    """A refresh for a person: one line first (what changed, how long, whether every number
    matches the app), then only what needs reading (rejected rows, write-back, warnings, the
    differences); `verbose` adds the plan, the requests and where everything is."""
    result = run.refresh
    line = refresh_headline(result, with_verdict=with_verdict)
    colour = VERDICT_COLOUR.get(str(result.verdict)) if with_verdict else None
    echo(click.style(line, fg=colour, bold=colour is not None))
    if verbose:
        _refresh_details(run, warehouse)
    if result.rejected:
        echo(
            click.style(
                f"Rejected: {result.rejected} row(s) the service sent broke the API's documented types or "
                "rules and were not landed (the service's data to fix, not a bug in centsync): "
                "`centsync status` lists each with its reason (raw.rejected_rows keeps them).",
                fg="yellow",
            )
        )
    if result.backup:
        echo(f"Rebound: the previous warehouse is kept as {result.backup}")
    _writeback_line(result.writeback, result.outbox)
    for warning in result.warnings:
        warn(warning)
    if with_verdict and result.verdict and (verbose or result.verdict != "agree"):
        refresh_verdict(result)


def _refresh_details(run: RefreshRun, warehouse: Path) -> None:
    """`refresh --verbose`: the planner's choice, every row and request counted, the time's
    parts, the verification, and where the warehouse and the Dagster run are."""
    result = run.refresh
    rows, requests, took = result.rows, result.requests, result.durations
    click.echo(
        f"Plan: {result.mode}: {result.reason}.\n"
        f"Rows: {rows.total:,} transactions in the warehouse ({rows.new:,} new, {rows.updated:,} "
        f"updated, {rows.removed:,} removed); {rows.changed:,} rows of every entity changed "
        f"(accounts, settings and the service's figures too), {rows.landed:,} landed, "
        f"{rows.rejected:,} rejected.\n"
        f"Requests: {requests.total:,} (the fewest that could read the rows read, at 200 a "
        f"page: {requests.floor:,}; {requests.retries} retried); months checked "
        f"{result.months_checked}, windows re-read {len(result.months_reread)}, drift re-reads "
        f"{result.rereads}.\n"
        f"Time: {took.seconds:.2f} s from the refresh's start to its data, marts and "
        f"reconciliation ready (reading and loading {took.refresh_seconds:.2f} s, marts and "
        f"reconciliation {took.reconcile_seconds:.2f} s): the figure `centsync status` shows."
    )
    verification = result.verification
    if verification.months or verification.oldest_verified:
        click.echo(
            f"Verification: {verification.months} month(s) re-read because they were "
            f"verified longest ago; the oldest verification is now {verification.oldest_verified or 'none'}."
        )
    click.echo(f"Warehouse: {warehouse}   Dagster run: {run.run_id}")


def fleet(result: FleetResult) -> None:
    """`refresh --all` for a person: one row per owner (its verdict, rows, requests, seconds and
    the error that stopped it), then the count of owners that agree and failed."""
    from tabulate import tabulate  # Dagster's own table printer

    rows = [
        [
            r.owner,
            r.verdict or f"failed (exit {r.exit_code})",
            f"{r.rows:,}",
            f"{r.requests:,}",
            f"{r.seconds:.1f}",
            r.error,
        ]
        for r in result.owners.values()
    ]
    headers = ["owner", "verdict", "rows", "requests", "seconds", "error"]
    if not any(r.error for r in result.owners.values()):
        headers, rows = headers[:-1], [r[:-1] for r in rows]
    align = ("left", "left", "right", "right", "right", "left")
    echo(tabulate(rows, headers, colalign=align, disable_numparse=True))
    echo(
        f"\n{len(result.owners)} owners: {result.agree} agree, {result.failed} failed "
        f"({result.seconds:.1f} s)."
    )


def refresh_plan(plan: dict[str, Any]) -> None:
    """`refresh --plan`: what the refresh would read and prove, and its request estimate."""
    echo(
        f"Refresh plan ({plan['mode']}: {plan['reason']}); the service's today is "
        f"{plan['today']}, the hot window starts {plan['hot_window_from']}.\n"
        f"Nothing was read or written: {plan['requests_spent']} request(s) spent to learn that."
    )
    if plan["parts"]:
        echo(f"  {'part':<12} {'from':<10} {'to':<10} {'rows':>9} {'read':>6} {'prove':>7}  choice")
        for p in plan["parts"]:
            read = "-" if p["read_cost"] is None else f"{p['read_cost']:.0f}"
            echo(
                f"  {p['part']:<12} {p['from'] or 'open':<10} {p['to']:<10} {p['rows']:>9,} "
                f"{read:>6} {p['prove_cost']:>7.1f}  {p['choice']}"
            )
        echo(f"  hot window: {plan['hot_rows']:,} rows, always re-read")
    echo(
        f"Estimate: about {plan['estimate']} requests if nothing differs "
        f"(re-reading everything: {plan['reread_everything']})."
    )


def refresh_verdict(result: RefreshResult) -> None:
    """The verdict of the refresh's reconciliation, with its first differences."""
    recon = result.reconciliation
    verdict(
        str(result.verdict),
        checked=recon.checked,
        explained=recon.explained,
        differ=recon.differ,
        differences=recon.differences,
        unavailable=recon.unavailable,
    )


def _writeback_line(wb: WritebackResult | None, outbox: RefreshOutbox) -> None:
    """What the refresh's write-back step did, when it did anything or the outbox holds rows."""
    states = outbox.states or {}
    if (wb is not None and wb.plan) or any(states.values()):
        sent = wb.sent if wb else 0
        rejected = wb.rejected + wb.rejected_by_service if wb else 0
        echo(
            f"Write-back: {sent} sent, {rejected} "
            f"rejected, {outbox.confirmed} confirmed by this refresh; outbox "
            + ", ".join(f"{k} {v}" for k, v in states.items() if v)
        )


def verdict(
    verdict: str,
    *,
    checked: int,
    explained: int,
    differ: int,
    differences: list[Difference],
    limit: int = 10,
    unavailable: int = 0,
) -> None:
    """The verdict first, in words and colour, then the differences narrowest first; checks
    whose service side could not be read are counted apart, never as agreeing."""
    head = click.style(f"Reconciliation: {verdict.upper()}", fg=VERDICT_COLOUR[verdict], bold=True)
    counted = f"{checked} checks, {explained} explained, {differ} differ"
    if unavailable:
        counted = (
            f"{checked} numbers proved, {unavailable} could not be (the service's answers do not "
            "give them or could not be read; recon.results, status 'unavailable', says why), "
            f"{explained} explained, {differ} differ"
        )
    echo(f"{head}: {VERDICT_WORDS[verdict]} ({counted}).")
    if not differences:
        return
    echo(
        f"  {'status':<9} {'check':<22} {'scope':<28} {'local':>14} {'server':>14} {'difference':>12}"
    )
    for d in differences[:limit]:
        echo(
            f"  {d.status:<9} {d.check:<22} {str(d.scope)[:28]:<28} "
            f"{cents_text(d.local_cents):>14} {cents_text(d.server_cents):>14} {cents_text(d.difference_cents):>12}"
        )
        if d.explanation:
            echo(f"            {d.explanation}")
    if len(differences) > limit:
        echo(f"  ... and {len(differences) - limit} more (recon.results)")


def reconciliation(result: ReconcileResult, run_id: str) -> None:
    """`centsync reconcile`: the verdict, the differences, the rows behind them, the ids."""
    verdict(
        result.verdict,
        checked=result.checked - result.unavailable,
        explained=result.explained,
        differ=result.differ,
        differences=result.differences,
        limit=25,
        unavailable=result.unavailable,
    )
    for r in result.row_differences[:10]:
        echo(
            f"  row {r.kind:<11} {r.entity:<12} {r.id}  month {r.month or '-'}"
            + (f"  fields {r.fields}" if r.fields else "")
        )
    echo(f"Reconciliation {result.recon_id} of refresh {result.refresh_id}; Dagster run {run_id}")


def status(info: StatusResult) -> None:
    """`centsync status`: the warehouse, its source, the last refresh, counts, the verdict."""
    src = info.source
    echo(f"Warehouse: {info.warehouse} ({info.size_mb} MB)")
    echo(
        f"Source:    {src.base_url if src else 'not bound yet'}"
        + (
            f"  owner {src.account_id}, {src.currency}, {src.timezone}"
            if src and src.account_id
            else ""
        )
    )
    _status_history(info)
    _status_outbox(info.outbox)
    rejected_rows(info.rejected, limit=20)
    for warning in info.warnings:
        warn(warning)
    echo("Rows: " + ", ".join(f"{t} {n:,}" for t, n in info.tables.items()))


def rejected_rows(rows: list[RejectedRow], limit: int | None = None) -> None:
    """Each row set aside that still is, with its source and reason and whose it is to fix
    (`status`: the first `limit`; `writeback --rejected`: all)."""
    if not rows:
        if limit is None:
            echo("Set aside: nothing (no row is rejected, refused or waiting for you).")
        return
    by_refresh = sum(1 for r in rows if r.origin == "refresh")
    echo(
        f"Set aside: {len(rows)} row(s): {by_refresh} the service sent broken (the latest "
        f"refresh rejected them), {len(rows) - by_refresh} of the write-back not posted"
    )
    for r in rows[:limit]:
        refused = r.origin == "writeback" and not r.reason.startswith("not sent")
        label = "attention" if r.state == "needs_attention" else "refused" if refused else r.state
        echo(f"  {click.style(f'{label:<9}', fg='red')} {r.source}: {r.reason}")
        echo(f"  {'':<9} whose: {r.whose}")
    if limit is not None and len(rows) > limit:
        echo(f"  ... and {len(rows) - limit} more: `centsync writeback --rejected` lists all")


def _status_history(info: StatusResult) -> None:
    """The last refresh, the synced range, verification and the latest verdict."""
    last = info.last_refresh
    if last:
        # a refresh that stopped early recorded no counts: say nothing rather than "None"
        # the refresh's one duration, as its summary line prints it
        counts = [f"{last.seconds:.2f} s"] if last.seconds is not None else []
        if last.requests_total is not None:
            counts.append(f"{last.requests_total} requests")
        tx = (last.transactions_new, last.transactions_updated, last.transactions_removed)
        if None not in tx:
            new, updated, removed = (int(n or 0) for n in tx)
            counts.append(
                f"{new:,} new, {updated:,} updated, {removed:,} removed transactions"
                if new + updated + removed
                else "no transaction changed"
            )
        elif last.rows_changed is not None:  # recorded before transactions were counted
            counts.append(f"{last.rows_changed} rows changed (every entity)")
        echo(
            f"Last refresh: {last.status} {last.mode} at {last.started_at}"
            + (f" ({', '.join(counts)})" if counts else "")
            + (f"; error: {last.error}" if last.error else "")
        )
    rng = info.synced_range
    if rng:
        echo(
            f"Transactions: {rng.transactions:,} booked {rng.first} .. {rng.last} ({rng.months} months)"
        )
    ver = info.verification
    if ver and ver.oldest_verified_at:
        echo(
            f"Verification: oldest month re-read {ver.oldest_month} at "
            f"{ver.oldest_verified_at[:16]} (service clock); every month is re-read "
            "within the verification period (docs/refresh.md)"
        )
    recon = info.reconciliation
    if recon:
        colour = VERDICT_COLOUR.get(recon.verdict, "white")
        echo(
            "Reconciliation: "
            + click.style(recon.verdict.upper(), fg=colour, bold=True)
            + f" at {recon.ran_at} ({recon.checked} checks, {recon.differ} differ)"
        )


def _status_outbox(outbox: StatusOutbox | None) -> None:
    echo(
        "Outbox: "
        + (
            "empty (drop CSV files into the inbox, then `centsync writeback`)"
            if not outbox or not any(outbox.states.values())
            else ", ".join(f"{k} {v}" for k, v in outbox.states.items())
            + (
                f"; waiting in the inbox: {outbox.inbox_files} file(s)"
                if outbox.inbox_files
                else ""
            )
        )
    )
    if outbox and outbox.inbox:
        echo(f"Inbox: {outbox.inbox}")


def query(title: str, sql: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """One of the demo's example queries, as the `centsync sql` command that runs it (as the
    person runs it from where they stand), and what it returned."""
    echo(f"\n-- {title}\n{command('sql ' + _shell_quoted(' '.join(sql.split())))}")
    echo("  " + " | ".join(columns))
    for r in rows:
        echo("  " + " | ".join(str(v) for v in r))


def _shell_quoted(text: str) -> str:
    """`text` as one shell word: in double quotes when nothing in it is special there (SQL
    reads best so), else as `shlex.quote` has it."""
    import shlex

    return f'"{text}"' if not set(text) & set('"$`\\!') else shlex.quote(text)


# the demo's commands for a person, each runnable as printed (`invocation.command`)
DEMO_COMMANDS = (
    ("sql", "a SQL workbench on it: tables, comments, autocomplete"),
    (
        'sql "SELECT count(*) AS transactions FROM core.transactions"',
        "one query's result (--format csv|json|markdown|parquet)",
    ),
    ("export", "Parquet files and a manifest beside it (--format beancount: a ledger)"),
)
DEMO_NEXT = (
    (
        "notebook spending",
        "an analyst notebook on it (also net_worth, reconciliation, writeback, recurring)",
    ),
    ("status", "what it holds, and every row set aside with its reason"),
    ("refresh", "bring it in step with the service again"),
)


def _commands(lines: tuple[tuple[str, str], ...]) -> None:
    """Commands, one a line, as the person runs them, each with what it does."""
    shown = [command(args) for args, _ in lines]
    width = max(len(c) for c in shown) + 3
    for c, (_, what) in zip(shown, lines, strict=True):
        echo(f"  {c:<{width}}{what}")


def demo_intro(path: Path) -> None:
    """Where the demo's warehouse is and how to open it."""
    echo(f"\nThe warehouse is {path}. Open it read-only (even while a refresh runs):")
    _commands(DEMO_COMMANDS)


def demo_outro(report_path: Any) -> None:
    """Where the demo's report is, and what to run next (each command runs as printed)."""
    if report_path:
        echo(
            f"\nThe reconciliation report (open it in a browser, no network needed): {report_path}"
        )
    echo(f"Next, from {standing()}:")
    _commands(DEMO_NEXT)


def tour(
    me: dict[str, Any],
    accounts: list[dict[str, Any]],
    page: dict[str, Any],
    net_worth: dict[str, Any] | None,
    spending: Any,
) -> None:
    """`centsync tour`: the sandbox as a client sees it (the answers the API document leaves "not
    shown" read as a refresh reads them, or said to be in a shape of their own)."""
    echo(
        f"\nIdentity: owner {me['account_id']}, scopes {', '.join(me['scopes'])}, key expires {me['key']['expires_at']}"
    )
    echo(
        f"Rate limit: {me['rate_limit']['minute_limit']}/minute, {me['rate_limit']['hour_limit']}/hour"
    )
    echo("\nAccounts:")
    for a in accounts:
        echo(f"  {a['name']:<24} {a['type']:<11} {money(a['balance']):>14}")
    echo(f"\nTransactions (page 1 of {page['pages']}, {page['total']} in all):")
    for t in page["data"]:
        echo(f"  {t['booked_at']}  {t['concept'][:30]:<30} {t['type']:<9} {money(t['amount']):>12}")
    nw = net_worth
    if nw is None or nw.get("total") is None:
        echo("\nNet worth: its answer does not add up to the accounts' balances here.")
    else:
        assets, owed = nw.get("assets"), nw.get("liabilities")
        parts = (
            f" (assets {money(assets)}, liabilities {money(owed)})"
            if assets is not None and owed is not None
            else ""
        )
        echo(f"\nNet worth: {money(nw['total'])}{parts}")
    rows = spending.get("data") if isinstance(spending, dict) else None
    if not isinstance(rows, list) or not all(
        isinstance(r, dict) and {"label", "amount"} <= r.keys() for r in rows
    ):
        echo(
            "\nSpending by category: answered in a shape of its own; `centsync refresh` learns it "
            "from the rows (`centsync doctor` shows how)."
        )
        return
    echo(f"\nSpending by category, {spending.get('from')} to {spending.get('to')}:")
    for row in rows[:8]:
        echo(f"  {row['label']!s:<16} {row.get('count')!s:>4} tx {money(row['amount']):>12}")


def schedules(result: ScheduleResult) -> None:
    """`centsync schedule list`: the time zone, then each schedule: on or off, its next run,
    its cron line and the setting that moves it, what it does."""
    where = (
        "the service's time zone, from its settings"
        if result.timezone_from == "service"
        else "UTC until the first refresh learns the service's time zone"
    )
    echo(f"Times are in {result.timezone} ({where}).")
    for s in result.schedules:
        state = "on " if s.on else "off"
        nxt = (
            dt.datetime.fromisoformat(s.next_run).strftime("%a %Y-%m-%d %H:%M")
            if s.next_run
            else "-"
        )
        echo(f"{state}  {s.name:<22} next {nxt}  {s.cron:<14} ({s.setting})")
        echo(f"     {s.description}")
    daemon = "running" if result.daemon_running else "not running (`centsync daemon`)"
    echo(f"Dagster home: {result.dagster_home}; daemon {daemon}.")
