"""The floor under a `centsync refresh`: what a process pays before it does any of our work.

Issue 17 asks a household no-change refresh to take at most 2.0 s and still be a recorded
Dagster run. This measures, in fresh processes timed from start to exit (interleaved, medians),
what any such command costs whatever its work:

- `python`: the interpreter starting and exiting;
- `imports`: importing what a refresh imports (the definitions, the Dagster storage, the
  refresh and reconciliation code: Dagster, Polars, DuckDB, pyarrow, aiohttp, pandera ...),
  with the garbage collector on (Python's default) and as the console script does it (off
  during the imports, then on over a frozen heap: pipelines/cli_support.py `imports_done`);
- `+ run of 1 asset`: that, plus the Dagster instance of an existing `DAGSTER_HOME` (the CLI's,
  pipelines/dagster_storage.py) and a recorded run of a one-asset job that does nothing;
- `+ run of 26 assets`: the same with a multi-asset of 26 outputs, the shape of refresh_job's
  main step (its 8 checks and 2 other steps are not counted, so this is a lower bound).

    uv run --frozen python bench/fixed_cost.py [--reps 7]

The difference between the last line and a real household refresh (bench/compare.py) is the
refresh's own work: its requests, DuckDB writes, validation, marts and reconciliation.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, os, sys, warnings
mode = sys.argv[1]
if mode != "imports-gc":
    gc.disable()  # as the console script does (pipelines/cli/main.py: entry)
warnings.simplefilter("ignore")
if mode != "python":
    import centsync.pipelines.definitions, centsync.pipelines.refresh.run, centsync.pipelines.reconcile
    from centsync.pipelines import instance as dagster_storage
    from centsync.pipelines.cli.group import imports_done
    imports_done()
if mode.startswith("run"):
    import dagster as dg
    n = int(mode[3:])
    @dg.multi_asset(specs=[dg.AssetSpec(f"a{i}") for i in range(n)])
    def many():
        for i in range(n):
            yield dg.MaterializeResult(asset_key=f"a{i}")
    defs = dg.Definitions(assets=[many], jobs=[dg.define_asset_job("j", selection=[many])])
    with dagster_storage.instance(os.environ["DAGSTER_HOME"]) as instance:
        assert defs.resolve_job_def("j").execute_in_process(instance=instance).success
sys.stdout.flush()
os._exit(0)
"""

CASES = {
    "python": "interpreter only",
    "imports-gc": "imports of a refresh, garbage collector on",
    "imports": "imports of a refresh, as the console script makes them (collector off)",
    "run1": "+ instance + recorded run of 1 asset",
    "run26": "+ instance + recorded run of 26 assets",
}


def once(mode: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", CHILD, mode],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="centsync-floor-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
        env["DAGSTER_HOME"] = str(Path(tmp) / "dagster")
        Path(env["DAGSTER_HOME"]).mkdir()
        # the instance settings every centsync command uses (what `dagster_home()` installs)
        shutil.copy(ROOT / "pipelines" / "dagster.yaml", Path(env["DAGSTER_HOME"]) / "dagster.yaml")
        # a scheduled refresh finds its Dagster home made: make it (and warm the caches) first
        for mode in CASES:
            once(mode, env)
        times: dict[str, list[float]] = {mode: [] for mode in CASES}
        for rep in range(args.reps):
            order = list(CASES)[rep % len(CASES) :] + list(CASES)[: rep % len(CASES)]
            for mode in order:
                times[mode].append(once(mode, env))
    print(
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.reps} interleaved runs each\n"
    )
    print("| process | median | min-max |")
    print("| - | -: | -: |")
    for mode, label in CASES.items():
        t = times[mode]
        print(f"| {label} | {statistics.median(t):.2f} s | {min(t):.2f}-{max(t):.2f} s |")


if __name__ == "__main__":
    main()
