"""Refresh benchmark: first sync, no-change refresh and full re-read of a 10-year ledger over
loopback (the full re-read reads every row again and, nothing having changed, writes none).

The sandbox runs as its own process (`centsync sandbox serve --no-rate-limit`); this process
runs the refresh (extract, validate, load, publish) and reports its own peak RSS.

    uv run python bench/refresh.py --transactions 100000 1000000
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from centsync.extract import ApiClient
from centsync.pipelines.refresh.run import RefreshOptions, run_refresh
from centsync.sandbox.server import free_port, spawn_serve


def one(n: int, years: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    keys_file = tmp / "keys.json"
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
        wh = tmp / "centsync.duckdb"
        floor = math.ceil(n / 200)
        with ApiClient(keys["base_url"], keys["read_only"], max_window_rows=10**12) as client:
            for label, mode in (
                ("first refresh", "auto"),
                ("no-change refresh", "auto"),
                ("full re-read", "full"),
            ):
                t = time.perf_counter()
                s = run_refresh(client, str(wh), RefreshOptions(mode=mode))  # type: ignore[arg-type]
                secs = time.perf_counter() - t
                rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                extra = (
                    s.requests_total - floor if label != "no-change refresh" else s.requests_total
                )
                print(
                    f"{n:>9,} rows, {years} years, {label:<17}: {secs:7.2f} s, {s.requests_total:6,} requests "
                    f"(floor {floor:,}; {'over floor ' + str(extra) if label != 'no-change refresh' else 'budget 6+3y+hot+aggregates+verification'}), "
                    f"{s.transactions / secs:10,.0f} rows/s, changed {s.rows_changed:,}, peak RSS {rss:,.0f} MB",
                    flush=True,
                )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--years", type=int, default=10)
    args = ap.parse_args()
    for n in args.transactions:
        # Each size in a fresh process, so peak RSS is that size's own.
        if len(args.transactions) > 1:
            subprocess.run(
                [sys.executable, __file__, "--transactions", str(n), "--years", str(args.years)],
                check=True,
            )
        else:
            one(n, args.years)


if __name__ == "__main__":
    main()
