"""Many owners: owners an hour (first sync and daily refresh), requests and disk per owner, peak
memory, and the cross-owner spending query over the shared lake (issue 30).

    uv run --frozen python bench/owners.py                       # 50 and 200 owners, shards
    uv run --frozen python bench/owners.py --owners 50 --launch cli     # `refresh --all`
    uv run --frozen python bench/owners.py --owners 20 --no-rate-limit  # allowance not binding
    uv run --frozen python bench/owners.py --owners 0 --synthetic 2000  # only the 10M-row query

One sandbox server serves every owner (`centsync sandbox serve --owners N`, its own process,
rate limits on: 300 a minute and 10,000 an hour per key, unless --no-rate-limit). Each owner is
a 3-year household (~1,700 rows). `--launch shard` refreshes the owners in this one process,
`--concurrency` at a time (`pipelines/fleet/shard.py`: what a Dagster shard run does);
`--launch cli` runs `centsync refresh --all` (the same engine, in one process). The daily refresh advances
every owner's clock one day first. CPU is this process and its children (the sandbox server
excluded: it is measured apart). Figures move with the machine's load: `uptime` is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from centsync.pipelines.fleet.shard import SHARD
from centsync.sandbox.fleet import key_variable
from centsync.sandbox.server import free_port, spawn_serve
from fleetside import fleet_environ


def cpu_seconds() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def serve(n: int, folder: Path, rate_limit: bool) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    keys = folder / "keys.json"
    options = ["--owners", str(n), "--port", str(free_port())]
    options += ["--owners-file", str(folder / "owners.toml")]
    options += [] if rate_limit else ["--no-rate-limit"]
    started = time.monotonic()
    proc = spawn_serve(keys, *options, timeout=1800)
    doc = json.loads(keys.read_text())
    print(f"  sandbox: {n} owners served in {time.monotonic() - started:.1f} s", flush=True)
    for name, k in doc["owners"].items():
        os.environ[key_variable(name)] = k["read_only"]
    return proc, doc


def advance_clocks(doc: dict[str, Any], days: int = 1) -> None:
    with httpx.Client(base_url=doc["base_url"], timeout=30) as c:
        for k in doc["owners"].values():
            r = c.post(
                "/_sandbox/clock/advance",
                json={"days": days},
                headers={"Authorization": f"Bearer {k['admin_token']}"},
            )
            r.raise_for_status()


def run_round(
    args: argparse.Namespace, folder: Path, names: list[str], mode: str
) -> dict[str, Any]:
    """One refresh of every owner; its figures."""
    cpu, started = cpu_seconds(), time.monotonic()
    if args.launch == "shard":
        results = shards_in_workers(args, folder, names, mode)
    else:
        env = {**os.environ, "XDG_DATA_HOME": str(folder / "xdg")}
        env |= {
            "CENTSYNC_OWNERS_FILE": str(folder / "owners.toml"),
            "CENTSYNC_LAKE": str(folder / "lake"),
        }
        flags = ["--full"] if mode == "full" else []
        out = subprocess.run(
            [sys.executable, "-m", "centsync.pipelines.cli", "refresh", "--all", "--concurrency", str(args.concurrency), *flags],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        doc = json.loads(out.stdout.strip().splitlines()[-1])
        results = [{"owner": n, **r} for n, r in doc["owners"].items()]
    wall = time.monotonic() - started
    cpu = cpu_seconds() - cpu
    ok = [r for r in results if r.get("verdict") == "agree"]
    seconds = sorted(r.get("seconds", 0.0) for r in results)
    lake = sorted((r.get("lake") or {}).get("seconds", 0.0) for r in results)
    return {
        "owners": len(results),
        "agree": len(ok),
        "errors": [r.get("error") for r in results if r.get("error")][:3],
        "wall_s": round(wall, 1),
        "owners_per_hour": round(len(results) * 3600 / wall),
        "cpu_s_per_owner": round(cpu / max(1, len(results)), 2),
        "requests_per_owner": statistics.median(r.get("requests") or 0 for r in results),
        "requests_max": max(r.get("requests") or 0 for r in results),
        "refresh_p50_p95_s": (_pct(seconds, 50), _pct(seconds, 95)),
        "publish_p50_p95_s": (_pct(lake, 50), _pct(lake, 95)),
        "lake_retries": sum((r.get("lake") or {}).get("retries", 0) for r in results),
    }


def shards_in_workers(
    args: argparse.Namespace, folder: Path, names: list[str], mode: str
) -> list[dict[str, Any]]:
    """`--processes` long-lived worker processes (as Celery workers, or the queued coordinator's
    concurrent runs), each refreshing its shards of `--shard` owners one after the other; a
    shard publishes into the lake in one commit per changed table."""
    shards = [names[i : i + args.shard] for i in range(0, len(names), args.shard)]
    procs = []
    for w in range(args.processes):
        job = {
            "folder": str(folder),
            "shards": shards[w :: args.processes],
            "concurrency": args.concurrency,
            "mode": mode,
            "verify_pages": args.verify_pages,
        }
        cmd = [sys.executable, __file__, "--worker", json.dumps(job)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=fleet_environ()))
    results: list[dict[str, Any]] = []
    for proc in procs:
        out, _ = proc.communicate()
        results += json.loads(out.strip().splitlines()[-1])
    return results


def worker(job: dict[str, Any]) -> None:
    """One worker process: its shards, one after the other; the results as one JSON line."""
    from centsync.pipelines.fleet.shard import refresh_shard
    from centsync.pipelines.settings import Settings

    folder = Path(job["folder"])
    base = Settings(
        data_home=folder / "data",
        owners_file=folder / "owners.toml",
        lake=folder / "lake",
        verify_pages=job["verify_pages"],
    )
    results = []
    for shard in job["shards"]:
        results += [
            r.to_json() for r in refresh_shard(base, shard, job["concurrency"], job["mode"])
        ]
    print(json.dumps(results))


def _pct(values: list[float], p: int) -> float:
    return round(values[min(len(values) - 1, len(values) * p // 100)], 2) if values else 0.0


def disk(folder: Path, names: list[str]) -> dict[str, Any]:
    def size(p: Path) -> int:
        return (
            sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
            if p.is_dir()
            else p.stat().st_size
        )

    owners = folder / "data" / "owners"  # Settings(data_home=folder / "data") in run_round
    if not owners.is_dir():  # --launch cli: XDG_DATA_HOME=folder / "xdg"
        owners = folder / "xdg" / "centsync" / "owners"
    wh = [size(owners / n / "centsync.duckdb") for n in names]
    dagster = [
        size(owners / n / "centsync.dagster")
        for n in names
        if (owners / n / "centsync.dagster").exists()
    ]
    return {
        "warehouse_mb_median": round(statistics.median(wh) / 1e6, 2),
        "warehouse_mb_max": round(max(wh) / 1e6, 2),
        "dagster_home_mb_median": round(statistics.median(dagster) / 1e6, 2) if dagster else 0,
        "lake_mb": round(size(folder / "lake") / 1e6, 1),
    }


SPENDING = """SELECT owner, month, sum(amount) AS cents, count(*) AS n FROM core.transactions
              WHERE type = 'expense' GROUP BY ALL"""


def query_times(lake: Path, one_owner: str, reps: int = 5) -> dict[str, float]:
    """Spending by owner and month over every owner (and one owner): Polars, DuckDB."""
    import polars as pl

    from centsync.warehouse.lake import open_lake, referenced

    table = str(lake / "core" / "transactions")

    def best(fn: Any) -> float:
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return round(min(times) * 1000, 1)

    def polars_all() -> None:
        (
            pl.scan_delta(table).filter(pl.col("type") == "expense")
            .group_by("owner", "month").agg(pl.col("amount").sum(), pl.len()).collect()
        )  # fmt: skip

    def polars_one() -> None:
        (
            pl.scan_delta(table).filter((pl.col("owner") == one_owner) & (pl.col("type") == "expense"))
            .group_by("month").agg(pl.col("amount").sum()).collect()
        )  # fmt: skip

    def duck_all() -> None:
        con = open_lake(lake, only=referenced(SPENDING))  # as `centsync sql --all` does
        con.execute(SPENDING).fetchall()
        con.close()

    def household() -> None:
        query = "SELECT * FROM household.cash_flow_by_month"
        con = open_lake(lake, only=referenced(query))
        con.execute(query).fetchall()
        con.close()

    return {
        "polars_all_ms": best(polars_all),
        "polars_one_owner_ms": best(polars_one),
        "duckdb_sql_all_ms": best(duck_all),
        "household_view_ms": best(household),
    }


def synthetic_lake(folder: Path, owners: int, rows_per_owner: int, shard: int = 25) -> Path:
    """A lake of `owners` x `rows_per_owner` transactions, in the layout shard runs publish:
    one commit per shard of `shard` owners, each into its own partition; then maintained."""
    import duckdb
    from deltalake import write_deltalake

    from centsync.warehouse.lake import maintain

    lake = folder / "synthetic"
    table = lake / "core" / "transactions"
    started = time.monotonic()
    for first in range(1, owners + 1, shard):
        last = min(owners, first + shard - 1)
        data = duckdb.sql(f"""
            SELECT printf('owner-%05d', {first}) AS shard, printf('owner-%05d', o) AS owner,
                   printf('%d-%d', o, r) AS id, printf('acc-%d', r % 3) AS account_id,
                   -(hash(o, r) % 20000)::BIGINT AS amount,
                   DATE '2023-12-01' + (hash(r, o) % 1095)::INT AS booked_at,
                   date_trunc('month', booked_at)::DATE AS month,
                   CASE WHEN r % 10 = 0 THEN 'income' WHEN r % 10 = 1 THEN 'transfer' ELSE 'expense' END AS type
            FROM range({first}, {last + 1}) o(o), range({rows_per_owner}) r(r)
        """).to_arrow_table()  # fmt: skip
        write_deltalake(table, data, mode="append", partition_by=["shard"])
    maintain(lake)
    print(
        f"  synthetic lake: {owners} owners, {owners * rows_per_owner:,} rows in {time.monotonic() - started:.0f} s",
        flush=True,
    )
    return lake


def save(report: dict[str, Any]) -> None:
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "owners.json").write_text(json.dumps(report, indent=2, default=str))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--owners", type=int, nargs="+", default=[50, 200])
    p.add_argument("--launch", choices=("shard", "cli"), default="shard")
    p.add_argument("--concurrency", type=int, default=1, help="owners at once in a shard")
    p.add_argument("--processes", type=int, default=2, help="shard workers (--launch shard)")
    p.add_argument("--shard", type=int, default=SHARD, help="owners per shard (--launch shard)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--no-rate-limit", action="store_true")
    p.add_argument("--verify-pages", type=int, default=4)
    p.add_argument(
        "--synthetic", type=int, default=2000, help="owners in the synthetic lake (0: none)"
    )
    p.add_argument("--rows-per-owner", type=int, default=5000)
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    return p.parse_args()


def measure(args: argparse.Namespace, n: int, folder: Path) -> dict[str, Any]:
    """N owners served, first-synced, a day later refreshed; then disk, maintenance, queries."""
    from centsync.warehouse.lake import maintain

    proc, doc = serve(n, folder, not args.no_rate_limit)
    server = psutil.Process(proc.pid)
    names = list(doc["owners"])
    try:
        entry: dict[str, Any] = {}
        s_cpu = sum(server.cpu_times()[:2])
        entry["first_sync"] = run_round(args, folder, names, "auto")
        print(f"  {n} owners first sync: {json.dumps(entry['first_sync'])}", flush=True)
        advance_clocks(doc)
        entry["daily_refresh"] = run_round(args, folder, names, "auto")
        print(f"  {n} owners daily refresh: {json.dumps(entry['daily_refresh'])}", flush=True)
        entry["server_cpu_s_per_owner"] = round((sum(server.cpu_times()[:2]) - s_cpu) / n / 2, 2)
        entry["server_rss_mb"] = round(server.memory_info().rss / 1e6)
        entry["peak_rss_mb_bench_process"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        )
        # the largest finished child: a shard worker (the server is still running)
        entry["peak_rss_mb_worker"] = round(
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3
        )
        entry["disk"] = disk(folder, names)
        entry["query_before_maintenance"] = query_times(folder / "lake", names[0])
        started = time.monotonic()
        # `centsync lake --retain-hours 0`: the steady state (the default keeps a day more)
        done = maintain(folder / "lake", retain_hours=0)
        entry["maintenance"] = {
            "seconds": round(time.monotonic() - started, 2),
            "files_after": sum(d.files_after for d in done),
            "removed": sum(d.removed for d in done),
        }
        entry["disk"]["lake_mb_after_maintenance"] = disk(folder, names)["lake_mb"]
        entry["query"] = query_times(folder / "lake", names[0])
        print(f"  {n} owners: disk {entry['disk']} query {entry['query']}", flush=True)
        return entry
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def synthetic(args: argparse.Namespace) -> dict[str, Any]:
    """The cross-owner queries over a synthetic lake of `--synthetic` owners."""
    folder = Path(tempfile.mkdtemp(prefix="owners-synthetic-"))
    try:
        lake = synthetic_lake(folder, args.synthetic, args.rows_per_owner)
        found = {
            "owners": args.synthetic,
            "rows": args.synthetic * args.rows_per_owner,
            "lake_mb": round(
                sum(f.stat().st_size for f in lake.rglob("*") if f.is_file()) / 1e6, 1
            ),
            **query_times(lake, "owner-00001", reps=3),
        }
        print(f"  synthetic: {json.dumps(found)}", flush=True)
        return found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    args = parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    print(
        f"load: {os.getloadavg()}  cores: {os.cpu_count()}  launch: {args.launch} "
        f"processes {args.processes} x shard {args.shard} x {args.concurrency} at once",
        flush=True,
    )
    report: dict[str, Any] = {"load_before": os.getloadavg(), "args": vars(args), "runs": {}}
    for n in [x for x in args.owners if x > 0]:
        folder = Path(tempfile.mkdtemp(prefix=f"owners-{n}-"))
        try:
            report["runs"][n] = measure(args, n, folder)
            save(report)  # what is measured so far, whatever comes after
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    if args.synthetic:
        report["synthetic"] = synthetic(args)
    report["load_after"] = os.getloadavg()
    save(report)
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
