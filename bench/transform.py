"""Marts and reconciliation benchmark: every step on a warehouse of N transactions.

Builds the warehouse once with a real refresh from a sandbox served over loopback (without
the marts), then, in a fresh process so that peak RSS is this work's own, times each step of
`pipelines/reconcile.py`: reading core, building the seven marts (Polars + pandera), writing
them, comparing with the service's aggregates, and the evidence a difference costs (one row
corrupted on purpose, so the row-level diff against raw.* runs too).

    uv run python bench/transform.py --transactions 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(n: int, years: int, wh: Path) -> None:
    from centsync.extract import ApiClient
    from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
    from centsync.sandbox.server import free_port, spawn_serve

    keys_file = wh.parent / "keys.json"
    proc = spawn_serve(
        keys_file,
        "--port",
        str(free_port()),
        "--no-rate-limit",
        "--transactions",
        str(n),
        "--years",
        str(years),
    )
    try:
        keys = json.loads(keys_file.read_text())
        with ApiClient(keys["base_url"], keys["read_only"], max_window_rows=10**12) as client:
            t = time.perf_counter()
            s = run_refresh(client, str(wh), RefreshOptions(reconcile=False))
            print(
                f"built: {s.transactions:,} transactions in {time.perf_counter() - t:.1f} s",
                flush=True,
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)


def measure(wh: Path) -> None:
    import duckdb
    import polars as pl

    from centsync.pipelines import reconcile as pipeline
    from centsync.transform import marts as mart_rules
    from centsync.transform import reconcile as rules
    from centsync.warehouse import marts as store

    def rss() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    from centsync.pipelines.refresh.summary import DEFAULT_DUCKDB_MEMORY

    con = duckdb.connect(str(wh))
    con.execute(f"SET memory_limit = '{DEFAULT_DUCKDB_MEMORY}'")  # as a refresh and `reconcile` run
    steps: list[tuple[str, float, float]] = []
    total = time.perf_counter()

    def step(name: str, t0: float) -> None:
        steps.append((name, time.perf_counter() - t0, rss()))

    t = time.perf_counter()
    rid = store.latest_refresh(con)
    assert rid is not None
    aggregates = store.server_aggregates(con, rid)
    tx = store.transactions(con)
    core = mart_rules.CoreFrames(
        transactions=tx.lazy(),
        accounts=store.accounts(con).lazy(),
        categories=store.categories(con).lazy(),
        net_worth_history=store.net_worth_history(con).lazy(),
        today=pipeline.service_today(aggregates),
    )
    step("read core and server.*", t)
    t = time.perf_counter()
    frames = mart_rules.build(core)
    step("build 7 marts (Polars, pandera)", t)
    t = time.perf_counter()
    rows = store.replace_marts(con, frames)
    step("write marts (one transaction)", t)
    t = time.perf_counter()
    results = pipeline.compare(con, aggregates, tx)
    step(f"compare ({results.height:,} checks)", t)
    t = time.perf_counter()
    evidence = pipeline.gather_evidence(con, results, None, rid)
    explained = rules.explain(results, evidence)
    verdict = rules.verdict(explained)
    step(f"evidence and verdict ({verdict})", t)
    clean = time.perf_counter() - total
    del tx, core, frames, results, evidence, explained  # a real run holds one ledger, not two

    # one corrupted row: the row-level diff against what the service sent runs too
    con.execute(
        "UPDATE core.transactions SET amount = amount - 1 WHERE id = "
        "(SELECT id FROM core.transactions WHERE type = 'expense' ORDER BY id LIMIT 1)"
    )
    t = time.perf_counter()
    outcome = pipeline.reconcile(con, source="offline", refresh_id=rid)
    step(
        f"whole reconcile, one row corrupted ({outcome.verdict}, {outcome.row_differences.height} row)",
        t,
    )
    con.close()

    print(f"mart rows: {json.dumps(rows)}")
    for name, secs, peak in steps:
        print(f"  {name:<58} {secs:7.2f} s   peak RSS so far {peak:7,.0f} MB")
    print(f"  {'all marts and checks, clean warehouse':<58} {clean:7.2f} s")
    assert isinstance(pl.__version__, str)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=1_000_000)
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--warehouse", type=Path, help="(internal) measure this warehouse")
    args = ap.parse_args()
    if args.warehouse:
        measure(args.warehouse)
        return
    tmp = Path(tempfile.mkdtemp())
    try:
        wh = tmp / "centsync.duckdb"
        build(args.transactions, args.years, wh)
        subprocess.run([sys.executable, __file__, "--warehouse", str(wh)], check=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
