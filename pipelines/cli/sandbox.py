"""The sandbox commands: `centsync sandbox serve`, `sandbox reset`, `sandbox advance` and
`centsync tour`.

The embedded sandbox every other command uses when no service is configured is a use case of
its own, `pipelines/embedded.py`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from centsync.pipelines.cli import render
from centsync.pipelines.cli.group import FILE, settings

if TYPE_CHECKING:
    from centsync.sandbox import SandboxConfig


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
    type=FILE,
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
@click.option(
    "--state",
    type=FILE,
    help="Keep the sandbox's state in this file: loaded if there, saved when it stops.",
)
@click.option(
    "--owners",
    default=1,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Serve this many owners, one household each (seeds SEED, SEED+1, ...), routed by key.",
)
@click.option(
    "--owners-file",
    type=FILE,
    help="Write an owners file (CENTSYNC_OWNERS_FILE) naming the owners, keys from variables.",
)
@click.option(
    "--env-out",
    type=FILE,
    help="Write `export CENTSYNC_KEY_OWNER_001=...` lines (mode 0600) for a shell to source.",
)
@click.option(
    "--dialect",
    default="contract",
    show_default=True,
    callback=lambda ctx, param, value: _dialect(value),
    help='Answer what the API document leaves "not shown" in this dialect '
    '(docs/api-contract.md, "Dialects"): contract, or another service\'s style.',
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
    state: Path | None,
    owners: int,
    owners_file: Path | None,
    env_out: Path | None,
    dialect: str,
) -> None:
    """Serve the sandbox until stopped (SIGTERM or Ctrl-C)."""
    from centsync.pipelines.kept import guard_output
    from centsync.sandbox import Sandbox, SandboxConfig
    from centsync.sandbox.server import serve
    from centsync.sandbox.state import load, save

    for flag, out in (("--keys-out", keys_out), ("--env-out", env_out)):
        if out is not None:  # rewritten each time it serves; never over a file centsync keeps
            guard_output(out, settings(), force=True, flag=flag)
    many = owners > 1 or owners_file is not None or env_out is not None
    if many and state:
        raise click.UsageError(
            "--state keeps one household: it does not go with --owners, --owners-file or --env-out."
        )
    config = SandboxConfig(
        seed=seed,
        years=years,
        transactions=transactions,
        rate_limit=not no_rate_limit,
        minute_limit=minute_limit,
        hour_limit=hour_limit,
    )
    if many:  # an owners file names owners, even one: the keys file lists them by name
        _serve_fleet(config, owners, host, port, keys_out, owners_file, env_out, dialect)
        return
    service = load(state.absolute(), config) if state else None
    if service is None:
        click.echo(f"Generating the household (seed {seed}, {years} years)...", err=True)
    else:
        click.echo(f"The sandbox as {state} left it (seed {seed}).", err=True)
    sb = Sandbox(config, service, dialect=dialect)
    n = len(sb.service.ledger.rows)
    where = f"; keys in {keys_out}" if keys_out else ""
    where += f"; dialect {dialect}" if dialect != "contract" else ""
    serve(
        sb,
        host,
        port,
        keys_out,
        on_ready=f"Sandbox serving {n} transactions at {{base_url}}{where}. Ctrl-C stops it.",
    )
    if state:
        save(sb.service, state.absolute())
        click.echo(f"Sandbox state saved to {state}.", err=True)


def _serve_fleet(
    config: SandboxConfig,
    owners: int,
    host: str,
    port: int,
    keys_out: Path | None,
    owners_file: Path | None,
    env_out: Path | None,
    dialect: str = "contract",
) -> None:
    """`serve --owners N`: N households behind one server, each request routed by its key."""
    from centsync.sandbox.fleet import Fleet, key_variable, owners_toml
    from centsync.sandbox.server import serve, write_private

    click.echo(
        f"Generating {owners} households (seeds {config.seed}..{config.seed + owners - 1})...",
        err=True,
    )
    fleet = Fleet.build(owners, config, dialect)
    rows = sum(len(sb.service.ledger.rows) for sb in fleet.owners.values())

    def files(base_url: str) -> None:
        if owners_file is not None:
            owners_file.parent.mkdir(parents=True, exist_ok=True)
            owners_file.write_text(owners_toml(fleet.owners, base_url), "utf-8")
        if env_out is not None:
            lines = [
                f"export {key_variable(name)}={keys['read_write']}"
                for name, keys in fleet.keys.items()
            ]
            write_private(env_out, "\n".join(lines) + "\n")

    where = f"; keys in {keys_out}" if keys_out else ""
    serve(
        fleet,
        host,
        port,
        keys_out,
        on_ready=f"Sandbox serving {owners} owners ({rows} transactions) at {{base_url}}{where}. "
        "Ctrl-C stops it.",
        on_serving=files,
    )


@sandbox.command("reset")
def sandbox_reset() -> None:
    """Start the embedded sandbox over: delete its state file (its write-backs, edits, clock).

    The warehouse keeps what it holds; the next refresh brings it in step with the new sandbox.
    """
    from centsync.pipelines import embedded

    path = settings().sandbox_state_file
    try:
        deleted = embedded.reset(path)
    except embedded.StateInUse as e:  # a known failure: exit 6, never click's 1
        raise embedded.StateInUse(f"another centsync command (a daemon?) is using {path}") from e
    if not deleted:
        click.echo(f"No sandbox state at {path}: the next command starts afresh anyway.")
        return
    click.echo(f"Deleted {path}: the next command starts the embedded sandbox afresh.")


@sandbox.command("advance")
@click.option(
    "--days",
    required=True,
    type=click.IntRange(1),
    help="Move the embedded sandbox's clock this many days on (a positive whole number).",
)
def sandbox_advance(days: int) -> None:
    """Move the embedded sandbox's clock on: the bank syncs that fall due bring new transactions.

    Kept in its state file (made afresh when there is none); the next refresh brings them in.
    """
    from centsync.pipelines import embedded

    path = settings().sandbox_state_file
    try:
        done = embedded.advance(path, days)
    except embedded.StateInUse as e:  # a known failure: exit 6, never click's 1
        raise embedded.StateInUse(f"another centsync command (a daemon?) is using {path}") from e
    syncs = f"{done.syncs} bank sync{'s' if done.syncs != 1 else ''}"
    rows = f"{done.new_transactions} new transaction{'s' if done.new_transactions != 1 else ''}"
    render.echo(
        f"The embedded sandbox is now at {done.day.isoformat()}: {syncs} brought {rows}; "
        "`centsync refresh` brings them in."
    )


@click.command()
def tour() -> None:
    """Start the embedded sandbox and show it as a client sees it."""
    import httpx

    from centsync.pipelines.embedded import embedded_api

    with (
        embedded_api(settings()) as api,
        httpx.Client(
            base_url=api.api_base_url,
            headers={"Authorization": f"Bearer {api.api_key}"},
            timeout=30,
        ) as c,
    ):
        accounts = c.get("/v1/accounts").json()
        render.tour(
            c.get("/v1/me").json(),
            accounts,
            c.get("/v1/transactions", params={"limit": 8}).json(),
            _net_worth(c.get("/v1/analytics/net-worth").json(), accounts),
            c.get("/v1/analytics/spending", params={"group_by": "category"}).json(),
        )


def _net_worth(body: Any, accounts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The net worth answer (its shape "not shown") read as a refresh reads it: learned from the
    accounts' balances, whatever its names; None when they do not decide it."""
    from centsync.transform import shapes
    from centsync.transform.shapes_rows import canonical

    balances = [(a["type"], a["balance"]) for a in accounts]
    currency = accounts[0]["currency"] if accounts else None
    got = shapes.learn_balances(shapes.NET_WORTH, body, balances, currency)
    if not isinstance(got, shapes.Learned):
        return None
    return canonical(shapes.NET_WORTH, body, got.mapping)


def _dialect(name: str) -> str:
    """`--dialect`'s value, checked (the registry is imported only when the option is used)."""
    if name == "contract":
        return name
    from centsync.sandbox.dialects import DIALECTS

    if name not in DIALECTS:
        raise click.BadParameter(f"{name!r} is not a dialect; use one of {', '.join(DIALECTS)}.")
    return name
