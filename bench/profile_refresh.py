"""Where a `centsync refresh` spends its wall time and memory (issue 17's profile).

    uv run --frozen python bench/profile_refresh.py                      # household no-change + 20,000
    uv run --frozen python bench/profile_refresh.py --sizes 20000 1000000 --rss

Against the same sandbox `bench/compare.py` serves (its own process, loopback, no rate limits),
the real CLI (`python -m centsync.pipelines.cli refresh --json`) is run:

1. with `-X importtime`: the imports, by top-level package (cumulative, self included);
2. under py-spy (`uv tool run --from py-spy==0.4.3`, a throwaway tool environment; never the
   project's), sampling every thread at 200 Hz with idle time included, so the main thread's
   samples add up to its wall time; each sample is put in one phase (below) and the phases are
   ranked in seconds, then the heaviest functions by inclusive time;
3. with `--rss`, in this script's own child process with a sampler thread (every 20 ms: RSS and
   the main thread's stack, classified into the same phases): seconds and peak RSS per phase.

A sample is put in the phase of an import if any frame is importing (`_find_and_load`: the
top-level module being imported names it), else in the phase of its innermost frame that a rule
below matches, else "other". Output is Markdown; py-spy's raw stacks stay in bench/results/.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

# (path fragment, function name or "*", phase), the innermost matching frame wins
RULES: list[tuple[str, str, str]] = [
    ("dagster/_core/instance", "*", "Dagster: instance (storage, run records)"),
    ("dagster/_core/storage", "*", "Dagster: instance (storage, run records)"),
    ("alembic", "*", "Dagster: instance (storage, run records)"),
    ("sqlalchemy", "*", "Dagster: instance (storage, run records)"),
    ("dagster/_core/definitions", "*", "Dagster: definitions (build, validate)"),
    ("dagster/_core/execution", "*", "Dagster: run machinery (events, plan, IO)"),
    ("dagster/", "*", "Dagster: other"),
    ("pipelines/cli", "*", "CLI: other"),
    ("pipelines/defs/", "*", "Dagster asset bodies (other)"),
    ("pipelines/refresh.py", "run_refresh", "refresh: open, bind, finish"),
    ("pipelines/refresh.py", "run", "refresh: me, settings, net worth, snapshots"),
    ("pipelines/refresh.py", "_full", "refresh: first sync (other)"),
    ("pipelines/refresh.py", "_read", "refresh: ledger read (waiting on the reader)"),
    ("pipelines/refresh.py", "_check_history", "refresh: fingerprints of past years"),
    ("pipelines/refresh.py", "_aggregates", "refresh: server aggregates"),
    ("pipelines/refresh.py", "_outbox", "refresh: outbox"),
    ("pipelines/writeback", "*", "write-back (outbox drain, confirm)"),
    ("pipelines/refresh.py", "_reconcile", "marts + reconciliation"),
    ("pipelines/reconcile.py", "*", "marts + reconciliation"),
    ("pipelines/report.py", "*", "report"),
    ("warehouse/session.py", "refreshing", "warehouse: working copy, publish"),
    ("warehouse/session.py", "finish_refresh", "warehouse: finish refresh"),
    ("warehouse/migrate.py", "*", "warehouse: migrations"),
    ("warehouse/ledger.py", "add", "load: stage a batch (validate, keep as a Polars frame)"),
    ("warehouse/ledger.py", "commit", "load: commit a window (core + raw)"),
    ("warehouse/ledger.py", "commit_complete", "load: commit a window (core + raw)"),
    ("warehouse/validation.py", "*", "load: pandera validation"),
]
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>.*?):\d+\)$")


def _package(file: str) -> str:
    f = file.replace("\\", "/")
    if "site-packages/" in f:
        f = f.split("site-packages/", 1)[1]
    for layer in ("pipelines", "warehouse", "extract", "transform", "sandbox"):
        if f"/main/{layer}/" in f or f.startswith(f"{layer}/"):
            return f"centsync.{layer}"
    return f.split("/", 1)[0].removesuffix(".py") if "/" in f else f.removesuffix(".py")


def classify(stack: list[tuple[str, str]]) -> str:
    """The phase of one sample: `stack` is (function, file) from the root to the leaf."""
    if not stack:
        return "no Python frame (interpreter start-up, shutdown)"
    for i, (func, _file) in enumerate(stack):
        if func == "_find_and_load":
            for f2, file2 in stack[i + 1 :]:
                if f2 == "<module>":
                    return f"import {_package(file2)}"
            return "import (finding modules)"
    for func, file in reversed(stack):
        for frag, name, phase in RULES:
            if frag in file and (name == "*" or name == func.rsplit(".", 1)[-1]):
                return phase
    return "other"


# ---- running the CLI -----------------------------------------------------------------------


def _pyspy() -> list[str]:
    from environments import uv

    return [*uv(), "tool", "run", "--from", "py-spy==0.4.3", "py-spy"]


def cli(*extra: str) -> list[str]:
    return [sys.executable, *extra, "-m", "centsync.pipelines.cli", "refresh", "--json"]


def importtime(env: dict[str, str], cwd: Path) -> list[tuple[str, float, float]]:
    """(top-level package, seconds of its own modules' import, cumulative as a first import)."""
    p = subprocess.run(cli("-X", "importtime"), env=env, cwd=cwd, capture_output=True, text=True)
    own: collections.Counter[str] = collections.Counter()
    first: collections.Counter[str] = collections.Counter()
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        head, cumulative, raw = line.split("|", 2)
        pkg = raw.strip().split(".")[0]
        own[pkg] += int(head.split(":", 1)[1].strip()) / 1e6
        if len(raw) - len(raw.lstrip(" ")) == 1:  # imported by the process itself
            first[pkg] += int(cumulative.strip()) / 1e6
    return [(pkg, s, first.get(pkg, 0.0)) for pkg, s in own.most_common()]


def pyspy(env: dict[str, str], cwd: Path, out: Path) -> dict[str, object]:
    cmd = [*_pyspy(), "record", "--rate", "200", "--idle", "--threads", "--subprocesses"]
    cmd += ["--format", "raw"]
    cmd += ["--output", str(out), "--", *cli()]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t
    phases: collections.Counter[str] = collections.Counter()
    funcs: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    samples = 0
    children: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    for line in out.read_text().splitlines():
        body, _, count = line.rpartition(" ")
        frames = body.split(";")
        n = int(count)
        procs = []
        while frames and frames[0].startswith("process "):
            procs.append(frames.pop(0))
        if len(procs) > 1:  # a child process of the CLI's (py-spy names its parents first)
            children[procs[-1].split(":", 1)[-1][:120]] += n
            continue
        thread = frames.pop(0).split(": ", 1)[-1]
        threads[thread] += n
        if thread != "MainThread":
            continue
        stack = []
        for fr in frames:
            m = _FRAME.match(fr)
            if m:
                stack.append((m["func"], m["file"]))
        samples += n
        phase = classify(stack)
        phases[phase] += n
        if phase == "other":
            others[" <- ".join(f"{f} ({_short(file)})" for f, file in reversed(stack[-3:]))] += n
        for key in {f"{f} ({_short(file)})" for f, file in stack}:
            funcs[key] += n
    last = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    doc = json.loads(last[-1]) if last else {}
    return {
        "wall": wall,
        "rate": 200,
        "main_samples": samples,
        "phases": phases,
        "funcs": funcs,
        "threads": threads,
        "children": children,
        "others": others,
        "cli": doc,
        "rc": p.returncode,
    }


def _short(file: str) -> str:
    f = file.split("site-packages/", 1)[-1]
    return f.split("/main/", 1)[-1]


# ---- per-phase RSS, in a child of this script ----------------------------------------------


def rss_child(out: Path) -> None:
    """Run the CLI in this process with a sampler thread; write the samples as JSON."""
    main_id = threading.get_ident()
    samples: list[tuple[float, int, str]] = []
    done = threading.Event()
    page = os.sysconf("SC_PAGE_SIZE")

    def sample() -> None:
        with open("/proc/self/statm") as statm:
            while not done.is_set():
                statm.seek(0)
                rss = int(statm.read().split()[1]) * page
                frame = sys._current_frames().get(main_id)
                stack = []
                while frame is not None:
                    stack.append((frame.f_code.co_name, frame.f_code.co_filename))
                    frame = frame.f_back
                stack.reverse()
                samples.append((time.perf_counter(), rss, classify(stack)))
                done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    t0 = time.perf_counter()
    sampler.start()
    from centsync.pipelines.cli.main import main

    rc = 0
    try:
        main(["refresh", "--json"], standalone_mode=False)
    except SystemExit as e:
        rc = int(e.code or 0)
    done.set()
    sampler.join()
    import resource

    out.write_text(
        json.dumps(
            {
                "t0": t0,
                "rc": rc,
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "samples": samples,
            }
        )
    )


def rss_phases(
    env: dict[str, str], cwd: Path
) -> tuple[list[tuple[str, float, float, float]], float]:
    out = cwd / "rss.json"
    subprocess.run(
        [sys.executable, __file__, "--rss-child", str(out)], env=env, cwd=cwd, check=False
    )
    doc = json.loads(out.read_text())
    rows: dict[str, list[float]] = {}
    prev = doc["t0"]
    for t, rss, phase in doc["samples"]:
        r = rows.setdefault(phase, [0.0, 0.0, float(rss)])  # seconds, peak, RSS when first seen
        r[0] += t - prev
        r[1] = max(r[1], rss)
        prev = t
    ranked = sorted(
        ((p, s, peak / 2**20, first / 2**20) for p, (s, peak, first) in rows.items()),
        key=lambda x: -x[2],
    )
    return ranked, doc["maxrss_mb"]


# ---- driver --------------------------------------------------------------------------------


def _print_imports(imports: list[tuple[str, float, float]]) -> None:
    """The import-time table."""
    total = sum(s for _, s, _ in imports)
    print(f"Imports (`-X importtime`, {total:.2f} s in all; own = the package's")
    print("modules' self time, first = cumulative where the CLI imports it first):\n")
    print("| package | own seconds | first import, cumulative |\n| - | -: | -: |")
    for pkg, s, cum in imports[:20]:
        print(f"| {pkg} | {s:.3f} | {cum:.3f} |")


def _print_pyspy(prof: dict[str, object], top: int) -> None:
    """The py-spy phases, 'other' stacks, heaviest functions, threads and child processes."""
    per = 1 / 200
    main_s = prof["main_samples"] * per  # type: ignore[operator]
    cli_doc = prof["cli"]
    print(
        f"\npy-spy, main thread: {main_s:.2f} s sampled of {prof['wall']:.2f} s wall "
        f"under py-spy (exit {prof['rc']}; the CLI's own durations: "
        f"{json.dumps((cli_doc or {}).get('durations'))}):\n"  # type: ignore[union-attr]
    )
    print("| phase | seconds | share |\n| - | -: | -: |")
    for phase, c in prof["phases"].most_common():  # type: ignore[attr-defined]
        print(f"| {phase} | {c * per:.2f} | {c * per / main_s:.0%} |")
    print("\n'other', by innermost frames:\n")
    for st, c in prof["others"].most_common(8):  # type: ignore[attr-defined]
        print(f"- {c * per:.2f} s: `{st}`")
    print(f"\nHeaviest functions, main thread, inclusive (top {top}):\n")
    print("| function | seconds |\n| - | -: |")
    for fn, c in prof["funcs"].most_common(top):  # type: ignore[attr-defined]
        print(f"| `{fn}` | {c * per:.2f} |")
    print("\nThreads (samples, idle included):", dict(prof["threads"]))  # type: ignore[arg-type]
    if prof["children"]:
        print("Other processes of the tree (samples):", dict(prof["children"]))  # type: ignore[arg-type]


def _print_rss(ranked: list[tuple[str, float, float, float]], maxrss: float) -> None:
    """The per-phase peak RSS table."""
    print(f"\nPeak RSS by phase (in-process sampler, 20 ms; ru_maxrss {maxrss:.0f} MB):\n")
    print("| phase | seconds | RSS entering | peak RSS |\n| - | -: | -: | -: |")
    for phase, s, peak, first in ranked:
        print(f"| {phase} | {s:.2f} | {first:,.0f} MB | {peak:,.0f} MB |")


def _profile_case(
    case: tuple[str, int | None, int, bool], base: Path, args: argparse.Namespace
) -> None:
    """Profile one case against its own sandbox: imports, py-spy, and (optionally) RSS."""
    from compare import RESULTS, Tool, env_for, measure, start_server, tools

    name, n, years, no_change = case
    tool: Tool = tools(["centsync"], None)["centsync"]
    tmp = Path(tempfile.mkdtemp(prefix="case-", dir=base))
    server = start_server(tmp, n, years)
    try:
        template = tmp / "template"
        template.mkdir()
        if no_change:
            m = measure(tool.cmd, env_for(tool, server, template), template)
            assert m.rc == 0, m.stderr[-2000:]

        def fresh(tag: str) -> tuple[Path, dict[str, str]]:
            d = tmp / tag
            shutil.copytree(template, d)
            return d, env_for(tool, server, d)

        print(f"\n## {name} ({server.rows:,} rows)\n", flush=True)
        d, env = fresh("importtime")
        _print_imports(importtime(env, d))
        d, env = fresh("pyspy")
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
        _print_pyspy(pyspy(env, d, RESULTS / f"pyspy-{slug}.txt"), args.top)
        if args.rss and not no_change:
            d, env = fresh("rss")
            _print_rss(*rss_phases(env, d))
        print(flush=True)
    finally:
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[20_000])
    ap.add_argument("--no-household", action="store_true")
    ap.add_argument("--years", type=int, default=10)
    ap.add_argument("--rss", action="store_true", help="per-phase peak RSS of each first refresh")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--rss-child", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        rss_child(args.rss_child)
        return

    from compare import RESULTS

    RESULTS.mkdir(exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="centsync-profile-"))
    cases: list[tuple[str, int | None, int, bool]] = (
        [] if args.no_household else [("household no-change", None, 3, True)]
    )
    cases += [(f"first refresh {n:,}", n, args.years, False) for n in args.sizes]
    print(f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    try:
        for case in cases:
            _profile_case(case, base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
