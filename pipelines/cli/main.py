"""The `centsync` command line."""

from __future__ import annotations

import gc
import json
import logging
import os
import sys
import time
import warnings
from contextlib import suppress
from pathlib import Path

import click

from centsync.pipelines.cli import failures as errors
from centsync.pipelines.cli.analysts import docs, notebook
from centsync.pipelines.cli.sandbox import embedded_api, sandbox, tour
from centsync.pipelines.cli.support import (
    _DEBUG,
    _JSON,
    _REBIND,
    EXAMPLE_QUERIES,
    EXIT_DIFFER,
    VERDICT_COLOUR,
    CentsyncGroup,
    _print_summary,
    _print_verdict,
    _warehouse_path,
    dagster_home,
    interruptible,
    print_writeback,
    run_job,
    run_refresh_job,
)


@click.group(cls=CentsyncGroup)
@click.version_option(package_name="centsync")
@click.option(
    "--debug", is_flag=True, help="Print the whole error chain (tracebacks) on a failure."
)
def main(debug: bool) -> None:
    """centsync: keep a personal-finance service's data in a local DuckDB warehouse."""
    _DEBUG.set(debug)
    # The client's own warnings (rate-limit waits, long backoffs) are lines of their own.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("centsync: %(message)s"))
    handler.setLevel(logging.DEBUG if debug else logging.WARNING)
    root = logging.getLogger("centsync")
    if not any(getattr(h, "_centsync_cli", False) for h in root.handlers):
        handler._centsync_cli = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    # Dagster flags beta parameters on every import; they are noise on a terminal.
    warnings.filterwarnings("ignore", module="dagster")
    warnings.filterwarnings("ignore", message=".*is currently in beta.*")


main.add_command(sandbox)
main.add_command(tour)
main.add_command(notebook)
main.add_command(docs)


@main.command()
@click.option("--full", is_flag=True, help="Re-read every month, whatever the fingerprints say.")
@click.option(
    "--hot", is_flag=True, help="Re-read only the hot window (what the hourly schedule does)."
)
@click.option(
    "--months",
    default="",
    help="Force-read months: 2024-03, 2024-01..2024-06, or 2024-01.. (to the current month).",
)
@click.option(
    "--rebind",
    is_flag=True,
    help="The warehouse holds another source's data: keep it as a backup, start a new one.",
)
@click.option(
    "--report", "with_report", is_flag=True, help="Write the HTML reconciliation report too."
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def refresh(
    full: bool, hot: bool, months: str, rebind: bool, with_report: bool, as_json: bool
) -> None:
    """Bring the warehouse exactly in step with the service, spending the fewest requests.

    Ends with the marts and their reconciliation against the service's own numbers.

    Example: centsync refresh --months 2024-01..2024-03 --json | jq .rows
    """
    from centsync.pipelines.refresh.run import parse_month_range

    _JSON.set(as_json)
    chosen = [
        name for name, on in (("--full", full), ("--hot", hot), ("--months", bool(months))) if on
    ]
    if len(chosen) > 1:
        raise click.UsageError(f"{' and '.join(chosen)} contradict each other: choose one.")
    if months:
        try:
            first, last = parse_month_range(months)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--months") from None
        months = f"{first}..{last}"
    mode = "full" if full else "hot" if hot else "auto"
    started = time.monotonic()
    token = _REBIND.set(rebind)
    try:
        with interruptible(), embedded_api():
            meta = run_refresh_job(mode, months, rebind=rebind, report=with_report)
    finally:
        _REBIND.reset(token)
    report = dict(meta.get("report") or {})
    report["run_id"] = meta.get("run_id")
    report["warehouse"] = str(_warehouse_path())
    if meta.get("writeback"):
        report["writeback"] = meta["writeback"]
    report.setdefault("durations", {})["total_seconds"] = round(time.monotonic() - started, 2)
    rejected = (report.get("rows") or {}).get("rejected", 0)
    if meta.get("report_path"):
        report["report_path"] = str(meta["report_path"])
    report["exit_code"] = (
        EXIT_DIFFER
        if report.get("verdict") == "differ"
        else errors.REJECTED
        if rejected
        else errors.OK
    )
    meta["seconds"] = report["durations"]["total_seconds"]
    if as_json:
        click.echo(json.dumps(report, default=str))
    else:
        _print_summary(meta)
        if meta.get("report_path"):
            click.echo(f"Report: {meta['report_path']}")
    if report["exit_code"]:
        raise SystemExit(report["exit_code"])


@main.command()
def demo() -> None:
    """The main job on the embedded sandbox: a full refresh, marts, reconciliation, queries."""
    from centsync.warehouse import connect_readonly, default_path

    started = time.monotonic()
    with embedded_api():
        # the README's example inbox file is posted too (write-back, with a read-write key)
        example = _seed_inbox_example()
        meta = run_refresh_job("full", report=True)
        if example is not None and example.exists():
            # a first demo: the write-back checks rows against a warehouse, so it waited for
            # this refresh; an incremental one posts them and reads them back
            meta = run_refresh_job("auto", report=True)
    meta["seconds"] = round(time.monotonic() - started, 2)
    verdict = meta.pop("verdict", None)
    _print_summary(meta)
    path = default_path()
    click.echo(f"\nThe warehouse is {path}. Open it read-only (even while a refresh runs):")
    click.echo(
        f"  duckdb -readonly {path}     or     python -c \"import duckdb; duckdb.connect('{path}', read_only=True)\""
    )
    con = connect_readonly(path)
    try:
        for title, sql in EXAMPLE_QUERIES:
            click.echo(f"\n-- {title}\n{' '.join(sql.split())}")
            res = con.execute(sql)
            cols = [d[0] for d in res.description]
            rows = res.fetchall()
            click.echo("  " + " | ".join(cols))
            for r in rows:
                click.echo("  " + " | ".join(str(v) for v in r))
    finally:
        con.close()
    if verdict:
        click.echo()
        _print_verdict(
            verdict,
            checked=meta.get("recon_checked", 0),
            explained=meta.get("recon_explained", 0),
            differ=meta.get("recon_differ", 0),
            differences=meta.get("differences") or [],
        )
    if meta.get("report_path"):
        click.echo(
            f"\nThe reconciliation report (open it in a browser, no network needed): {meta['report_path']}"
        )
    click.echo(
        "Notebooks on this warehouse: centsync notebook spending (net_worth, reconciliation, writeback)"
    )
    if verdict == "differ":
        raise SystemExit(EXIT_DIFFER)


def _seed_inbox_example() -> Path | None:
    """Copy the example inbox file into the inbox unless it was processed before."""
    from importlib import resources

    from centsync.pipelines.writeback.run import inbox_path

    inbox = inbox_path(_warehouse_path())
    name = "cash-receipts.csv"
    if any((inbox / d / name).exists() for d in ("done", "rejected")):
        return None
    inbox.mkdir(parents=True, exist_ok=True)
    target = inbox / name
    source = resources.files("centsync.pipelines").joinpath("examples", name)
    target.write_bytes(source.read_bytes())
    return target


@main.command("report")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write it (default: centsync-report.html next to the warehouse).",
)
@click.option("--open", "open_it", is_flag=True, help="Open it in the default browser.")
def report_command(out: Path | None, open_it: bool) -> None:
    """Write the reconciliation report: one HTML file that needs no network to view.

    It shows the latest reconciliation's verdict, the differences and the rows behind them,
    charts of spending, net worth and cash flow, and a per-month table.

    Example: centsync report --out /tmp/report.html
    """
    from centsync.pipelines.outputs import report

    path = report.write(_warehouse_path(), out)
    click.echo(f"Report: {path} ({path.stat().st_size / 2**20:.1f} MB)")
    if open_it:
        import webbrowser

        webbrowser.open(path.as_uri())


