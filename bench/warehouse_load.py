"""Benchmark the warehouse's bulk paths: validate and load N synthetic transactions, then a month.

Usage: uv run --frozen python bench/warehouse_load.py [--rows 1000000] [--months 120]

Prints rows/s for validation alone, the first full load (validation included) through
`Warehouse.refreshing` (copy, load, checkpoint, publish), a one-month replace on the loaded
warehouse, the local fingerprints query, and peak RSS during each phase.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import psutil

from centsync.extract import TRANSACTION_SCHEMA
from centsync.warehouse import Warehouse, split_valid
from centsync.warehouse.fingerprints import local_category_spending, local_totals


def _uuids(n: int) -> pl.Series:
    """n random uuid4-shaped strings, built in Polars from one block of random bytes."""
    blob = os.urandom(16 * n).hex()
    hexes = pl.Series("h", [blob[i : i + 32] for i in range(0, 32 * n, 32)])
    return (
        pl.DataFrame({"h": hexes})
        .select(
            pl.concat_str(
                [
                    pl.col("h").str.slice(0, 8),
                    pl.col("h").str.slice(8, 4),
                    pl.lit("4") + pl.col("h").str.slice(13, 3),
                    pl.lit("a") + pl.col("h").str.slice(17, 3),
                    pl.col("h").str.slice(20, 12),
                ],
                separator="-",
            )
        )
        .to_series()
    )


def synthetic(n: int, months: int, *, start: dt.date = dt.date(2016, 1, 1)) -> pl.DataFrame:
    """A transactions frame shaped like the extract client's, spread over `months` months."""
    ids = _uuids(n)
    accounts = _uuids(8)
    categories = _uuids(20)
    # Polars-only generation: every column is an expression over the row number and its hash.
    frame = pl.DataFrame(
        {"id": ids, "_i": pl.int_range(n, dtype=pl.Int64, eager=True)}
    ).with_columns((pl.col("_i").hash(1) % 10_000).alias("_r"))
    acct = pl.Series("a", accounts)
    cats = pl.Series("c", categories)
    frame = frame.with_columns(
        account_id=pl.lit(acct).gather((pl.col("_i").hash(2) % 8).cast(pl.Int64)),
        category_id=pl.when(pl.col("_r") % 10 == 0)
        .then(None)
        .otherwise(pl.lit(cats).gather((pl.col("_i").hash(3) % 20).cast(pl.Int64))),
        concept=pl.format("Merchant {}", pl.col("_i").hash(4) % 5_000),
        type=pl.when(pl.col("_r") < 8_000)
        .then(pl.lit("expense"))
        .when(pl.col("_r") < 9_300)
        .then(pl.lit("income"))
        .otherwise(pl.lit("transfer")),
        booked_at=pl.lit(start).dt.offset_by(pl.format("{}mo", pl.col("_i") % months))
        + pl.duration(days=(pl.col("_i").hash(5) % 28).cast(pl.Int64)),
        expense_goal_id=pl.lit(None, pl.String),
    )
    frame = frame.with_columns(
        amount=pl.when(pl.col("type") == "expense")
        .then(-((pl.col("_i").hash(6) % 20_000).cast(pl.Int64) + 1))
        .otherwise((pl.col("_i").hash(6) % 300_000).cast(pl.Int64) + 1),
        created_at=pl.col("booked_at").cast(pl.Datetime("ms")).dt.replace_time_zone("UTC"),
    ).with_columns(updated_at=pl.col("created_at"))
    cols = [c for c in TRANSACTION_SCHEMA if c != "raw"]  # the extract client's columns
    frame = frame.select(cols)
    raw = frame.select(
        pl.struct(
            *[pl.col(c) for c in cols if c not in ("created_at", "updated_at")],
            pl.col("created_at").dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
            pl.col("updated_at").dt.strftime("%Y-%m-%dT%H:%M:%S%.3fZ"),
        ).struct.json_encode()
    ).to_series()
    return frame.with_columns(raw.alias("raw"))


