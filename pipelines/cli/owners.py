"""Many owners from the CLI: `refresh --all` (every owner of the owners file, a few at a time)
and the lake publish that follows an owner's refresh."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import click

from centsync.pipelines import failures as errors
from centsync.pipelines.cli.group import settings

if TYPE_CHECKING:
    from centsync.pipelines.settings import Settings


def publish_owner(config: Settings) -> dict[str, Any]:
    """Publish the owner's core tables and marts into the shared lake (after its refresh)."""
    from centsync.warehouse.lake import publish

    return publish(config.warehouse, config.lake, config.owner).to_json()


def refresh_all(config: Settings, flags: list[str], concurrency: int) -> dict[str, Any]:
    """Refresh every owner of the owners file, `concurrency` at a time; one object for all.

    Each owner is its own `centsync --owner NAME refresh --json` process: its own key (read by
    the child from where the owners file says, never passed on a command line), warehouse,
    Dagster home and per-key pacing, and one owner's crash cannot take another's down.
    """
    from centsync.pipelines import owners

    names = list(owners.load(config.owners_file).owners)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        results = dict(zip(names, pool.map(lambda n: _one(n, flags, config), names), strict=True))
    _publish_all(config, results)
    codes = [r["exit_code"] for r in results.values()]
    return {
        "owners": results,
        "agree": sum(1 for r in results.values() if r.get("verdict") == "agree"),
        "failed": sum(1 for c in codes if c not in (errors.OK, errors.DIFFER, errors.REJECTED)),
        "seconds": round(time.monotonic() - started, 2),
        "exit_code": max(codes, default=errors.OK),
    }


def _publish_all(config: Settings, results: dict[str, dict[str, Any]]) -> None:
    """Publish the owners whose refresh landed into the lake, a shard at a time (`batches`:
    up to SHARD owners of one lake shard); a batch that fails leaves the lake as it was for its
    owners, who then exit 6."""
    from centsync.pipelines.fleet.shard import batches
    from centsync.pipelines.owners import owner_home
    from centsync.pipelines.settings import WAREHOUSE_NAME
    from centsync.warehouse.lake import publish_many

    landed = [
        n
        for n, r in results.items()
        if r["exit_code"] in (errors.OK, errors.DIFFER, errors.REJECTED)
    ]
    for batch in batches(landed, config.lake):
        try:
            done = publish_many(
                [(n, owner_home(config.data_home, n) / WAREHOUSE_NAME) for n in batch], config.lake
            )
        except Exception as exc:  # the warehouses stand; the lake keeps their last publish
            for n in batch:
                results[n]["lake_error"] = f"{type(exc).__name__}: {exc}"
                results[n]["exit_code"] = max(results[n]["exit_code"], errors.WAREHOUSE)
            continue
        for n, published in zip(batch, done, strict=True):
            results[n]["lake"] = published.to_json()


def _one(name: str, flags: list[str], config: Settings) -> dict[str, Any]:
    """One owner's refresh as a child process; its summary (or its failure) as a dict."""
    cmd = [sys.executable, "-m", "centsync.pipelines.cli", "--owner", name, "refresh", "--json"]
    cmd.append("--no-lake")  # the parent publishes every owner after, in shards
    env = config.child_environ()
    for key in ("CENTSYNC_OWNER", "CENTSYNC_API_BASE_URL", "CENTSYNC_API_KEY"):
        env.pop(key, None)  # the child resolves the owner itself
    for key in ("CENTSYNC_WAREHOUSE", "DAGSTER_HOME", "CENTSYNC_INBOX", "CENTSYNC_SANDBOX_STATE"):
        env.pop(key, None)  # the owner's own, under <data home>/owners/<name>/
    env["XDG_DATA_HOME"] = str(config.data_home.parent)
    env["CENTSYNC_OWNERS_FILE"] = str(config.owners_file)
    env["CENTSYNC_LAKE"] = str(config.lake)
    started = time.monotonic()
    proc = subprocess.run(cmd + flags, capture_output=True, text=True, env=env, check=False)
    found: dict[str, Any] = {}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
                break
            except json.JSONDecodeError:
                continue
    out: dict[str, Any] = {"exit_code": proc.returncode, "seconds": 0.0}
    out["seconds"] = round(time.monotonic() - started, 2)
    if "verdict" in found:
        out.update(
            verdict=found.get("verdict"),
            mode=found.get("mode"),
            rows=found.get("rows", {}).get("total"),
            requests=found.get("requests", {}).get("total"),
            warehouse=found.get("warehouse"),
        )
    else:  # a failure: its object (`--json`), else the end of what it said on stderr
        tail = proc.stderr.strip().splitlines()[-3:]
        error = found.get("error")
        out["error"] = error.get("message") if isinstance(error, dict) else " ".join(tail)
    return out


@click.command("lake")
@click.option(
    "--retain-hours",
    type=click.IntRange(min=0),
    default=24,
    show_default=True,
    help="Keep the files of every lake version younger than this (readers of older fail; "
    "0 only while no owner publishes).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def lake_command(retain_hours: int, as_json: bool) -> None:
    """Maintain the shared lake: compact each shard's files, checkpoint, delete old files.

    Run it after the owners' daily refreshes (the fleet's `lake_maintenance` schedule does):
    a cross-owner query then reads one file per shard, and the lake keeps one day of versions.
    """
    from centsync.warehouse.lake import NoLakeError, lake_tables, maintain

    lake = settings().lake
    if not lake_tables(lake):
        raise NoLakeError(f"the lake {lake} holds no tables yet")
    done = maintain(lake, retain_hours=retain_hours)
    if as_json:
        click.echo(json.dumps({"lake": str(lake), "tables": [d.to_json() for d in done]}))
        return
    for d in done:
        click.echo(
            f"{d.table:<40} files {d.files_before:>5} -> {d.files_after:<5} "
            f"removed {d.removed:>5}  {d.seconds:.2f} s"
        )
