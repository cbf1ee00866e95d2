"""The `centsync` command line."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import click

from centsync.pipelines import errors

# `refresh --rebind` lets embedded_api start the sandbox for a warehouse bound elsewhere
_REBIND: contextvars.ContextVar[bool] = contextvars.ContextVar("rebind", default=False)
# the running command prints its failure as JSON (`--json`)
_JSON: contextvars.ContextVar[bool] = contextvars.ContextVar("json", default=False)
_DEBUG: contextvars.ContextVar[bool] = contextvars.ContextVar("debug", default=False)


def _command() -> str:
    """The running centsync command's name (a Dagster run's `centsync/command` tag)."""
    ctx = click.get_current_context(silent=True)
    return ctx.info_name if ctx is not None and ctx.info_name else ""


EXIT_DIFFER = errors.DIFFER


class Failed(click.ClickException):
    """An expected failure: one short message, what to do, where the log is; its exit code."""

    def __init__(self, failure: errors.Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.exit_code = failure.code  # type: ignore[misc]

    def show(self, file: Any = None) -> None:
        f = self.failure
        log = None
        with suppress(OSError):
            log = errors.write_log(dagster_home(), f)
        if _JSON.get():
            click.echo(json.dumps(f.as_json(log)))
        head = click.style(f"Error: {f.kind.headline}", fg="red", bold=True)
        lines = [f"{head}: {f.message}"]
        if f.kind.todo:
            lines.append(f"  What to do: {f.kind.todo}")
        where = f"  Full log: {log}" if log else ""
        if f.run_id:
            where += f" (Dagster run {f.run_id}; `centsync ui` shows it)"
        if where:
            lines.append(where)
        if _DEBUG.get():
            lines.append(f.detail)
        click.echo("\n".join(lines), err=True)


class CentsyncGroup(click.Group):
    """Expected failures raised outside a run print like those of a run (`Failed`)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as exc:
            failure = errors.from_exception(exc)
            if failure.code == 1 and failure.kind.headline == "unexpected error" and _DEBUG.get():
                raise
            raise Failed(failure) from None


@click.group(cls=CentsyncGroup)
@click.version_option(package_name="centsync")
@click.option(
    "--debug", is_flag=True, help="Print the whole error chain (tracebacks) on a failure."
)
def main(debug: bool) -> None:
    """centsync: keep a personal-finance service's data in a local DuckDB warehouse."""
    _DEBUG.set(debug)
    # The client's own warnings (a rate-limit wait of 10 s or more) are lines of their own.
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


@main.group()
def sandbox() -> None:
    """The embedded emulation of the Personal Finance Data API v1."""


@sandbox.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8765, show_default=True, type=int)
@click.option(
    "--seed", default=1, show_default=True, type=int, help="Seed of the synthetic household."
)
@click.option(
    "--keys-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the keys file (JSON, mode 0600) here once serving.",
)
@click.option(
    "--no-rate-limit", is_flag=True, help="Turn the per-key rate limits off (benchmarks)."
)
@click.option("--minute-limit", default=300, show_default=True, type=click.IntRange(1))
@click.option("--hour-limit", default=10_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--transactions",
    type=click.IntRange(1, 1_000_000),
    help="Exact number of transactions (default: a natural household, about 50 a month).",
)
@click.option(
    "--years", default=3, show_default=True, type=click.IntRange(1, 30), help="Years of history."
)
def sandbox_serve(
    host: str,
    port: int,
    seed: int,
    keys_out: Path | None,
    no_rate_limit: bool,
    minute_limit: int,
    hour_limit: int,
    transactions: int | None,
    years: int,
) -> None:
    """Serve the sandbox until stopped (SIGTERM or Ctrl-C)."""
    from centsync.sandbox import Sandbox, SandboxConfig
    from centsync.sandbox.server import serve

    click.echo(f"Generating the household (seed {seed}, {years} years)...", err=True)
    sb = Sandbox(
        SandboxConfig(
            seed=seed,
            years=years,
            transactions=transactions,
            rate_limit=not no_rate_limit,
            minute_limit=minute_limit,
            hour_limit=hour_limit,
        )
    )
    n = len(sb.service.ledger.rows)
    where = f"; keys in {keys_out}" if keys_out else ""
    serve(
        sb,
        host,
        port,
        keys_out,
        on_ready=f"Sandbox serving {n} transactions at {{base_url}}{where}. Ctrl-C stops it.",
    )


