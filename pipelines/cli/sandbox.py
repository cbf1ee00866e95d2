"""The sandbox commands (`centsync sandbox serve`, `centsync tour`) and the embedded sandbox
every other command uses when no service is configured."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from centsync.pipelines.cli import failures as errors
from centsync.pipelines.cli.support import _REBIND, Failed, _money


@click.group()
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


@click.command()
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
    from centsync.pipelines.refresh import binding
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
