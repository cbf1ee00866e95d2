"""Benchmark: read every transaction of a large sandbox over loopback into an Arrow table.

    uv run --frozen python bench/extract_throughput.py [--sizes 100000 1000000] [--runs 1]

For each size the script starts ``centsync sandbox serve --no-rate-limit`` as its own process,
then runs each client in a fresh child process (so peak RSS is that client's alone):

* ``centsync``: ``AsyncApiClient.read_transactions`` over ``default_windows()`` (whole months,
  drift checks, summary verification, raw page bytes parsed in one NDJSON pass per window),
  each batch ``.to_arrow()`` with low-cardinality text dictionary-encoded, one table at the end.
* ``centsync-raw-parquet``: the same read keeping each record's raw JSON, every batch written
  to a Parquet file as it arrives (bounded memory: the warehouse's loading shape).
* ``naive``: a sequential ``httpx.Client``, ``resp.json()`` per page, every row kept as a
  dict, one Polars frame at the end, then ``.to_arrow()`` (no drift checks, no raw column).

It prints rows/s, requests against the floor ceil(N/200), peak RSS, and the ratio, and writes
the figures as JSON to ``bench/results/extract_throughput.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


# low-cardinality text columns are stored once per distinct value (Arrow dictionaries)
DICTIONARY_COLUMNS = ("account_id", "concept", "type", "category_id", "expense_goal_id")


def client_centsync(base_url: str, key: str, mode: str) -> dict[str, object]:
    """``table``: typed columns into one in-memory Arrow table (dictionary-encoded text);
    ``parquet``: typed columns plus each record's raw JSON, streamed batch by batch to a
    Parquet file (the shape of a warehouse load: memory bounded by a window)."""
    import asyncio

    import polars as pl
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from centsync.extract import AsyncApiClient, run
    from centsync.extract._runtime import OPT_IN_PARSE_NICE

    async def go() -> dict[str, object]:
        # the parsing threads below the event loop: an opt-in that helps a bare read only
        async with AsyncApiClient(
            base_url, key, timeout=120, parse_nice=OPT_IN_PARSE_NICE
        ) as client:
            started = time.perf_counter()
            windows = await client.default_windows()
            tables: list[pa.Table] = []
            rows = 0
            writer: pq.ParquetWriter | None = None
            out = Path(tempfile.mkdtemp()) / "transactions.parquet"

            def keep(frame: pl.DataFrame) -> int:
                nonlocal writer
                # Polars' string views as they are (the default conversion copies every string)
                table = frame.to_arrow(compat_level=pl.CompatLevel.newest())
                if mode == "parquet":
                    if writer is None:
                        writer = pq.ParquetWriter(out, table.schema)
                    writer.write_table(table)
                else:
                    for name in DICTIONARY_COLUMNS:
                        i = table.schema.get_field_index(name)
                        table = table.set_column(i, name, pc.dictionary_encode(table.column(i)))
                    tables.append(table)
                return table.num_rows

            async for batch in client.read_transactions(windows, raw=mode == "parquet"):
                # converted and written off the event loop, as any async consumer should
                rows += await asyncio.to_thread(keep, batch.frame)
            if writer is not None:
                writer.close()
            result = pa.concat_tables(tables) if tables else None
            elapsed = time.perf_counter() - started
            total = client.stats.total()
            return {
                "rows": rows,
                "seconds": elapsed,
                "requests": total.requests,
                "retries": total.retries,
                "rereads": total.rereads,
                "windows": len(windows),
                "mb_received": total.bytes / 1e6,
                "table_mb": result.nbytes / 1e6 if result is not None else None,
                "parquet_mb": out.stat().st_size / 1e6 if out.exists() else None,
            }

    return run(go())


def client_naive(base_url: str, key: str) -> dict[str, object]:
    import httpx
    import polars as pl

    started = time.perf_counter()
    rows: list[dict[str, object]] = []
    requests = 0
    received = 0
    with httpx.Client(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=120
    ) as http:
        page = 1
        while True:
            resp = http.get("/v1/transactions", params={"page": page, "limit": 200})
            requests += 1
            resp.raise_for_status()
            received += len(resp.content)
            body = resp.json()
            rows.extend(body["data"])
            if page >= body["pages"]:
                break
            page += 1
    frame = pl.DataFrame(rows, infer_schema_length=None)  # nulls early on need a full scan
    table = frame.to_arrow(compat_level=pl.CompatLevel.newest())
    return {
        "rows": table.num_rows,
        "seconds": time.perf_counter() - started,
        "requests": requests,
        "retries": 0,
        "rereads": 0,
        "windows": 1,
        "mb_received": received / 1e6,
        "table_mb": table.nbytes / 1e6,
        "parquet_mb": None,
    }


def child(args: argparse.Namespace) -> None:
    info = json.loads(Path(args.keys).read_text())
    if args.client == "naive":
        result = client_naive(info["base_url"], info["read_only"])
    else:
        mode = "parquet" if args.client == "centsync-raw-parquet" else "table"
        result = client_centsync(info["base_url"], info["read_only"], mode)
    result["peak_rss_mb"] = _peak_rss_mb()
    print(json.dumps(result))


def serve(size: int, keys: Path) -> subprocess.Popen[bytes]:
    from centsync.sandbox.server import free_port, spawn_serve

    return spawn_serve(
        keys,
        "--port",
        str(free_port()),
        "--transactions",
        str(size),
        "--no-rate-limit",
        "--years",
        "3",
    )


def run_client(name: str, keys: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, "--keys", str(keys)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if out.returncode:
        raise SystemExit(f"client {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument(
        "--clients", nargs="+", default=["centsync", "centsync-raw-parquet", "naive"]
    )
    parser.add_argument("--runs", type=int, default=1, help="runs per client; the best is kept")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.client = args.child
        child(args)
        return

    results: list[dict[str, object]] = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            keys = Path(tmp) / "keys.json"
            started = time.monotonic()
            server = serve(size, keys)
            print(
                f"\n== {size:,} transactions (server ready in {time.monotonic() - started:.0f} s)"
            )
            try:
                for name in args.clients:
                    best: dict[str, object] | None = None
                    for _ in range(args.runs):
                        r = run_client(name, keys)
                        if best is None or float(r["seconds"]) < float(best["seconds"]):  # type: ignore[arg-type]
                            best = r
                    assert best is not None
                    best.update(client=name, size=size, floor=math.ceil(size / 200))
                    best["rows_per_s"] = float(best["rows"]) / float(best["seconds"])  # type: ignore[arg-type]
                    results.append(best)
                    print(
                        f"{name:15s} {best['rows']:>9,} rows in {float(best['seconds']):6.2f} s"  # type: ignore[arg-type]
                        f" = {best['rows_per_s']:>9,.0f} rows/s | requests {best['requests']:,}"
                        f" (floor {best['floor']:,}) | peak RSS {float(best['peak_rss_mb']):.0f} MB"  # type: ignore[arg-type]
                    )
            finally:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
        by_name = {r["client"]: r for r in results if r["size"] == size}
        if "centsync" in by_name and "naive" in by_name:
            ratio = float(by_name["centsync"]["rows_per_s"]) / float(by_name["naive"]["rows_per_s"])  # type: ignore[arg-type]
            print(f"centsync / naive: {ratio:.2f}x")
    out = ROOT / "bench" / "results" / "extract_throughput.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"\nfigures written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
