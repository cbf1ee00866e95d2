"""Owners an hour through Dagster's own machinery (issue 30): the daemon, the queued run
coordinator, the PostgreSQL instance, and a run launcher.

    uv run --frozen python bench/owners_fleet.py --owners 50 --launcher celery
    uv run --frozen python bench/owners_fleet.py --owners 50 --launcher default

`bench/owners.py` times the shard runs' own work in worker processes; this times the runs as
the fleet launches them. One many-owner sandbox server (its own process, rate limits on), a
private PostgreSQL and Redis on loopback (Debian's postgresql 15 and redis-server), a Dagster
home from `pipelines/fleet/dagster-{celery,postgres}.yaml`, the daemon, and with `celery` a
Celery worker of `--workers` slots (dagster-celery runs a run inside a long-lived worker: no
Python start per run). Each owner gets its partition; then every shard (`--shard` owners, as
the daily schedule cuts them) is queued with `dagster job launch` while no daemon runs, each
run refreshing its owners one at a time (`ShardConfig.concurrency` 1), and the fleet's processes
are started: first the first sync, then, every owner's clock advanced a day, the daily refresh.
Owners an hour count from the first run's start to the last run's end (Dagster's run records
in PostgreSQL); the machine's CPU (every process: the server, the database, the broker, the
daemon, the workers or run processes) over the same span. A run succeeds only if every owner
in it agreed (`owner_warehouse` fails a run otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from owners import advance_clocks, serve  # noqa: E402

import fleetside  # noqa: E402
from centsync.pipelines.fleet import definitions as fleet_defs  # noqa: E402
from centsync.pipelines.fleet.shard import SHARD  # noqa: E402
from centsync.pipelines.settings import Settings  # noqa: E402
from centsync.sandbox.fleet import key_variable  # noqa: E402

VARIANTS = {"celery": "celery", "default": "postgres"}  # --launcher: its dagster-*.yaml


def launch_round(side: fleetside.Fleetside, requests: list[Any], mode: str) -> None:
    """`dagster job launch` (queued) of the daily schedule's own run requests
    (`fleet.definitions.shard_requests`), each refreshing its owners one at a time."""
    config = {"ops": {"owner_warehouse": {"config": {"mode": mode, "concurrency": 1}}}}
    for request in requests:
        tags = dict(request.tags)
        if request.partition_key:  # a shard of one owner is that owner's partition
            tags["dagster/partition"] = request.partition_key
        side.run(
            str(fleetside.BIN / "dagster"), "job", "launch", "-w", "workspace.yaml",
            "-j", "owners_refresh", "--tags", json.dumps(tags), "--config-json", json.dumps(config),
        )  # fmt: skip


def measure(
    side: fleetside.Fleetside, requests: list[Any], args: argparse.Namespace, pg: dict[str, str]
) -> dict[str, Any]:
    """One round: every shard queued while no daemon runs, then the fleet's processes started
    and every run finished; owners an hour, and the machine's CPU per owner from the first
    run's start to the last run's end (queueing the runs and starting the processes are not
    the runs' work: the daemon's schedule asks runs without a process per run)."""
    before = {r[0] for r in _runs(pg)}
    launch_round(side, requests, "auto")
    if args.launcher == "celery":
        side.start(
            str(fleetside.BIN / "celery"), "-A", "dagster_celery.app", "worker",
            "-Q", "dagster", "--concurrency", str(args.workers), "--prefetch-multiplier=1",
        )  # fmt: skip
    side.start(str(fleetside.BIN / "dagster-daemon"), "run", "-w", "workspace.yaml")
    try:
        while not any(r[0] not in before and r[2] for r in _runs(pg)):
            time.sleep(0.2)
        cpu = psutil.cpu_times()
        deadline = time.monotonic() + 3600
        while True:
            runs = [r for r in _runs(pg) if r[0] not in before]
            if sum(1 for r in runs if r[1] in DONE) >= len(requests) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        used = psutil.cpu_times()
    finally:
        side.stop()
    owners = args.owners
    wall = max(r[3] or 0 for r in runs) - min(r[2] or float("inf") for r in runs)
    return {
        "owners": owners,
        "runs": len(runs),
        "succeeded": sum(1 for r in runs if r[1] == "SUCCESS"),
        "wall_s": round(wall, 1),
        "owners_per_hour": round(owners * 3600 / wall),
        "machine_cpu_s_per_owner": round(
            ((used.user + used.system) - (cpu.user + cpu.system)) / owners, 2
        ),
    }


DONE = ("SUCCESS", "FAILURE", "CANCELED")


def _runs(pg: dict[str, str]) -> list[tuple[str, str, float | None, float | None]]:
    """Every run in the instance's PostgreSQL: id, status, start and end (epoch seconds)."""
    import psycopg2

    con = psycopg2.connect(
        host=pg["CENTSYNC_FLEET_PG_HOST"],
        port=int(pg["CENTSYNC_FLEET_PG_PORT"]),
        user=pg["CENTSYNC_FLEET_PG_USER"],
        dbname=pg["CENTSYNC_FLEET_PG_DB"],
    )
    try:
        with con.cursor() as cur:
            cur.execute("SELECT run_id, status, start_time, end_time FROM runs")
            return [(str(a), str(b), c, d) for a, b, c, d in cur.fetchall()]
    finally:
        con.close()


