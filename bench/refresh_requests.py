"""Requests per refresh, by kind of refresh, for 3 and 10 years of history (docs/refresh.md).

For each history length: a first sync, a refresh at once (nothing changed), then a week of
daily refreshes (the sandbox clock advances a day before each, so bank feeds bring new rows
into the hot window and rolling verification re-reads its share of the history). Prints the
requests each spent, split into fingerprints, rolling verification, the hot window and the
rest, and checks the warehouse against the service at the end.

    uv run python bench/refresh_requests.py                 # 3 and 10 years, household density
    uv run python bench/refresh_requests.py --years 10 --transactions 100000
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import tempfile
from pathlib import Path

import duckdb
import httpx

from centsync.pipelines.cli.main import JEMALLOC_CONF

os.environ.setdefault("_RJEM_MALLOC_CONF", JEMALLOC_CONF)  # as the console script, before Polars
from centsync.extract import ApiClient
from centsync.pipelines.refresh.run import RefreshOptions, RefreshSummary, run_refresh
from centsync.sandbox.server import free_port, spawn_serve


def split(s: RefreshSummary) -> dict[str, int]:
    """The requests of one refresh by purpose (list pages and their window checks by reason)."""
    pages = {"verification": 0, "hot window": 0, "other reads": 0}
    for r in s.months_reread:
        kind = (
            "verification"
            if r["reason"].startswith("verification")
            else "hot window"
            if r["reason"] == "hot window"
            else "other reads"
        )
        pages[kind] += max(1, math.ceil(r["rows"] / 200)) + (0 if s.mode == "full" else 1)
    spending = s.requests.get("GET /v1/analytics/spending", 0)
    summaries = s.requests.get("GET /v1/transactions/summary", 0)
    # per year: a summary and spending by category and by merchant (checks of windows read
    # are counted with their reads; 3 spending and 1 summary are the landed aggregates)
    fingerprints = (
        max(0, summaries - 1 - len(s.months_reread)) + max(0, spending - 3)
        if s.mode != "full"
        else 0
    )
    fixed = s.requests_total - fingerprints - sum(pages.values())
    return {"total": s.requests_total, "fingerprints": fingerprints, **pages, "fixed": fixed}


def one(years: int, n: int | None) -> None:
    tmp = Path(tempfile.mkdtemp())
    keys_file = tmp / "keys.json"
    options = ["--port", str(free_port()), "--no-rate-limit", "--years", str(years)]
    if n:
        options += ["--transactions", str(n)]
    proc = spawn_serve(keys_file, *options)
    try:
        keys = json.loads(keys_file.read_text())
        admin = httpx.Client(
            base_url=keys["base_url"],
            headers={"Authorization": f"Bearer {keys['admin_token']}"},
        )
        wh = tmp / "centsync.duckdb"
        with ApiClient(keys["base_url"], keys["read_only"]) as client:
            runs: list[tuple[str, RefreshSummary]] = []
            runs.append(("first sync", run_refresh(client, str(wh), RefreshOptions())))
            runs.append(("at once, no change", run_refresh(client, str(wh), RefreshOptions())))
            for day in range(1, 8):
                admin.post("/_sandbox/clock/advance", json={"days": 1}).raise_for_status()
                runs.append((f"day {day}", run_refresh(client, str(wh), RefreshOptions())))
        state = admin.get("/_sandbox/state").json()
        con = duckdb.connect(str(wh), read_only=True)
        local = con.execute("SELECT count(*), coalesce(sum(amount), 0) FROM core.transactions")
        count, cents = local.fetchone() or (0, 0)
        con.close()
        exact = count == len(state["transactions"]) and cents == sum(
            t["amount"] for t in state["transactions"]
        )
        months = len({t["booked_at"][:7] for t in state["transactions"]})
        print(
            f"\n{years} years of history: {len(state['transactions']):,} transactions, "
            f"{months} months (warehouse {'exact' if exact else 'NOT EXACT'} at the end)"
        )
        print(
            f"{'refresh':<20} {'mode':<12} {'total':>6} {'fingerpr.':>9} {'verify':>6} "
            f"{'hot':>4} {'other':>5} {'fixed':>5} {'months verified':>15} {'rows changed':>12}"
        )
        for label, s in runs:
            p = split(s)
            print(
                f"{label:<20} {s.mode:<12} {p['total']:>6} {p['fingerprints']:>9} "
                f"{p['verification']:>6} {p['hot window']:>4} {p['other reads']:>5} "
                f"{p['fixed']:>5} "
                f"{s.months_verified:>15} {s.rows_changed:>12}"
            )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--years", type=int, nargs="+", default=[3, 10])
    ap.add_argument(
        "--transactions", type=int, default=None, help="ledger size (default: household density)"
    )
    args = ap.parse_args()
    for years in args.years:
        one(years, args.transactions)


if __name__ == "__main__":
    main()