@main.command()
def tour() -> None:
    """Start the embedded sandbox and show it as a client sees it."""
    _tour()


def _tour() -> None:
    import httpx

    with (
        embedded_api() as (base_url, key),
        httpx.Client(
            base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30
        ) as c,
    ):
        me = c.get("/v1/me").json()
        click.echo(
            f"\nIdentity: owner {me['account_id']}, scopes {', '.join(me['scopes'])}, key expires {me['key']['expires_at']}"
        )
        click.echo(
            f"Rate limit: {me['rate_limit']['minute_limit']}/minute, {me['rate_limit']['hour_limit']}/hour"
        )
        click.echo("\nAccounts:")
        for a in c.get("/v1/accounts").json():
            click.echo(f"  {a['name']:<24} {a['type']:<11} {_money(a['balance']):>14}")
        page = c.get("/v1/transactions", params={"limit": 8}).json()
        click.echo(f"\nNewest transactions (page 1 of {page['pages']}, {page['total']} in all):")
        for t in page["data"]:
            click.echo(
                f"  {t['booked_at']}  {t['concept'][:30]:<30} {t['type']:<9} {_money(t['amount']):>12}"
            )
        nw = c.get("/v1/analytics/net-worth").json()
        click.echo(
            f"\nNet worth: {_money(nw['total'])} (assets {_money(nw['assets'])}, liabilities {_money(nw['liabilities'])})"
        )
        sp = c.get("/v1/analytics/spending", params={"group_by": "category"}).json()
        click.echo(f"\nSpending by category, {sp['from']} to {sp['to']}: {_money(sp['total'])}")
        for row in sp["data"][:8]:
            click.echo(f"  {row['label']:<16} {row['count']:>4} tx {_money(row['amount']):>12}")


SANDBOX_SEED = 1


def embedded_source(seed: int = SANDBOX_SEED) -> str:
    """The stable name a warehouse fed by the embedded sandbox is bound to."""
    return f"embedded-sandbox:seed={seed}"


@contextmanager
def embedded_api(seed: int = SANDBOX_SEED) -> Iterator[tuple[str, str]]:
    """The API to use: CENTSYNC_API_BASE_URL and CENTSYNC_API_KEY, else an embedded sandbox.

    The embedded sandbox is never started for a warehouse bound to another source.
    """
    base = os.environ.get("CENTSYNC_API_BASE_URL")
    if base:
        key = os.environ.get("CENTSYNC_API_KEY")
        if not key:
            raise click.ClickException(
                "CENTSYNC_API_BASE_URL is set but CENTSYNC_API_KEY is not: export the key too."
            )
        os.environ.pop("CENTSYNC_SOURCE", None)
        yield base, key
        return
    from centsync.pipelines import binding
    from centsync.sandbox import Sandbox, SandboxConfig
    from centsync.sandbox.server import run_in_thread
    from centsync.warehouse import default_path

    source = embedded_source(seed)
    try:
        binding.check(default_path().absolute(), source, None)
    except binding.SourceMismatch as e:
        if not _REBIND.get():
            message = (
                f"CENTSYNC_API_BASE_URL is not set, so the embedded sandbox would be used, but {e} "
                f"To refresh it from its service, set CENTSYNC_API_BASE_URL={e.bound.base_url} "
                "and its CENTSYNC_API_KEY."
            )
            raise Failed(
                errors.Failure(errors.KINDS["SourceMismatch"], "SourceMismatch", message, message)
            ) from None
    sb = Sandbox(SandboxConfig(seed=seed))
    with run_in_thread(sb) as base_url:
        click.echo(
            f"No CENTSYNC_API_BASE_URL set: started the embedded sandbox at {base_url} (seed {seed}).",
            err=True,
        )
        key = sb.keys["read_write"]
        names = ("CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY", "CENTSYNC_SOURCE")
        old = {k: os.environ.get(k) for k in names}
        # Dagster resources read these through EnvVar when the run starts.
        os.environ["CENTSYNC_API_BASE_URL"], os.environ["CENTSYNC_API_KEY"] = base_url, key
        os.environ["CENTSYNC_SOURCE"] = source
        try:
            yield base_url, key
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    click.echo("Embedded sandbox stopped.", err=True)