def _kill_leftovers(folder: Path) -> None:
    """Processes a run left behind in the bench's folder (Dagster's compute-log tails)."""
    for proc in psutil.process_iter(["cmdline"]):
        if any(str(folder) in part for part in proc.info["cmdline"] or []):
            with contextlib.suppress(psutil.Error):
                proc.kill()


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--owners", type=int, default=50)
    p.add_argument("--launcher", choices=tuple(VARIANTS), default="celery")
    p.add_argument("--shard", type=int, default=SHARD, help="owners per run")
    p.add_argument("--workers", type=int, default=2, help="Celery worker slots (celery)")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    if not fleetside.available():
        raise SystemExit("needs Debian's postgresql 15 and redis-server (apt-get install ...)")
    print(f"load: {os.getloadavg()}  cores: {os.cpu_count()}  launcher: {args.launcher}")
    with (
        tempfile.TemporaryDirectory(prefix="centsync-fleet-bench-") as tmp,
        fleetside.postgres() as pg,
        fleetside.redis() as redis_url,
    ):
        folder = Path(tmp)
        server, doc = serve(args.owners, folder, rate_limit=True)
        names = sorted(doc["owners"])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CENTSYNC_", "DAGSTER_"))}
        env |= (
            pg
            | fleetside.celery_environ(folder, redis_url)
            | {
                "CENTSYNC_OWNERS_FILE": str(folder / "owners.toml"),
                "XDG_DATA_HOME": str(folder / "data"),
                **{key_variable(n): k["read_only"] for n, k in doc["owners"].items()},
            }
        )
        side = fleetside.Fleetside(folder, env, VARIANTS[args.launcher])
        try:
            # the partitions the sensor would add; it then finds no new owner to first-sync
            side.run(
                sys.executable, "-c",
                "import sys; from dagster import DagsterInstance; "
                "DagsterInstance.get().add_dynamic_partitions('owners', sys.argv[1:])", *names,
            )  # fmt: skip
            # the runs the daily schedule asks: shards of consecutive owners (one lake shard each)
            fleet = Settings(
                data_home=folder / "data" / "centsync", owners_file=folder / "owners.toml"
            )
            requests = list(fleet_defs.shard_requests(fleet, names, "auto", "bench", args.shard))
            first = measure(side, requests, args, pg)
            print(f"  {args.owners} owners first sync: {json.dumps(first)}", flush=True)
            advance_clocks(doc, 1)
            daily = measure(side, requests, args, pg)
            print(f"  {args.owners} owners daily refresh: {json.dumps(daily)}", flush=True)
        finally:
            side.stop()
            _kill_leftovers(folder)
            server.terminate()
            server.wait()
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
