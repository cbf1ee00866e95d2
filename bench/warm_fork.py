"""A household's no-change refresh from the console script, with `centsync warm` running and
without it (`CENTSYNC_WARM=0`), by turns (issue 46's third target: at most 1.5 s from the CLI).

    uv run --frozen python bench/warm_fork.py [--reps 7] [--install user|dev]

`centsync warm` makes a refresh's imports once and runs each refresh the console script hands
it in a forked child (pipelines/cli/warm.py). Each run starts from a copy of one prepared state
(the household's first refresh: warehouse, Dagster home), against one sandbox over loopback,
and must exit 0 with verdict "agree". Printed: the console script's wall time from start to
exit; the CPU of the command (user + system of its process tree, from `wait4`) plus, with the
warm process, its child's (the warm process's reaped children, from psutil); and the peak RSS
of the command's process tree (the child's is the warm process's, not counted: its RSS is given
once, at the end). Figures only.
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

import psutil
from compare import env_for, measure, start_server, tools


def _children_cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.children_user + t.children_system)


def _verdict(folder: Path) -> str:
    lines = (folder / "stdout.txt").read_text(errors="replace").strip().splitlines()
    return str(json.loads(lines[-1]).get("verdict")) if lines else "no output"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--install", choices=("user", "dev"), default="user")
    args = ap.parse_args()
    cli = tools(["centsync"], None, args.install)["centsync"]
    with tempfile.TemporaryDirectory(prefix="cw", dir="/tmp") as tmp_name:
        tmp = Path(tmp_name)
        server = start_server(tmp, None, 3)
        runtime = {"XDG_RUNTIME_DIR": str(tmp / "run")}
        warm: subprocess.Popen[str] | None = None
        try:
            template = tmp / "template"
            template.mkdir()
            env = {**env_for(cli, server, template), **runtime, "CENTSYNC_WARM": "0"}
            first = measure(cli.cmd, env, template)
            if first.rc != 0:
                raise SystemExit(f"the first refresh failed: {first.stderr[-1000:]}")
            warm_cmd = [*cli.cmd[:1], "warm"]
            warm = subprocess.Popen(
                warm_cmd,
                env={**env_for(cli, server, template), **runtime},
                stdout=subprocess.PIPE,
                text=True,
            )
            assert warm.stdout is not None
            ready = warm.stdout.readline()
            if "ready" not in ready:
                raise SystemExit(f"`centsync warm` did not start: {ready}")
            warm_ps = psutil.Process(warm.pid)
            times: dict[str, list[tuple[float, float, float]]] = {"fresh": [], "warm": []}
            for rep in range(args.reps):
                for way in ("fresh", "warm") if rep % 2 == 0 else ("warm", "fresh"):
                    folder = tmp / f"{way}-{rep}"
                    shutil.copytree(template, folder)
                    for name in ("stdout.txt", "stderr.txt"):
                        (folder / name).unlink()
                    env = {**env_for(cli, server, folder), **runtime}
                    if way == "fresh":
                        env["CENTSYNC_WARM"] = "0"
                    before = _children_cpu(warm_ps)
                    m = measure(cli.cmd, env, folder)
                    cpu = m.cpu + (_children_cpu(warm_ps) - before)
                    verdict = _verdict(folder)
                    if m.rc != 0 or verdict != "agree":
                        err = (folder / "stderr.txt").read_text(errors="replace")[-1500:]
                        raise SystemExit(f"{way} run {rep}: exit {m.rc}, verdict {verdict}\n{err}")
                    times[way].append((m.wall, cpu, m.peak_mb))
                    print(
                        f"  {way:5s} rep {rep + 1}: {m.wall:.2f} s wall, {cpu:.2f} s CPU, "
                        f"{m.peak_mb:.0f} MB, exit 0, agree",
                        flush=True,
                    )
            warm_rss = warm_ps.memory_info().rss / 2**20
        finally:
            if warm is not None:
                warm.terminate()
                warm.wait()
            server.stop()
    print(
        f"\nhousehold no-change refresh from the console script, {args.reps} runs each by "
        f"turns; load {' '.join(f'{x:.2f}' for x in os.getloadavg())}; the warm process "
        f"itself: {warm_rss:.0f} MB RSS\n"
    )
    print("| the console script | wall, median (min-max) | CPU, median | its peak RSS, median |")
    print("| - | -: | -: | -: |")
    for way, label in (("fresh", "alone (`CENTSYNC_WARM=0`)"), ("warm", "with `centsync warm`")):
        wall = [w for w, _, _ in times[way]]
        print(
            f"| {label} | {statistics.median(wall):.2f} s ({min(wall):.2f}-{max(wall):.2f}) "
            f"| {statistics.median(c for _, c, _ in times[way]):.2f} s "
            f"| {statistics.median(p for _, _, p in times[way]):.0f} MB |"
        )


if __name__ == "__main__":
    main()
