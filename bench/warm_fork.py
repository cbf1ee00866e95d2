"""A refresh from the console script with `centsync warm` running and without it
(`CENTSYNC_WARM=0`), by turns: a household's no-change refresh (issue 46's third target: at
most 1.5 s from the CLI), or with `--rows N` a first sync of an N-row ledger, the plain script
by turns too (issue 46's first target: at most the plain script's wall time).

    uv run --frozen python bench/warm_fork.py [--reps 7] [--install user|dev]
    uv run --frozen python bench/warm_fork.py --rows 1000000 --reps 3

`centsync warm` makes a refresh's imports once and runs each refresh the console script hands
it in a forked child (pipelines/cli/warm.py). A household's run starts from a copy of one
prepared state (its first refresh: warehouse, Dagster home); a first sync from an empty folder.
Every run is against one sandbox over loopback and must exit 0 with verdict "agree"; a first
sync's rows (and the plain script's) are then compared field by field with the server's
ledger (bench/compare.py's check). Printed: the console script's wall time from start to exit;
the CPU of the command (user + system of its process tree, from `wait4`) plus, with the warm
process, its child's (the warm process's reaped children, from psutil); and the peak RSS of
the command's process tree, and with the warm process the peak of the child that did the work
(its `VmHWM`, which counts the pages it shares with the warm process, as a process of its own
would hold them). Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import psutil
from compare import Server, Tool, check, env_for, measure, prepared, start_server, tools


def _children_cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.children_user + t.children_system)


def _verdict(folder: Path) -> str:
    lines = (folder / "stdout.txt").read_text(errors="replace").strip().splitlines()
    return str(json.loads(lines[-1]).get("verdict")) if lines else "no output"


def _hwm_mb(pid: int) -> float:
    """A process's peak RSS so far (`VmHWM`), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class ChildPeak:
    """The highest `VmHWM` of the warm process's children while a refresh runs, sampled every
    20 ms: a high the child reaches in its last 20 ms is missed (a refresh's comes at a window's
    commit or at its marts, seconds before its end)."""

    def __init__(self, warm: psutil.Process) -> None:
        self.warm, self.peak = warm, 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            for child in self.warm.children():
                self.peak = max(self.peak, _hwm_mb(child.pid))
            self._done.wait(0.02)

    def stop(self) -> float:
        self._done.set()
        self._thread.join()
        return self.peak


@dataclass
class Setup:
    cli: Tool
    plain: Tool | None
    server: Server
    template: Path
    runtime: dict[str, str]
    rows: int


def _run(setup: Setup, way: str, folder: Path, warm_ps: psutil.Process) -> tuple[float, ...]:
    """One run: its wall, CPU, the command's peak and the warm child's (0: none)."""
    shutil.copytree(setup.template, folder)
    tool = setup.plain if way == "plain" else setup.cli
    assert tool is not None
    env = {**env_for(tool, setup.server, folder), **setup.runtime}
    if way == "fresh":
        env["CENTSYNC_WARM"] = "0"
    before = _children_cpu(warm_ps)
    child = ChildPeak(warm_ps) if way == "warm" else None
    m = measure(tool.cmd, env, folder)
    child_peak = child.stop() if child else 0.0
    cpu = m.cpu + (_children_cpu(warm_ps) - before)
    verdict = None if way == "plain" else _verdict(folder)  # the plain script reconciles nothing
    if m.rc != 0 or verdict not in (None, "agree"):
        err = (folder / "stderr.txt").read_text(errors="replace")[-1500:]
        raise SystemExit(f"{way} run in {folder}: exit {m.rc}, verdict {verdict}\n{err}")
    how = "agree"
    if setup.rows:
        exact, why, _ = check(folder / tool.db, tool.table, setup.server.truth, setup.server.rows)
        if not exact:
            raise SystemExit(f"{way} run in {folder}: not exact: {why}")
        how = "agree, exact" if way != "plain" else "exact"
    print(
        f"  {way:5s}: {m.wall:.2f} s wall, {cpu:.2f} s CPU, {m.peak_mb:.0f} MB"
        + (f" (the warm child {child_peak:.0f} MB)" if child else "")
        + f", exit 0, {how}",
        flush=True,
    )
    shutil.rmtree(folder, ignore_errors=True)  # a first sync's warehouse: 150 MB a run
    return m.wall, cpu, m.peak_mb, child_peak


