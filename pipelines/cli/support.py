"""What every `centsync` command shares: failures as short messages, Dagster runs in process,
the instance's home, and the printed summaries."""

from __future__ import annotations

import contextvars
import gc
import json
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import click

from centsync.pipelines.cli import failures as errors
from centsync.transform.money import cents_text

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


# Commands whose work is a Dagster run: the console script (`cli.entry`) starts them with the
# cyclic garbage collector off, and `imports_done` turns it on once the run's imports are in.
JOB_COMMANDS = frozenset({"refresh", "demo", "reconcile", "writeback"})


def imports_done() -> None:
    """Turn the garbage collector on, if the console script turned it off for the imports.

    Importing what a run needs (about 1,900 modules: Dagster, Polars, DuckDB, SQLAlchemy ...)
    allocates enough objects to set off full collections over everything imported so far:
    0.34 s of a 1.45 s import (bench/fixed_cost.py, docs/benchmarks.md). What the imports made
    lives as long as the process, so it is frozen out of the collections that follow.
    """
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


class CentsyncGroup(click.Group):
    """Expected failures raised outside a run print like those of a run (`Failed`)."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name not in JOB_COMMANDS:
            imports_done()  # any other command runs with the collector on from the start
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # `centsync status | head`: the reader left, nothing to say
            sys.stderr.close()
            raise SystemExit(0) from None
        except Exception as exc:
            failure = errors.from_exception(exc)
            if failure.code == 1 and failure.kind.headline == "unexpected error" and _DEBUG.get():
                raise
            raise Failed(failure) from None


def dagster_home() -> Path:
    """DAGSTER_HOME (absolute), else `data_home()/dagster`, with our dagster.yaml in it."""
    from centsync.warehouse.paths import data_home

    home = Path(os.environ.get("DAGSTER_HOME") or data_home() / "dagster").absolute()
    home.mkdir(parents=True, exist_ok=True)
    cfg = home / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text((Path(__file__).parent.parent / "dagster.yaml").read_text())
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
    from centsync.pipelines.cli import instance as dagster_storage
    from centsync.pipelines.definitions import defs

    imports_done()
    dagster_home()
    with dagster_storage.instance() as instance:
        result = defs.resolve_job_def(name).execute_in_process(
            instance=instance,
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


def run_refresh_job(
    mode: str, months: str = "", *, rebind: bool = False, report: bool = False
) -> dict[str, Any]:
    """Run the refresh as a Dagster run recorded in the instance; returns its transactions metadata."""
    from centsync.pipelines.cli import instance as dagster_storage
    from centsync.pipelines.definitions import defs

    imports_done()
    dagster_home()
    os.environ.setdefault("CENTSYNC_PROGRESS", "1")
    job = defs.resolve_job_def("refresh_job")
    config = {
        "ops": {
            "refresh": {
                "config": {"mode": mode, "months": months, "rebind": rebind, "report": report}
            }
        },
        # The run's full event log is in the instance (and the UI); the terminal gets the
        # summary, its warnings, and a short message on a failure (tracebacks with --debug).
        "loggers": {"console": {"config": {"log_level": "DEBUG" if _DEBUG.get() else "CRITICAL"}}},
    }
    tags = {"centsync/command": _command(), "centsync/mode": mode}
    # Dagster's SQLite storage, keeping its connections for the run (pipelines/dagster_storage.py)
    with dagster_storage.instance() as instance:
        result = job.execute_in_process(
            run_config=config, instance=instance, raise_on_error=False, tags=tags
        )
    meta: dict[str, Any] = {"run_id": result.run_id}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        if mat is not None and mat.asset_key.to_user_string() in ("transactions", "recon/results"):
            meta.update({k: getattr(v, "value", v) for k, v in mat.metadata.items()})
        elif mat is not None and mat.asset_key.to_user_string() == "outbox":
            wb = mat.metadata.get("writeback")
            meta["writeback"] = getattr(wb, "value", None)
    if not result.success and not meta.get("verdict"):
        raise Failed(_failure(result))
    # a run whose data landed but whose blocking reconciliation checks failed reports the
    # verdict (exit 1), not a failure of the refresh itself
    return meta


def _warehouse_path() -> Path:
    from centsync.warehouse import default_path

    return default_path().absolute()


def _print_summary(meta: dict[str, Any]) -> None:
    from centsync.warehouse import default_path

    click.echo(
        f"Refresh done in {meta['seconds']} s ({meta.get('mode', '')}): {meta.get('rows', 0):,} transactions in the warehouse, "
        f"{meta.get('rows_changed', 0):,} rows changed, {(meta.get('report') or {}).get('rows', {}).get('rejected', 0)} rejected.\n"
        f"Requests: {meta.get('requests_total', 0)} (ceil(rows read / 200) = {meta.get('requests_floor', 0)}); "
        f"months checked {meta.get('months_checked', 0)}, windows re-read {meta.get('months_reread', 0)}, drift re-reads {meta.get('rereads', 0)}.\n"
        f"Warehouse: {default_path().absolute()}   Dagster run: {meta.get('run_id')}"
    )
    report = meta.get("report") or {}
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
    wb = meta.get("writeback") or {}
    outbox = (report.get("outbox") or {}).get("states") or {}
    if wb.get("plan") or any(outbox.values()):
        confirmed = (report.get("outbox") or {}).get("confirmed", 0)
        click.echo(
            f"Write-back: {wb.get('sent', 0)} sent, {wb.get('rejected', 0) + wb.get('rejected_by_service', 0)} "
            f"rejected, {confirmed} confirmed by this refresh; outbox "
            + ", ".join(f"{k} {v}" for k, v in outbox.items() if v)
        )
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


def print_writeback(report: dict[str, Any]) -> None:
    """The write-back's plan and result, for people."""
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
    for f in report.get("files") or []:
        if f.get("moved_to"):
            extra = f"; reasons in {f['errors_file']}" if f.get("errors_file") else ""
            click.echo(f"File {f['file']}: moved to {f['moved_to']}{extra}")
    if not report.get("dry_run"):
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
    counts = report.get("counts") or {}
    click.echo(
        "Outbox: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + f"  ({report.get('outbox')})"
    )
    for w in report.get("warnings") or []:
        click.echo(click.style(f"Warning: {w}", fg="yellow"))
    if counts.get("needs_attention"):
        click.echo(
            "Rows that need attention: SELECT id, reason FROM ops.outbox WHERE state = 'needs_attention' "
            "(in the outbox file, or the warehouse after the next refresh)."
        )


