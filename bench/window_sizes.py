"""A first sync's window sizes against DuckDB's row groups (issue 46, seventh round).

    uv run --frozen python bench/window_sizes.py [--rows 1000000] [--years 10] [--reps 3]
        [--memory 96MB]

Each window of a big ledger's first sync is one commit of core.transactions and
raw.transactions, then a CHECKPOINT (pipelines/refresh/read.py). DuckDB writes a commit as whole
row groups and one part-filled group of the rest, and a checkpoint merges neighbouring groups
where t + 1 of them fit in t, rewriting them. This lands the same ledger in a real warehouse file
(the refresh's settings, DuckDB's memory limit a first sync's windows land under unless
`--memory` says otherwise) window by window, with rows generated in DuckDB (no HTTP, no
validation: the storage alone), under three sizings:

- `170,000 rows`: the windows before the seventh round (months from the average, 170,000 rows);
- `from the average`: `plan.pack`'s months per window from the ledger's average rows a month;
- `packed again as read`: the first window from the average, the next ones from the rows each
  month of the window before held, projected by their trend (`plan.repack`, what a first sync
  now does).

for two ledgers of `--rows` rows: every month alike, and one whose months grow threefold over
the years. Prints, per sizing, the windows, the largest's rows, the row groups left against those committed (fewer:
merged), and the CPU and wall of the commits and checkpoints (medians of `--reps`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from pathlib import Path

from centsync.pipelines.refresh import plan
from centsync.pipelines.refresh.plan import WINDOW_MEMORY
from centsync.transform.calendar import add_months, month_end, months_between, parse_month
from centsync.warehouse import Warehouse
from centsync.warehouse.instances import ROW_GROUP_ROWS
from centsync.warehouse.session import checkpoint

FIRST = parse_month("2016-01")
CORE = """
INSERT INTO core.transactions
SELECT id, ('00000000-0000-4000-8000-00000000000' || (i % 5))::UUID, 'card ' || (i % 500),
       -(i % 10000), d, date_trunc('month', d)::DATE, 'expense', NULL, NULL, now(), now(), 'r1'
FROM (SELECT i, uuid() AS id,
             (DATE '{lo}' + to_months((i * {months} // {n})::INT) + to_days((i % 28)::INT))::DATE AS d
      FROM range({n}) t(i))
"""
RAW = """
INSERT INTO raw.transactions
SELECT id, booked_at, 'r1', json_object('id', id::VARCHAR, 'account_id', account_id::VARCHAR,
       'concept', concept, 'amount', amount, 'booked_at', booked_at::VARCHAR, 'type', type,
       'category_id', NULL, 'expense_goal_id', NULL, 'created_at', '2026-01-01T00:00:00Z',
       'updated_at', '2026-01-01T00:00:00Z')::JSON
FROM core.transactions WHERE booked_at >= DATE '{lo}' AND booked_at <= DATE '{hi}'
"""


def ledgers(rows: int, months: int) -> dict[str, list[float]]:
    """Rows a month of each ledger: alike, and growing threefold (linearly) over the span."""
    grow = [1 + 2 * m / (months - 1) for m in range(months)]
    scale = rows / sum(grow)
    return {
        "every month alike": [rows / months] * months,
        "grows threefold": [g * scale for g in grow],
    }


def windows(density: list[float], sizing: str) -> list[tuple[int, int]]:
    """(first month index, months) of each window under `sizing`."""
    average = sum(density) / len(density)
    if sizing == "170,000 rows":
        size = max(1, math.floor(170_000 / average))
        return [(s, min(size, len(density) - s)) for s in range(0, len(density), size)]
    first = FIRST
    months = [add_months(first, m) for m in range(len(density))]
    packed = plan.pack(months[0], months[-1], round(sum(density)))
    out: list[tuple[int, int]] = []
    start = 0
    while packed:
        n = len(months_between(*packed[0]))
        out.append((start, n))
        if sizing == "packed again as read" and len(packed) > 1:
            read = [round(d) for d in density[start : start + n]]
            left = round(sum(density[start + n :]))
            packed = [packed[0], *plan.repack(packed[1:], read, left)]
        packed, start = packed[1:], start + n
    return out


def land(density: list[float], sizing: str, folder: Path, memory: str) -> dict[str, float]:
    wh = Warehouse.open(folder / f"{sizing}.duckdb".replace(" ", "_").replace(",", ""))
    wh.start_refresh(mode="full", refresh_id="r1")
    wh.refresh_settings(memory=memory)
    con = wh.con
    first = FIRST
    committed = largest = 0
    cpu, wall = time.process_time(), time.perf_counter()
    plan_ = windows(density, sizing)
    for start, n in plan_:
        rows = round(sum(density[start : start + n]))
        largest = max(largest, rows)
        lo = add_months(first, start)
        hi = month_end(add_months(first, start + n - 1))
        con.execute("BEGIN")
        con.execute(CORE.format(lo=lo, months=n, n=rows))
        con.execute(RAW.format(lo=lo, hi=hi))
        con.execute("COMMIT")
        checkpoint(con)
        committed += rows // ROW_GROUP_ROWS + (1 if rows % ROW_GROUP_ROWS else 0)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    (groups,) = con.execute(
        "SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('core.transactions')"
    ).fetchall()[0]
    wh.close()
    return {
        "windows": len(plan_),
        "largest": largest,
        "groups": groups,
        "committed": committed,
        "cpu": cpu,
        "wall": wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--memory",
        default=WINDOW_MEMORY,
        help=f"DuckDB's memory limit (default {WINDOW_MEMORY}, as a first sync's windows land)",
    )
    args = ap.parse_args()
    sizings = ("170,000 rows", "from the average", "packed again as read")
    print(
        f"{args.rows:,} rows over {args.years} years; row groups of {ROW_GROUP_ROWS:,} rows; "
        f"DuckDB's memory limit {args.memory}\n"
    )
    print(
        "| ledger | windows sized | windows | largest window | row groups left / committed "
        "| CPU-s | wall s |"
    )
    print("| - | - | -: | -: | -: | -: | -: |")
    for name, density in ledgers(args.rows, 12 * args.years).items():
        runs: dict[str, list[dict[str, float]]] = {s: [] for s in sizings}
        for _ in range(args.reps):
            for sizing in sizings:  # by turns
                with tempfile.TemporaryDirectory(prefix="windows-") as tmp:
                    runs[sizing].append(land(density, sizing, Path(tmp), args.memory))
        for sizing in sizings:
            r = runs[sizing]
            print(
                f"| {name} | {sizing} | {r[0]['windows']:.0f} | {r[0]['largest']:,.0f} | "
                f"{r[0]['groups']:.0f} / "
                f"{r[0]['committed']:.0f} | {statistics.median(x['cpu'] for x in r):.2f} | "
                f"{statistics.median(x['wall'] for x in r):.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