def dagster_home() -> Path:
    """DAGSTER_HOME (absolute), defaulting to .dagster_home here, with our dagster.yaml in it."""
    home = Path(os.environ.get("DAGSTER_HOME") or Path.cwd() / ".dagster_home").absolute()
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text((Path(__file__).with_name("dagster.yaml")).read_text())
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def _failure(result: Any) -> errors.Failure:
    """The classified error of a failed in-process run."""
    for event in result.all_events:
        if event.is_step_failure:
            return errors.classify(event.event_specific_data.error, result.run_id)
    failed = next((e for e in result.all_events if e.is_failure), None)
    data = getattr(failed, "event_specific_data", None)
    return errors.classify(getattr(data, "error", None), result.run_id)


def run_job(name: str, asset: str) -> dict[str, Any]:
    """Run a job of the definitions in process, recorded in the instance; `asset`'s metadata."""
    from dagster import DagsterInstance

    from centsync.pipelines.definitions import defs

    dagster_home()
    result = defs.resolve_job_def(name).execute_in_process(
        instance=DagsterInstance.get(),
        raise_on_error=False,
        tags={"centsync/command": _command() or name},
        run_config={
            "loggers": {
                "console": {"config": {"log_level": "DEBUG" if _DEBUG.get() else "CRITICAL"}}
            }
        },
    )
    if not result.success:
        raise Failed(_failure(result))
    meta: dict[str, Any] = {"run_id": result.run_id}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        if mat is not None and mat.asset_key.to_user_string() == asset:
            meta.update({k: getattr(v, "value", v) for k, v in mat.metadata.items()})
    return meta


def run_refresh_job(mode: str, months: str = "", *, rebind: bool = False) -> dict[str, Any]:
    """Run the refresh as a Dagster run recorded in the instance; returns its transactions metadata."""
    from dagster import DagsterInstance

    from centsync.pipelines.definitions import defs

    dagster_home()
    os.environ.setdefault("CENTSYNC_PROGRESS", "1")
    instance = DagsterInstance.get()
    job = defs.resolve_job_def("refresh_job")
    config = {
        "ops": {"refresh": {"config": {"mode": mode, "months": months, "rebind": rebind}}},
        # The run's full event log is in the instance (and the UI); the terminal gets the
        # summary, its warnings, and a short message on a failure (tracebacks with --debug).
        "loggers": {"console": {"config": {"log_level": "DEBUG" if _DEBUG.get() else "CRITICAL"}}},
    }
    tags = {"centsync/command": _command(), "centsync/mode": mode}
    result = job.execute_in_process(
        run_config=config, instance=instance, raise_on_error=False, tags=tags
    )
    meta: dict[str, Any] = {"run_id": result.run_id}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        if mat is not None and mat.asset_key.to_user_string() in ("transactions", "recon/results"):
            meta.update({k: getattr(v, "value", v) for k, v in mat.metadata.items()})
    if not result.success and not meta.get("verdict"):
        raise Failed(_failure(result))
    # a run whose data landed but whose blocking reconciliation checks failed reports the
    # verdict (exit 1), not a failure of the refresh itself
    return meta


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
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def refresh(full: bool, hot: bool, months: str, rebind: bool, as_json: bool) -> None:
    """Bring the warehouse exactly in step with the service, spending the fewest requests.

    Ends with the marts and their reconciliation against the service's own numbers.

    Example: centsync refresh --months 2024-01..2024-03 --json | jq .rows
    """
    from centsync.pipelines.refresh import parse_month_range

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
        with embedded_api():
            meta = run_refresh_job(mode, months, rebind=rebind)
    finally:
        _REBIND.reset(token)
    report = dict(meta.get("report") or {})
    report["run_id"] = meta.get("run_id")
    report["warehouse"] = str(_warehouse_path())
    report.setdefault("durations", {})["total_seconds"] = round(time.monotonic() - started, 2)
    report["exit_code"] = EXIT_DIFFER if report.get("verdict") == "differ" else errors.OK
    meta["seconds"] = report["durations"]["total_seconds"]
    if as_json:
        click.echo(json.dumps(report, default=str))
    else:
        _print_summary(meta)
    if report["exit_code"]:
        raise SystemExit(report["exit_code"])


def _warehouse_path() -> Path:
    from centsync.warehouse import default_path

    return default_path().absolute()


