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
  pipelines/instance.py) and a recorded run of a one-asset job that does nothing, bound to the
  resources every centsync job has (`defs/resources.py`: its IO manager is made at the run's
  start);
- `+ run of 26 assets`: the same with a multi-asset of 26 outputs, the shape of refresh_job's
  main step (its 8 checks and 2 other steps are not counted, so this is a lower bound).

    uv run --frozen python bench/fixed_cost.py [--reps 7] [--install user|dev]
    CENTSYNC_BEFORE=<a checkout with its .venv> uv run --frozen python bench/fixed_cost.py

Each runs in a user's install of the checkout (`uv sync --no-dev`, as `make setup` makes it, as
bench/compare.py runs centsync; `--install dev`: the test environment, whose test tools some
libraries import when present). With `CENTSYNC_BEFORE`, each process is run with that
checkout's Python too, by turns with this one's (`before` and `after`). Each line gives the
wall time and the CPU time (user + system, of
the process and every thread) of the process, medians; on this shared machine the CPU time is
the steadier of the two.

The difference between the last line and a real household refresh (bench/compare.py) is the
refresh's own work: its requests, DuckDB writes, validation, marts and reconciliation.
"""

from __future__ import annotations

import argparse
import os
import resource
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
    gc.disable()  # as the console script does (pipelines/cli/console.py)
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
    from centsync.pipelines.defs.resources import resources
    defs = dg.Definitions(
        assets=[many], jobs=[dg.define_asset_job("j", selection=[many])], resources=resources()
    )
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


def once(mode: str, env: dict[str, str], python: str = sys.executable) -> tuple[float, float]:
    """(wall, CPU) seconds of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(
        [python, "-c", CHILD, mode],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def pythons(install: str) -> dict[str, str]:
    """This checkout's interpreter, and `CENTSYNC_BEFORE`'s when it names a checkout: each a
    user's install of it (`install="user"`, as bench/compare.py runs centsync), or its
    `make setup-dev` .venv (`"dev"`)."""
    from environments import user_install

    root = os.environ.get("CENTSYNC_BEFORE")
    if install == "user":
        this = str(user_install() / "python")
        return (
            {"before": str(user_install(Path(root)) / "python"), "after": this}
            if root
            else {"": this}
        )
    if not root:
        return {"": sys.executable}
    return {"before": str(Path(root) / ".venv" / "bin" / "python"), "after": sys.executable}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument(
        "--install",
        choices=("user", "dev"),
        default="user",
        help="a user's install of each checkout (default), or its `make setup-dev` .venv",
    )
    args = ap.parse_args()
    versions = pythons(args.install)
    runs = [(mode, v) for mode in CASES for v in versions]
    with tempfile.TemporaryDirectory(prefix="centsync-floor-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DAGSTER_")}
        env.pop("CENTSYNC_BEFORE", None)
        env["DAGSTER_HOME"] = str(Path(tmp) / "dagster")
        Path(env["DAGSTER_HOME"]).mkdir()
        # the instance settings every centsync command uses (what `dagster_home()` installs)
        shutil.copy(ROOT / "pipelines" / "dagster.yaml", Path(env["DAGSTER_HOME"]) / "dagster.yaml")
        # a scheduled refresh finds its Dagster home made: make it (and warm the caches) first
        for mode, v in runs:
            once(mode, env, versions[v])
        times: dict[tuple[str, str], list[tuple[float, float]]] = {run: [] for run in runs}
        for rep in range(args.reps):
            order = runs[rep % len(runs) :] + runs[: rep % len(runs)]
            for mode, v in order:
                times[mode, v].append(once(mode, env, versions[v]))
    print(
        f"load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.install} installs; "
        f"{args.reps} interleaved runs each\n"
    )
    print("| process | version | wall, median (min-max) | CPU, median |")
    print("| - | - | -: | -: |")
    for (mode, v), t in times.items():
        wall = [w for w, _ in t]
        cpu = statistics.median(c for _, c in t)
        print(
            f"| {CASES[mode]} | {v or 'this'} | {statistics.median(wall):.2f} s "
            f"({min(wall):.2f}-{max(wall):.2f}) | {cpu:.2f} s |"
        )


if __name__ == "__main__":
    main()
