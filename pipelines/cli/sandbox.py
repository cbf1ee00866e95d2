"""The sandbox commands (`centsync sandbox serve`, `centsync tour`) and the embedded sandbox
every other command uses when no service is configured."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from centsync.pipelines.cli import failures as errors
from centsync.pipelines.cli import render
from centsync.pipelines.cli.group import Failed, settings

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings


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
    import httpx

    with (
        embedded_api(settings()) as api,
        httpx.Client(
            base_url=api.api_base_url,
            headers={"Authorization": f"Bearer {api.api_key}"},
            timeout=30,
        ) as c,
    ):
        render.tour(
            c.get("/v1/me").json(),
            c.get("/v1/accounts").json(),
            c.get("/v1/transactions", params={"limit": 8}).json(),
            c.get("/v1/analytics/net-worth").json(),
            c.get("/v1/analytics/spending", params={"group_by": "category"}).json(),
        )


SANDBOX_SEED = 1


def embedded_source(seed: int = SANDBOX_SEED) -> str:
    """The stable name a warehouse fed by the embedded sandbox is bound to."""
    return f"embedded-sandbox:seed={seed}"


@contextmanager
def embedded_api(
    settings: Settings, *, rebind: bool = False, seed: int = SANDBOX_SEED
) -> Iterator[Settings]:
    """The settings to run with: as given when they name a service, else with an embedded
    sandbox's URL, key and source name in them (the sandbox runs until the block ends).

    The embedded sandbox is never started for a warehouse bound to another source (unless
    `rebind`: the refresh then keeps that warehouse as a backup).
    """
    if not settings.embedded:
        yield dataclasses.replace(settings, source="")
        return
    from centsync.pipelines.refresh import binding
    from centsync.sandbox import Sandbox, SandboxConfig
    from centsync.sandbox.server import run_in_thread

    source = embedded_source(seed)
    try:
        binding.check(settings.warehouse, source, None)
    except binding.SourceMismatch as e:
        if not rebind:
            message = (
                f"CENTSYNC_API_BASE_URL is not set, so the embedded sandbox would be used, but {e} "
                f"To refresh it from its service, set CENTSYNC_API_BASE_URL={e.bound.base_url} "
                "and its CENTSYNC_API_KEY."
            )
            kind = errors.kind_of(e)
            assert kind is not None  # a SourceMismatch is a known failure
            raise Failed(errors.Failure(kind, "SourceMismatch", message, message)) from None
    sb = Sandbox(SandboxConfig(seed=seed))
    with run_in_thread(sb) as base_url:
        click.echo(
            f"No CENTSYNC_API_BASE_URL set: started the embedded sandbox at {base_url} (seed {seed}).",
            err=True,
        )
        # handed to the run as its settings resource: never through the environment
        yield dataclasses.replace(
            settings, api_base_url=base_url, api_key=sb.keys["read_write"], source=source
        )
    click.echo("Embedded sandbox stopped.", err=True)