def _print_summary(meta: dict[str, Any]) -> None:
    from centsync.warehouse import default_path

    click.echo(
        f"Refresh done in {meta['seconds']} s ({meta.get('mode', '')}): {meta.get('rows', 0):,} transactions in the warehouse, "
        f"{meta.get('rows_changed', 0):,} rows changed, {meta.get('rows_rejected', 0)} rejected.\n"
        f"Requests: {meta.get('requests_total', 0)} (ceil(rows read / 200) = {meta.get('requests_floor', 0)}); "
        f"months checked {meta.get('months_checked', 0)}, windows re-read {meta.get('months_reread', 0)}, drift re-reads {meta.get('rereads', 0)}.\n"
        f"Warehouse: {default_path().absolute()}   Dagster run: {meta.get('run_id')}"
    )
    report = meta.get("report") or {}
    if report.get("backup"):
        click.echo(f"Rebound: the previous warehouse is kept as {report['backup']}")
    for warning in report.get("warnings") or []:
        click.echo(click.style(f"Warning: {warning}", fg="yellow"))
    if meta.get("verdict"):
        _print_verdict(
            meta["verdict"],
            checked=meta.get("recon_checked", 0),
            explained=meta.get("recon_explained", 0),
            differ=meta.get("recon_differ", 0),
            differences=meta.get("differences") or [],
        )


VERDICT_COLOUR = {"agree": "green", "explained": "yellow", "differ": "red"}
VERDICT_WORDS = {
    "agree": "every number agrees with the service's own, to the cent",
    "explained": "every difference from the service's own numbers is explained",
    "differ": "differences from the service's own numbers are not explained",
}


def _print_verdict(
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
            f"{_cents(d['local_cents']):>14} {_cents(d['server_cents']):>14} {_cents(d['difference_cents']):>12}"
        )
        if d.get("explanation"):
            click.echo(f"            {d['explanation']}")
    if len(differences) > limit:
        click.echo(f"  ... and {len(differences) - limit} more (recon.results)")


EXAMPLE_QUERIES = [
    (
        "Spending by category, last 12 months",
        """SELECT category_name, sum(transactions) AS n, sum(amount_cents) AS cents
        FROM marts.spending_by_month_category
        WHERE month > (SELECT max(month) FROM marts.spending_by_month_category) - INTERVAL 12 MONTH
        GROUP BY 1 ORDER BY 3 LIMIT 6""",
    ),
    (
        "Cash flow per month (last 6)",
        """SELECT strftime(month, '%Y-%m') AS month, income_cents, spending_cents, net_cents
        FROM marts.cash_flow_by_month ORDER BY month DESC LIMIT 6""",
    ),
    (
        "Net worth, first of the month (last 6)",
        """SELECT date, assets_cents, liabilities_cents, net_worth_cents FROM marts.net_worth_daily
        WHERE day(date) = 1 ORDER BY date DESC LIMIT 6""",
    ),
]


@main.command()
def demo() -> None:
    """The main job on the embedded sandbox: a full refresh, marts, reconciliation, queries."""
    from centsync.warehouse import connect_readonly, default_path

    started = time.monotonic()
    with embedded_api():
        meta = run_refresh_job("full")
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
        if verdict == "differ":
            raise SystemExit(EXIT_DIFFER)


@main.command("reconcile")
@click.option("--live", is_flag=True, help="Compare with the service's aggregates fetched now.")
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


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
def status(as_json: bool) -> None:
    """What the warehouse holds: its source, the last refresh, row counts, the verdict.

    Reads the warehouse only (no request to the service).

    Example: centsync status --json | jq .last_refresh
    """
    from centsync.pipelines.status import read_status

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
    recon = info["reconciliation"]
    if recon:
        colour = VERDICT_COLOUR.get(recon["verdict"], "white")
        click.echo(
            "Reconciliation: "
            + click.style(recon["verdict"].upper(), fg=colour, bold=True)
            + f" at {recon['ran_at']} ({recon['checked']} checks, {recon['differ']} differ)"
        )
    click.echo(
        "Outbox: "
        + (
            "nothing yet (write-back is not built)"
            if info["outbox"] is None
            else json.dumps(info["outbox"])
        )
    )
    for warning in info["warnings"]:
        click.echo(click.style(f"Warning: {warning}", fg="yellow"))
    click.echo("Rows: " + ", ".join(f"{t} {n:,}" for t, n in info["tables"].items()))


def _cents(cents: int | None) -> str:
    """Cents as a decimal amount with its sign (the currency is the warehouse's)."""
    if cents is None:
        return ""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{frac:02d}"


def _money(cents: int) -> str:
    return f"{_cents(cents)} EUR"


if __name__ == "__main__":
    sys.exit(main())