def _request_text(p: dict[str, Any]) -> str:
    body = p.get("body") or {}
    if p["operation"] == "create":
        return (
            f"{p['request']}  {cents_text(body.get('amount'))} {body.get('concept', '')!r} "
            f"on {body.get('booked_at')}"
        )
    return f"{p['request']}  {body}"


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
            f"{cents_text(d['local_cents']):>14} {cents_text(d['server_cents']):>14} {cents_text(d['difference_cents']):>12}"
        )
        if d.get("explanation"):
            click.echo(f"            {d['explanation']}")
    if len(differences) > limit:
        click.echo(f"  ... and {len(differences) - limit} more (recon.results)")


def _money(cents: int) -> str:
    return f"{cents_text(cents)} EUR"


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


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop a command cleanly: the refresh keeps what it read (published,
    marked 'interrupted'), the next one resumes; exit 130 (SIGINT) or 143 (SIGTERM)."""
    import signal

    previous = signal.signal(signal.SIGTERM, errors.on_sigterm)
    try:
        yield
    except KeyboardInterrupt as exc:
        _quiet_teardown()
        terminated = isinstance(exc, errors.Terminated) or errors.SIGTERM_RECEIVED
        code = 143 if terminated else errors.INTERRUPTED
        message = errors.INTERRUPTED_MESSAGE
        raise Failed(
            errors.Failure(errors.Kind(code, "interrupted", ""), "Interrupted", message, message)
        ) from None
    except Failed as failed:
        if failed.failure.code in (errors.INTERRUPTED, 143):
            _quiet_teardown()
            if errors.SIGTERM_RECEIVED and failed.failure.code != 143:
                f = failed.failure
                kind = errors.Kind(143, "interrupted", "")
                raise Failed(errors.Failure(kind, f.cls, f.message, f.detail, f.run_id)) from None
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quiet_teardown() -> None:
    """An interrupted read leaves the client's event loop with pending tasks: their
    garbage-collection warnings are not the user's business on the way out."""
    sys.unraisablehook = lambda _unraisable: None
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
