"""This code against an earlier commit, side by side: CPU per owner of a household's daily
refresh (issue 30).

    uv run --frozen python bench/versions.py --base 62a8132 [--owners 40] [--rounds 6]

This machine's speed drifts by 10-20 % within minutes, so two runs of bench/owners.py taken one
after the other cannot tell a 5 % change from the drift. Here both versions run at the same
time: the earlier commit is checked out into a temporary git worktree (imported through
PYTHONPATH in place of this checkout), one sandbox server serves N households, and every round
two worker processes refresh disjoint halves of the owners at once, one per version, each a
shard run as a fleet worker does (`fleet.shard.refresh_shard`: refresh, reconciliation, the
shard's lake publish). The halves swap every round, so each version refreshes every owner and
the drift falls on both alike. Each worker measures its own CPU (every thread of its process)
around the shard runs only, not its imports.

Round 0 is the first sync (each half by one version); rounds 1..R advance every owner's clock
a day first. Printed: each round's CPU-s per owner for both, their difference, and the mean.
Both versions must share the warehouse's schema (no migration between them): the owners'
files pass from one version to the other every round.

`--base-env NAME=VALUE` (repeatable) starts the base's workers with that variable too: with
`--base HEAD`, the same code in two environments, e.g. `--base-env LD_PRELOAD=` for glibc's
allocator against the fleet's jemalloc (`fleet_environ`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from owners import advance_clocks, serve

from fleetside import fleet_environ

REPO = Path(__file__).resolve().parent.parent

WORKER = r"""
import json, resource, sys
from pathlib import Path
from centsync.pipelines.fleet.shard import refresh_shard
from centsync.pipelines.settings import Settings

job = json.loads(sys.argv[1])
folder = Path(job["folder"])
base = Settings(data_home=folder / "data", owners_file=folder / "owners.toml",
                lake=folder / "lake", verify_pages=4)

def cpu():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime

started, results = cpu(), []
for i in range(0, len(job["owners"]), 25):
    results += refresh_shard(base, job["owners"][i : i + 25], 1, "auto")
import centsync.warehouse
print(json.dumps({
    "cpu_s_per_owner": (cpu() - started) / len(job["owners"]),
    "verdicts": sorted({r.verdict for r in results}),
    "errors": [r.error for r in results if r.error][:2],
    "code": centsync.warehouse.__file__,
}))
"""


def worktree(base: str, folder: Path) -> Path:
    """The commit `base` checked out under `folder`; the PYTHONPATH that imports it as
    `centsync` (the repository's root is the package)."""
    src = folder / "src"
    subprocess.run(
        ["git", "-C", str(REPO), "worktree", "add", "--detach", str(src), base],
        check=True,
        capture_output=True,
    )
    path = folder / "path"
    path.mkdir()
    (path / "centsync").symlink_to(src)
    return path


def run(
    folder: Path, owners: list[str], path: str | None, extra: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    env = fleet_environ()  # both versions' workers started alike, as the fleet starts them
    if path is not None:
        env["PYTHONPATH"] = path
    env.update(extra or {})
    job = json.dumps({"folder": str(folder), "owners": owners})
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, job], stdout=subprocess.PIPE, text=True, env=env
    )


def result(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a worker failed (exit {proc.returncode})")
    found: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return found


def assignment(text: str) -> tuple[str, str]:
    """`NAME=VALUE` (an empty value allowed) as (name, value), for `--base-env`."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (e.g. LD_PRELOAD=)")
    return name, value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--owners", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=6, help="daily rounds after the first sync")
    ap.add_argument(
        "--base-env",
        action="append",
        default=[],
        type=assignment,
        metavar="NAME=VALUE",
        help="a variable the base's workers are started with (repeatable)",
    )
    args = ap.parse_args()
    base_env = dict(args.base_env)
    print(
        f"load: {os.getloadavg()}  cores: {os.cpu_count()}  base: {args.base} {base_env or ''}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="centsync-versions-") as tmp:
        folder = Path(tmp)
        path = str(worktree(args.base, folder))
        proc, doc = serve(args.owners, folder, rate_limit=True)
        try:
            names = sorted(doc["owners"])
            halves = [names[: len(names) // 2], names[len(names) // 2 :]]
            figures: dict[str, list[float]] = {"base": [], "this": []}
            for n in range(args.rounds + 1):
                if n:
                    advance_clocks(doc, 1)
                first, second = ("base", "this") if n % 2 == 0 else ("this", "base")
                paths = {"base": path, "this": None}
                envs = {"base": base_env, "this": {}}
                procs = {
                    v: run(folder, h, paths[v], envs[v])
                    for v, h in zip((first, second), halves, strict=True)
                }
                got = {v: result(p) for v, p in procs.items()}
                for v, r in got.items():
                    if r["errors"] or r["verdicts"] != ["agree"]:
                        raise SystemExit(f"{v}: {r['verdicts']} {r['errors']}")
                base_cpu, this_cpu = got["base"]["cpu_s_per_owner"], got["this"]["cpu_s_per_owner"]
                label = "first sync" if n == 0 else f"daily {n}"
                print(
                    f"  {label:10}  base {base_cpu:.3f}  this {this_cpu:.3f} CPU-s per owner  "
                    f"({(this_cpu - base_cpu) / base_cpu * 100:+.1f} %), every verdict agree",
                    flush=True,
                )
                if n:
                    figures["base"].append(base_cpu)
                    figures["this"].append(this_cpu)
        finally:
            proc.terminate()
            proc.wait()
            subprocess.run(
                ["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder / "src")],
                check=False,
                capture_output=True,
            )
    base_mean, this_mean = statistics.mean(figures["base"]), statistics.mean(figures["this"])
    diffs = [t - b for b, t in zip(figures["base"], figures["this"], strict=True)]
    print(
        f"daily refresh, mean of {args.rounds} rounds of {args.owners // 2} owners each: base "
        f"{base_mean:.3f}, this {this_mean:.3f} CPU-s per owner "
        f"({(this_mean - base_mean) / base_mean * 100:+.1f} %; per round from "
        f"{min(diffs) / base_mean * 100:+.1f} to {max(diffs) / base_mean * 100:+.1f} %)"
    )


if __name__ == "__main__":
    main()