@main.command("reconcile")
@click.option(
    "--live",
    is_flag=True,
    help="Compare with the service's aggregates fetched now, every synced month on its own "
    "(6 requests plus 3 a month).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def reconcile_command(live: bool, as_json: bool) -> None:
    """Rebuild the marts and prove them against the service's own numbers, to the cent.

    Without --live it compares with the aggregates the latest refresh landed (no request).
    Exit 0 when everything agrees or every difference is explained, 1 otherwise.

    Example: centsync reconcile --json | jq .verdict
    """
    _JSON.set(as_json)
    from centsync.warehouse import connect_readonly, default_path

    started = time.monotonic()
    if live:
        with embedded_api():
            meta = run_job("reconcile_live_job", "recon/results")
    else:
        meta = run_job("reconcile_job", "recon/results")
    con = connect_readonly(default_path())
    try:
        results = con.execute(
            """
            SELECT "check", scope, subject, label, from_date::VARCHAR AS from_date,
                   to_date::VARCHAR AS to_date,
                   local_cents, server_cents, difference_cents, local_count, server_count,
                   status, explanation
            FROM recon.results WHERE recon_id = ? AND status <> 'agree'
            ORDER BY CASE status WHEN 'differ' THEN 0 ELSE 1 END,
                     coalesce(to_date - from_date, 1000000), "check", scope
            """,
            [meta["recon_id"]],
        )
        cols = [d[0] for d in results.description]
        differences = [dict(zip(cols, r, strict=True)) for r in results.fetchall()]
        rows = con.execute(
            "SELECT entity, id::VARCHAR AS id, kind, month::VARCHAR AS month, "
            "category_id::VARCHAR AS category_id, fields, "
            '"local"::VARCHAR AS local, server::VARCHAR AS server, source FROM recon.row_differences '
            "WHERE recon_id = ? ORDER BY month, id",
            [meta["recon_id"]],
        )
        rcols = [d[0] for d in rows.description]
        row_differences = [dict(zip(rcols, r, strict=True)) for r in rows.fetchall()]
    finally:
        con.close()
    verdict = str(meta["verdict"])
    if as_json:
        click.echo(
            json.dumps(
                {
                    "verdict": verdict,
                    "refresh_id": meta.get("refresh_id"),
                    "recon_id": meta["recon_id"],
                    "source": meta.get("source"),
                    "checked": meta.get("recon_checked", 0),
                    "explained": meta.get("recon_explained", 0),
                    "differ": meta.get("recon_differ", 0),
                    "seconds": round(time.monotonic() - started, 2),
                    "differences": differences,
                    "row_differences": row_differences,
                },
                default=str,
            )
        )
    else:
        _print_verdict(
            verdict,
            checked=meta.get("recon_checked", 0),
            explained=meta.get("recon_explained", 0),
            differ=meta.get("recon_differ", 0),
            differences=differences,
            limit=25,
        )
        for r in row_differences[:10]:
            click.echo(
                f"  row {r['kind']:<11} {r['entity']:<12} {r['id']}  month {r['month'] or '-'}"
                + (f"  fields {r['fields']}" if r["fields"] else "")
            )
        click.echo(
            f"Reconciliation {meta['recon_id']} of refresh {meta.get('refresh_id')}; Dagster run {meta['run_id']}"
        )
    if verdict == "differ":
        raise SystemExit(EXIT_DIFFER)


@main.command()
@click.option("--port", default=3000, show_default=True, type=int)
def ui(port: int) -> None:
    """Start the Dagster UI (and its daemon) on this project's instance.

    SIGINT and SIGTERM stop the webserver, the daemon and their code servers: nothing is left
    running. Schedules start stopped: turn them on in the UI (Automation).
    """
    import signal
    import subprocess

    home = dagster_home()
    click.echo(f"Dagster UI on http://127.0.0.1:{port} (DAGSTER_HOME={home}); Ctrl-C stops it.")
    with embedded_api():
        cmd = [sys.executable, "-m", "dagster", "dev", "-p", str(port)]
        cmd += ["-m", "centsync.pipelines.definitions"]
        # its own process group: a stop reaches the webserver, the daemon and every code server
        child = subprocess.Popen(cmd, start_new_session=True)
        stopping: list[int] = []

        def forward(signum: int, _frame: object) -> None:
            stopping.append(signum)
            with suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGINT)  # dagster dev shuts down cleanly on SIGINT

        old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            code = child.wait()
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)
            _stop_group(child.pid)
    if stopping:
        raise SystemExit(errors.INTERRUPTED if stopping[0] == signal.SIGINT else 0)
    raise SystemExit(code)