def _prepare(tmp: Path, args: argparse.Namespace, runtime: dict[str, str]) -> Setup:
    cli = tools(["centsync"], None, args.install)["centsync"]
    plain = tools(["plain"], None)["plain"] if args.rows else None
    server = start_server(tmp, args.rows or None, 10 if args.rows else 3)
    template = tmp / "template"
    if args.rows:
        template.mkdir()  # a first sync starts from an empty folder
    else:  # the household's first refresh, which every run refreshes again
        prepared(cli, server, template, {**runtime, "CENTSYNC_WARM": "0"})
    return Setup(cli, plain, server, template, runtime, args.rows)


def _table(times: dict[str, list[tuple[float, ...]]], what: str, reps: int, warm_mb: float) -> None:
    print(
        f"\n{what} from the console script, {reps} runs each by turns; load "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; the warm process itself: "
        f"{warm_mb:.0f} MB RSS\n"
    )
    print("| the command | wall, median (min-max) | CPU, median | peak RSS, median |")
    print("| - | -: | -: | -: |")
    labels = {
        "fresh": "centsync alone (`CENTSYNC_WARM=0`)",
        "warm": "centsync with `centsync warm`",
        "plain": "the plain script",
    }
    for way, label in labels.items():
        if not times.get(way):
            continue
        wall = [t[0] for t in times[way]]
        peak = f"{statistics.median(t[2] for t in times[way]):.0f} MB"
        if way == "warm":
            peak += f" (its child {statistics.median(t[3] for t in times[way]):.0f} MB)"
        print(
            f"| {label} | {statistics.median(wall):.2f} s ({min(wall):.2f}-{max(wall):.2f}) "
            f"| {statistics.median(t[1] for t in times[way]):.2f} s | {peak} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--install", choices=("user", "dev"), default="user")
    ap.add_argument(
        "--rows", type=int, default=0, help="a first sync of this many rows (10 years) instead"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cw", dir="/tmp") as tmp_name:
        tmp = Path(tmp_name)
        setup = _prepare(tmp, args, {"XDG_RUNTIME_DIR": str(tmp / "run")})
        warm: subprocess.Popen[str] | None = None
        try:
            env = {**env_for(setup.cli, setup.server, setup.template), **setup.runtime}
            warm = subprocess.Popen(
                [*setup.cli.cmd[:1], "warm"], env=env, stdout=subprocess.PIPE, text=True
            )
            assert warm.stdout is not None
            ready = warm.stdout.readline()
            if "ready" not in ready:
                raise SystemExit(f"`centsync warm` did not start: {ready}")
            warm_ps = psutil.Process(warm.pid)
            ways = ["fresh", "warm"] + (["plain"] if args.rows else [])
            times: dict[str, list[tuple[float, ...]]] = {way: [] for way in ways}
            for rep in range(args.reps):
                turn = ways[rep % len(ways) :] + ways[: rep % len(ways)]
                for way in turn:
                    times[way].append(_run(setup, way, tmp / f"{way}-{rep}", warm_ps))
            warm_mb = warm_ps.memory_info().rss / 2**20
        finally:
            if warm is not None:
                warm.terminate()
                warm.wait()
            setup.server.stop()
    what = f"a first sync of {args.rows:,} rows" if args.rows else "a household's no-change refresh"
    _table(times, what, args.reps, warm_mb)


if __name__ == "__main__":
    main()