class PeakRss:
    """Samples this process's RSS every 20 ms while active; `peak` is the highest seen."""

    def __init__(self) -> None:
        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.02)

    @contextmanager
    def watch(self) -> Iterator[PeakRss]:
        """Sample while the block runs."""
        self.peak = self.proc.memory_info().rss
        thread = threading.Thread(target=self._run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            self._stop.clear()
            self.peak = max(self.peak, self.proc.memory_info().rss)


def _phase(name: str, rows: int, fn: Callable[[], Any]) -> tuple[float, int]:
    rss = PeakRss()
    base = rss.proc.memory_info().rss
    with rss.watch():
        t0 = time.perf_counter()
        fn()
        elapsed = time.perf_counter() - t0
    rate = rows / elapsed if elapsed else float("inf")
    print(
        f"{name:<44} {rows:>9,} rows  {elapsed:7.2f} s  {rate:>12,.0f} rows/s  peak RSS {rss.peak / 2**20:6.0f} MB (+{(rss.peak - base) / 2**20:.0f})"
    )
    return elapsed, rss.peak


def _first_loads(frame: pl.DataFrame, tmp: Path) -> Path:
    """Validation and the three ways of loading a first sync; returns the whole-frame file."""
    path = tmp / "centsync.duckdb"
    _phase(
        "validate (pandera, collected frame)",
        frame.height,
        lambda: split_valid("transactions", frame),
    )

    def first_load() -> None:
        with Warehouse.refreshing(path, mode="full") as wh:
            wh.replace_all_transactions(frame)

    _phase("first full load (validate+load+publish)", frame.height, first_load)
    windowed = tmp / "windowed.duckdb"
    keys = frame.select(pl.col("booked_at").dt.strftime("%Y-%m").alias("m")).to_series()
    parts = {m: frame.filter(keys == m) for m in keys.unique().sort().to_list()}

    def windowed_load() -> None:
        # The refresh's real pattern: one replace per month read, not one giant frame.
        with Warehouse.refreshing(windowed, mode="full") as wh:
            for month, part in parts.items():
                wh.replace_months([month], part, reason="first sync")

    _phase(f"first sync as {len(parts)} one-month replaces", frame.height, windowed_load)
    packed = tmp / "packed.duckdb"

    def packed_load() -> None:
        # The same month-by-month reads, packed by Warehouse.batched into ~100k-row loads.
        with Warehouse.refreshing(packed, mode="full") as wh, wh.batched() as batch:
            for month, part in parts.items():
                batch.add([month], part, reason="first sync")

    _phase("first sync, months packed by batched()", frame.height, packed_load)
    size = path.stat().st_size
    print(f"published file: {size / 2**20:.0f} MB")
    return path


def _loaded_warehouse(frame: pl.DataFrame, path: Path) -> None:
    """A one-month refresh, the fingerprint reads and a full re-read on the loaded file."""
    month = frame.filter(pl.col("booked_at").dt.truncate("1mo") == dt.date(2020, 6, 1))
    edited = month.with_columns((pl.col("amount") - 1).alias("amount"))

    def month_replace() -> None:
        with Warehouse.refreshing(path) as wh:
            wh.replace_months(["2020-06"], edited, reason="bench")

    _phase("refresh: copy + one-month replace + publish", month.height, month_replace)

    wh = Warehouse.open(path, read_only=True)
    # the refresh's local fingerprint of the whole ledger (warehouse/fingerprints.py)
    _phase(
        "local_totals, whole ledger (SQL)",
        frame.height,
        lambda: local_totals(wh.con, None, dt.date(2999, 12, 31)),
    )
    _phase(
        "local_category_spending, whole ledger (SQL)",
        frame.height,
        lambda: local_category_spending(wh.con, None, dt.date(2999, 12, 31)),
    )
    wh.close()

    def full_again() -> None:
        with Warehouse.refreshing(path, mode="full") as w2:
            w2.replace_all_transactions(frame)

    _phase("full re-read onto a loaded warehouse", frame.height, full_again)


def main() -> None:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--months", type=int, default=120)
    args = parser.parse_args()

    t0 = time.perf_counter()
    frame = synthetic(args.rows, args.months)
    print(
        f"generated {frame.height:,} rows over {args.months} months in {time.perf_counter() - t0:.1f} s "
        f"(frame {frame.estimated_size() / 2**20:.0f} MB)"
    )
    print(f"duckdb threads: default; cpus: {os.cpu_count()}")

    with tempfile.TemporaryDirectory() as tmp:
        path = _first_loads(frame, Path(tmp))
        _loaded_warehouse(frame, path)

    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"process peak RSS (incl. generation): {peak_kb / 1024:.0f} MB")


if __name__ == "__main__":
    main()
