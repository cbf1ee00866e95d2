"""What a big warehouse's refresh waits for at its publish, with the working copy flushed ahead
and the replaced file freed aside (`warehouse/paths.py` `FlushAhead`, `publish_file`), and
without (the two patched off, as before).

    uv run --frozen python bench/publish_ahead.py [--rows 1000000] [--reps 5] [--work 2]

One synthetic warehouse of `--rows` rows (bench/warehouse_load.py's generator) is loaded once;
then each rep, by turns with and without, is a refresh of it through `Warehouse.refreshing`:
the copy of the published file, one month replaced (a real write), then `--work` seconds in
which the refresh touches no disk (what a daily refresh spends on the service's answers and
the marts: 2-4 s), then the publish. Printed per variant: the publish's wall (the with block's
exit: the working copy's checkpoint, its fsync, the rename over the old file) and the whole
refresh's, medians and ranges. Figures only, nothing asserted; every refresh's row count is
checked.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from centsync.warehouse import Warehouse, connect_readonly, paths, reads

sys.path.insert(0, str(Path(__file__).parent))
from warehouse_load import synthetic


def _count(path: Path) -> int:
    con = connect_readonly(path)
    with contextlib.closing(con):
        return reads.transaction_count(con)


def _refresh(path: Path, month: pl.DataFrame, work: float, ahead: bool) -> tuple[float, float]:
    """One refresh; (the publish's seconds, the whole refresh's)."""
    start, free = paths.FlushAhead.start, paths.FREE_AHEAD_BYTES
    if not ahead:  # as before this change: nothing flushed ahead, the old file freed in place
        paths.FlushAhead.start = lambda self, path: None  # type: ignore[method-assign]
        paths.FREE_AHEAD_BYTES = 1 << 62
    try:
        t0 = time.perf_counter()
        with Warehouse.refreshing(path) as wh:
            wh.replace_months(["2020-06"], month, reason="bench")
            time.sleep(work)
            t1 = time.perf_counter()
        t2 = time.perf_counter()
    finally:
        paths.FlushAhead.start, paths.FREE_AHEAD_BYTES = start, free  # type: ignore[method-assign]
    return t2 - t1, t2 - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--work", type=float, default=2.0, help="seconds of no disk in a refresh")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="publish-ahead-", dir=".") as tmp:
        path = Path(tmp) / "centsync.duckdb"
        frame = synthetic(args.rows, 120)
        with Warehouse.refreshing(path, mode="full") as wh:
            wh.replace_all_transactions(frame)
        month = frame.filter(pl.col("booked_at").dt.strftime("%Y-%m") == "2020-06")
        del frame
        size = path.stat().st_size / 2**20
        print(f"{args.rows:,} rows, {size:.0f} MB published; {args.work:g} s of no disk a refresh")
        got: dict[str, list[tuple[float, float]]] = {"before": [], "ahead": []}
        for rep in range(args.reps):
            for name in ("before", "ahead") if rep % 2 == 0 else ("ahead", "before"):
                publish, whole = _refresh(path, month, args.work, name == "ahead")
                got[name].append((publish, whole))
                assert _count(path) == args.rows, "every row still there"
                print(f"  rep {rep + 1} {name:6}: publish {publish:.3f} s, refresh {whole:.2f} s")
        print(
            "\n| variant | publish (median, min-max) | refresh (median, min-max) |\n| - | -: | -: |"
        )
        for name, runs in got.items():
            p, w = [r[0] for r in runs], [r[1] for r in runs]
            print(
                f"| {name} | {statistics.median(p):.3f} s ({min(p):.3f}-{max(p):.3f}) "
                f"| {statistics.median(w):.2f} s ({min(w):.2f}-{max(w):.2f}) |"
            )


if __name__ == "__main__":
    main()
