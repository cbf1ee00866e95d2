"""A household's no-change refresh from the console script, counted in instructions rather than
seconds: each run under valgrind's callgrind, by turns with another checkout's when asked.

    uv run --frozen python bench/instructions.py                        # this checkout, once
    CENTSYNC_BEFORE=<checkout> uv run --frozen python bench/instructions.py --tools before centsync

Why: the benchmarks' host moves one build's wall and CPU time by 10-25 % from run to run (the
same household refresh took 3.39-4.53 s in nine runs of `bench/compare.py`), so a change worth
a few per cent cannot be seen in seconds there. The instructions a process executes move by
0.2 % at most from run to run (six runs of one build: 6.763-6.774 G), so a change of 1 % shows. An
instruction is not a second (a cache miss or a system call costs more than its instructions),
so this prices work, not waiting; `bench/compare.py` still gives the seconds.

Needs valgrind (`apt-get install -y valgrind`); a run takes about 50 times its usual time (3 min
for a 4 s refresh). Each run starts from a copy of one prepared state (the household's first
refresh: warehouse and Dagster home), against one sandbox over loopback (bench/compare.py's),
with `CENTSYNC_WARM=0`, and must exit 0 with verdict "agree". Printed per run: the
instructions of the console script's process (a refresh starts no child) and where they ran:
Python's interpreter (libpython), split into its parser and compiler (source compiled while the
process runs: the code `dataclasses`, `NamedTuple` and `typing` generate for every class they
make, and any module without bytecode) and the rest; DuckDB; Polars; SQLite; the C library;
the rest. Figures only.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compare import Server, Tool, env_for, measure, prepared, start_server, tools

# libpython's source files that parse and compile Python source
_COMPILER = ("Parser/", "Python/compile.c", "Python/symtable.c", "Python/ast", "Python/pyarena.c")
_COMPILER += ("Python/Python-ast.c", "Python/future.c", "Python/flowgraph.c", "Python/assemble.c")
_OBJECTS = (
    ("DuckDB", "_duckdb"),
    ("Polars", "_polars_runtime"),
    ("SQLite", "libsqlite3"),
    ("C library", "libc.so"),
)
_LINE = re.compile(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(.*)$")
_OBJECT = re.compile(r" \[([^\]]*)\]$")


def where(profile: Path) -> tuple[int, dict[str, int]]:
    """The run's instructions, and how many ran in each part (`callgrind_annotate`'s own
    per-function totals, summed by the object and source file they belong to)."""
    text = subprocess.run(
        ["callgrind_annotate", "--threshold=100", str(profile)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    total = int(re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))  # type: ignore[union-attr]
    parts: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        n, source = int(m.group(1).replace(",", "")), m.group(2)
        named = _OBJECT.search(m.group(3))
        # a line names its object where callgrind knows it; Python's inlined headers do not
        obj = named.group(1) if named else ("libpython" if "/Python-3." in source else "")
        if "libpython" in obj:
            parts[
                "Python: parse and compile"
                if any(c in source for c in _COMPILER)
                else "Python: the rest"
            ] += n
        else:
            parts[next((name for name, key in _OBJECTS if key in obj), "the rest")] += n
    return total, dict(parts)


def _run(tool: Tool, server: Server, template: Path, folder: Path) -> tuple[int, dict[str, int]]:
    shutil.copytree(template, folder)
    env = {**env_for(tool, server, folder), "CENTSYNC_WARM": "0"}
    profile = folder / "callgrind.out"
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={profile}", *tool.cmd]
    m = measure(cmd, env, folder)
    lines = m.stdout.strip().splitlines()
    verdict = json.loads(lines[-1]).get("verdict") if lines else None
    if m.rc != 0 or verdict != "agree":
        raise SystemExit(f"run in {folder}: exit {m.rc}, verdict {verdict}\n{m.stderr[-1500:]}")
    return where(profile)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tools", nargs="+", choices=("centsync", "before"), default=["centsync"])
    ap.add_argument("--reps", type=int, default=1, help="runs of each, by turns (default 1)")
    ap.add_argument("--install", choices=("user", "dev"), default="user")
    args = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        raise SystemExit("valgrind is not installed: apt-get install -y valgrind, then run again")
    chosen = tools(args.tools, None, args.install)
    with tempfile.TemporaryDirectory(prefix="centsync-instructions-") as tmp_name:
        tmp = Path(tmp_name)
        server = start_server(tmp, None, 3)
        try:
            first = chosen[args.tools[0]]
            template = prepared(first, server, tmp / "template", {"CENTSYNC_WARM": "0"})
            runs: dict[str, list[tuple[int, dict[str, int]]]] = {t: [] for t in args.tools}
            for rep in range(1, args.reps + 1):
                for name in args.tools:
                    total, parts = _run(chosen[name], server, template, tmp / f"{name}-{rep}")
                    runs[name].append((total, parts))
                    print(
                        f"  {name:8s} rep {rep}: {total / 1e9:.3f} G instructions, exit 0, agree",
                        flush=True,
                    )
        finally:
            server.stop()
    _table(runs)


def _table(runs: dict[str, list[tuple[int, dict[str, int]]]]) -> None:
    order = (
        ["Python: parse and compile", "Python: the rest"] + [n for n, _ in _OBJECTS] + ["the rest"]
    )
    print(
        "\nA household's no-change refresh from the console script, instructions (G), each "
        "tool's run with the fewest (a one-off extra, such as a module compiled from an edited "
        "source, only adds)\n"
    )
    print("| | " + " | ".join(runs) + " |")
    print("| - |" + " -: |" * len(runs))
    fewest = {name: min(r, key=lambda x: x[0]) for name, r in runs.items()}
    print("| all | " + " | ".join(f"{fewest[n][0] / 1e9:.3f}" for n in runs) + " |")
    for part in order:
        print(
            f"| {part} | "
            + " | ".join(f"{fewest[n][1].get(part, 0) / 1e9:.3f}" for n in runs)
            + " |"
        )
    if len(runs) == 2:
        (first, a), (second, b) = ((n, fewest[n][0]) for n in runs)
        change = f"{(b - a) / 1e6:+.0f} M instructions ({(b - a) / a * 100:+.2f} %)"
        print(f"\n{second} against {first}: {change}")
    spread = {
        n: (min(t for t, _ in r), max(t for t, _ in r)) for n, r in runs.items() if len(r) > 1
    }
    for n, (lo, hi) in spread.items():
        print(f"{n}: runs {lo / 1e9:.3f}-{hi / 1e9:.3f} G")


if __name__ == "__main__":
    sys.exit(main())