def _stop_group(pgid: int, grace: float = 20.0) -> None:
    """Make sure no process of the group outlives us: SIGTERM, then SIGKILL after a grace."""
    import signal

    deadline = time.monotonic() + grace
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
        deadline = time.monotonic() + 5


@main.command("writeback")
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

    _JSON.set(as_json)
    warehouse = _warehouse_path()
    if dry_run:
        summary = writeback.run_writeback(None, warehouse, writeback.WritebackOptions(dry_run=True))
        report = summary.report()
    else:
        with interruptible(), embedded_api():
            meta = run_job("writeback_job", "outbox")
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
        print_writeback(report)
    if report["exit_code"]:
        raise SystemExit(report["exit_code"])


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
def status(as_json: bool) -> None:
    """What the warehouse holds: its source, the last refresh, row counts, the verdict.

    Reads the warehouse only (no request to the service).

    Example: centsync status --json | jq .last_refresh
    """
    from centsync.pipelines.outputs.status import read_status

    _JSON.set(as_json)
    info = read_status(_warehouse_path())
    if as_json:
        click.echo(json.dumps(info, default=str))
        return
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
    outbox = info["outbox"]
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
    for warning in info["warnings"]:
        click.echo(click.style(f"Warning: {warning}", fg="yellow"))
    click.echo("Rows: " + ", ".join(f"{t} {n:,}" for t, n in info["tables"].items()))


def entry() -> None:
    """The `centsync` console script: `main`, then an immediate exit with its code.

    By the time a command returns, everything it wrote is committed, closed and flushed; the
    interpreter's own teardown (freeing every module Dagster, Polars and DuckDB loaded, joining
    idle pools) took about 0.6 s of a 4 s household refresh (docs/benchmarks.md) and does
    nothing a user needs, so it is skipped. An exception other than an exit is left alone.

    Two start-up costs are cut here (docs/benchmarks.md, "What changed"):
    - pandera imports hypothesis, for its data-synthesis strategies, whenever it is installed
      (it is in the development environment, for the tests): 0.1 s of every command, for a
      feature no command uses. The process marks it unavailable, as a user's install without
      it would be; pandera then leaves its strategies out.
    - The cyclic garbage collector is off until the command's imports are in
      (`cli_support.imports_done`: at once for most commands, after the Dagster imports for
      those that run a job): its full collections during the imports were 0.34 s.
    """
    gc.disable()
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    try:
        main()
    except SystemExit as exc:
        code = exc.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        logging.shutdown()
        os._exit(code or 0)
