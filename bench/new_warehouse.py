"""What a new warehouse file costs: the migrations applied to the file, against `new_file`.

    uv run --frozen python bench/new_warehouse.py [--reps 9]

Every first sync, every new owner of the fleet and most tests start from a new warehouse.
Three ways it is measured, by turns, each rep in a fresh process (imports done first, only the
making timed, wall and CPU):

- `migrations on the file`: `duckdb.connect(file)` and `migrate(con)`, each of the 15
  migrations in its own transaction (how every new file was made before `new_file`, and how an
  old file is still upgraded);
- `new_file, first of a process`: the migrations applied once in memory and written to a file
  by `COPY FROM DATABASE` (`migrate._schema_bytes`), then that file's bytes written and dated;
- `new_file, after the first`: the bytes written and dated (a fleet worker's next owner, a
  test's next warehouse).

Each made file is opened afterwards and its catalog counted, so a way that made less shows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
import duckdb
from centsync.warehouse.instances import NEW_FILE
from centsync.warehouse.migrate import migrate, new_file

way = sys.argv[1]
folder = Path(tempfile.mkdtemp(prefix="centsync-bench-new-"))
path = folder / "centsync.duckdb"
if way == "again":
    new_file(folder / "first.duckdb")
w0, c0 = time.perf_counter(), time.process_time()
if way == "migrate":
    con = duckdb.connect(str(path), config=NEW_FILE)
    migrate(con)
    con.close()
else:
    new_file(path)
wall, cpu = time.perf_counter() - w0, time.process_time() - c0
con = duckdb.connect(str(path), read_only=True)
columns = con.execute("SELECT count(*), count(comment) FROM duckdb_columns()").fetchone()
version = con.execute("SELECT max(version) FROM ops.schema_version").fetchone()
con.close()
print(json.dumps({"wall": wall, "cpu": cpu, "columns": columns[0], "comments": columns[1],
                  "version": version[0], "bytes": path.stat().st_size}))
"""

WAYS = {
    "migrate": "migrations on the file",
    "first": "new_file, first of a process",
    "again": "new_file, after the first",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {w: [] for w in WAYS}
    with tempfile.TemporaryDirectory() as home:
        for _ in range(args.reps):
            for way in WAYS:  # by turns
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, way],
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=home,
                )
                runs[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{args.reps} reps by turns, a fresh process each\n")
    print("| way | wall, median (min-max) | CPU, median | columns / comments | version | file |")
    print("| - | -: | -: | -: | -: | -: |")
    for way, label in WAYS.items():
        r = runs[way]
        walls = [x["wall"] * 1000 for x in r]
        cpu = statistics.median(x["cpu"] * 1000 for x in r)
        last = r[-1]
        print(
            f"| {label} | {statistics.median(walls):.0f} ms ({min(walls):.0f}-{max(walls):.0f})"
            f" | {cpu:.0f} ms | {last['columns']} / {last['comments']} | {last['version']}"
            f" | {last['bytes'] / 1024:.0f} KB |"
        )


if __name__ == "__main__":
    main()
