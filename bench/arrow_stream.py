"""Frames in and out of DuckDB: through pyarrow (the route before `warehouse/frames.py`) against
the Arrow C stream (`frames.frame`, `frames.register`), each in fresh processes, by turns.

    uv run --frozen python bench/arrow_stream.py [--rows 1000000] [--reps 5]

Each process makes a DuckDB table of `--rows` rows (a UUID, cents, a date, a text and a
timestamp, as a ledger's columns), reads it into a Polars frame five times (`read`), or
registers a frame of those rows and inserts it into a table five times (`write`), and prints
its wall and CPU time per round, the RSS it holds after, its peak RSS, and whether pyarrow was
imported. Medians over `--reps` processes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import duckdb, polars as pl
route, way, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect()
con.execute(
    "CREATE TABLE t AS SELECT uuid() AS id, (random() * 1e6)::BIGINT AS amount, "
    "current_date - (i % 3000)::INT AS booked_at, 'concept ' || (i % 5000) AS concept, "
    f"now() AS ts FROM range({rows}) r(i)"
)
if route == "stream":
    from centsync.warehouse import frames
    read = lambda: frames.frame(con, "SELECT * FROM t")
    def register(name, f):
        frames.register(con, name, f)
else:
    def read():
        return pl.from_arrow(con.sql("SELECT * FROM t").to_arrow_table())
    def register(name, f):
        con.register(name, f.to_arrow(compat_level=pl.CompatLevel.newest()))
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
source = read() if way == "write" else None
con.execute("CREATE TABLE copy AS SELECT * FROM t LIMIT 0")
start_rss = rss()
t, c = time.perf_counter(), time.process_time()
for _ in range(5):
    if way == "read":
        f = read()
        del f
    else:
        register("src", source)
        con.execute("DELETE FROM copy; INSERT INTO copy SELECT * FROM src")
wall, cpu = (time.perf_counter() - t) / 5, (time.process_time() - c) / 5
print(json.dumps({"wall": wall, "cpu": cpu, "start": start_rss, "after": rss(),
    "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "pyarrow": "pyarrow" in sys.modules}))
"""


def once(route: str, way: str, rows: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, route, way, str(rows)],
        capture_output=True,
        text=True,
        check=True,
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("{")][-1]
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    print(f"{args.rows:,} rows; {args.reps} fresh processes each, by turns; per round: 5 rounds")
    print()
    print("| way | route | wall | CPU | RSS held after | peak RSS | pyarrow imported |")
    print("| - | - | -: | -: | -: | -: | - |")
    for way in ("read", "write"):
        runs: dict[str, list[dict[str, float]]] = {"pyarrow": [], "stream": []}
        for _ in range(args.reps):
            for route in runs:
                runs[route].append(once(route, way, args.rows))
        for route, rs in runs.items():

            def med(key: str, rs: list[dict[str, float]] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            print(
                f"| {way} | {route} | {med('wall') * 1000:.0f} ms | {med('cpu') * 1000:.0f} ms "
                f"| {med('after'):.0f} MB | {med('peak'):.0f} MB | {bool(rs[0]['pyarrow'])} |"
            )


if __name__ == "__main__":
    main()
