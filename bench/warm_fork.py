"""What a household's no-change refresh would cost from a process whose imports are done.

Issue 46 asks a household no-change refresh from the CLI to take at most 1.5 s and still be a
recorded Dagster run. On a slow host most of its 3 s is imports (Dagster, SQLAlchemy, Polars,
pandera, DuckDB, aiohttp: docs/benchmarks.md), which every command pays again. This measures
the one way left to skip them, before anything is built on it: a process that has imported
what a refresh imports and froze its heap (the console script's own steps) forks a child per
refresh, and the child runs the console script's `entry` with the refresh's environment, its
working folder and its output files, exactly as the command would. Against it, by turns, the
console script itself in a fresh process (as `bench/compare.py` runs it).

    uv run --frozen python bench/warm_fork.py [--reps 7] [--install user|dev]

Each run starts from a copy of one prepared state (the household's first refresh: warehouse,
Dagster home), against one sandbox over loopback; each must exit 0 with verdict "agree".
Printed: wall (the fresh process from start to exit; the forked child from `fork` to its exit),
CPU (user + system of that process, from `wait4`) and peak RSS (`wait4`'s high-water mark: for
the child, the pages it touched, shared with the warm process included). Figures only; nothing
here is a command a user runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path

from compare import env_for, measure, start_server, tools
from environments import user_install

# The warm process: the console script's own steps (the collector off, the environment it
# sets before Polars loads), the imports a refresh makes, the heap frozen; then, for each line
# on stdin (a run folder and the environment as JSON), one forked child running the console
# script's `entry` there, timed from the fork; one line of JSON back per run.
WARM = r"""
import gc, json, os, sys, time
gc.disable()
from centsync.pipelines.cli import console
console.prepare(["refresh"])
from centsync.pipelines.cli.main import entry
import centsync.pipelines.cli.refresh, centsync.pipelines.definitions
import centsync.pipelines.refresh.run, centsync.pipelines.reconcile, centsync.pipelines.instance
gc.freeze()
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    folder = job["folder"]
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(job["env"])
        for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
            os.dup2(os.open(os.path.join(folder, name), os.O_WRONLY | os.O_CREAT, 0o600), fd)
        sys.argv = ["centsync", "refresh", "--json"]
        entry()  # never returns: the console script ends with os._exit
    _, status, ru = os.wait4(pid, 0)
    print(json.dumps({
        "wall": time.perf_counter() - t,
        "cpu": ru.ru_utime + ru.ru_stime,
        "peak_mb": ru.ru_maxrss / 1024,
        "rc": os.waitstatus_to_exitcode(status),
    }), flush=True)
"""


def _verdict(folder: Path) -> str:
    lines = (folder / "stdout.txt").read_text(errors="replace").strip().splitlines()
    return str(json.loads(lines[-1]).get("verdict")) if lines else "no output"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--install", choices=("user", "dev"), default="user")
    args = ap.parse_args()
    cold = tools(["centsync"], None, args.install)["centsync"]
    python = str(
        user_install() / "python"
        if args.install == "user"
        else Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python"
    )
    with tempfile.TemporaryDirectory(prefix="centsync-warm-") as tmp_name:
        tmp = Path(tmp_name)
        server = start_server(tmp, None, 3)
        warm: subprocess.Popen[str] | None = None
        try:
            template = tmp / "template"
            template.mkdir()
            first = measure(cold.cmd, env_for(cold, server, template), template)
            if first.rc != 0:
                raise SystemExit(f"the first refresh failed: {first.stderr[-1000:]}")
            warm = subprocess.Popen(
                [python, "-c", WARM],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env_for(cold, server, template),
            )
            assert warm.stdin is not None and warm.stdout is not None
            json.loads(warm.stdout.readline())  # ready
            times: dict[str, list[tuple[float, float, float]]] = {"fresh": [], "forked": []}
            for rep in range(args.reps):
                for way in ("fresh", "forked") if rep % 2 == 0 else ("forked", "fresh"):
                    folder = tmp / f"{way}-{rep}"
                    shutil.copytree(template, folder)
                    for name in ("stdout.txt", "stderr.txt"):
                        (folder / name).unlink()
                    env = env_for(cold, server, folder)
                    if way == "fresh":
                        m = measure(cold.cmd, env, folder)
                        wall, cpu, peak, rc = m.wall, m.cpu, m.peak_mb, m.rc
                    else:
                        warm.stdin.write(json.dumps({"folder": str(folder), "env": env}) + "\n")
                        warm.stdin.flush()
                        got = json.loads(warm.stdout.readline())
                        wall, cpu, peak, rc = got["wall"], got["cpu"], got["peak_mb"], got["rc"]
                    verdict = _verdict(folder)
                    if rc != 0 or verdict != "agree":
                        err = (folder / "stderr.txt").read_text(errors="replace")[-1500:]
                        raise SystemExit(f"{way} run {rep}: exit {rc}, verdict {verdict}\n{err}")
                    times[way].append((wall, cpu, peak))
                    print(
                        f"  {way:6s} rep {rep + 1}: {wall:.2f} s wall, {cpu:.2f} s CPU, "
                        f"{peak:.0f} MB, exit 0, agree",
                        flush=True,
                    )
        finally:
            if warm is not None:
                warm.kill()
                warm.wait()
            server.stop()
    print(
        f"\nhousehold no-change refresh, {args.reps} runs each by turns; load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    print("| process | wall, median (min-max) | CPU, median | peak RSS, median |")
    print("| - | -: | -: | -: |")
    for way, label in (
        ("fresh", "the console script, a fresh process"),
        ("forked", "forked from a process with the imports done"),
    ):
        wall = [w for w, _, _ in times[way]]
        print(
            f"| {label} | {statistics.median(wall):.2f} s ({min(wall):.2f}-{max(wall):.2f}) "
            f"| {statistics.median(c for _, c, _ in times[way]):.2f} s "
            f"| {statistics.median(p for _, _, p in times[way]):.0f} MB |"
        )


if __name__ == "__main__":
    main()
