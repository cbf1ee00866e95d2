"""A household refresh's fixed costs, each choice measured with and without (issue 30).

    uv run --frozen python bench/small_statements.py [--switch optimiser] [--owners 25] [--rounds 8]

A small ledger's refresh runs about 200 small DuckDB statements, and planning them costs more
than running them, and starting DuckDB costs more than most of them. Each `--switch` is one
such choice, kept (as released) or undone:

- `optimiser`: a refresh under ONE_THREAD_ROWS (warehouse/session.py) sets `enable_optimizer = false`
  (`Session.refresh_settings`; undone: `warehouse.session.SMALL_REFRESH_OPTIMIZER = True`);
- `shared-instance`: a small warehouse's working copy is attached to the thread's DuckDB
  instance (`warehouse/instances.py`; undone: `SHARED_MAX_BYTES = 0`, an instance each).

N sandbox households (one server process, rate limits on) are synced, then refreshed a day
later, round after round, in this one process, as a shard worker does
(`fleet.shard.refresh_shard`: the refresh, reconciliation and the shard's lake publish). The
rounds alternate the choice kept and undone, so the machine's drift falls on both alike; every
round's CPU-s per owner and verdicts are printed, then each side's median.

    uv run --frozen python bench/small_statements.py --census [--owners 6]

`--census` counts the statements themselves instead: one daily round with DuckDB's own query
log on (`enable_logging('QueryLog')`, written to a file in the temporary folder, set on each
new working-copy instance through `instances.WORKING_SETTINGS`), then every statement DuckDB
ran for the owners' refreshes and their lake share, per owner refresh, by kind and by text. It
counts what DuckDB runs, the statements DuckDB's Python client issues for itself included (a
registered frame is a temporary view: `CREATE OR REPLACE TEMPORARY VIEW "name" AS SELECT 1`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import csv
import gc
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from owners import advance_clocks, serve

from centsync.pipelines.fleet.shard import refresh_shard
from centsync.pipelines.settings import Settings
from centsync.warehouse import instances, session

# switch: (module, attribute, value as released, value undone)
SWITCHES: dict[str, tuple[object, str, object, object]] = {
    "optimiser": (session, "SMALL_REFRESH_OPTIMIZER", False, True),
    "shared-instance": (instances, "SHARED_MAX_BYTES", instances.SHARED_MAX_BYTES, 0),
}


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


# a statement's kind, by its first words (the first pattern that matches)
KINDS = (
    (
        "a frame registered (DuckDB's client)",
        r'^(CREATE (OR REPLACE )?TEMPORARY VIEW "|DROP VIEW IF EXISTS temp\.)',
    ),
    ("transaction control", r"^(BEGIN|COMMIT|ROLLBACK)"),
    ("setting", r"^(SET|RESET|PRAGMA|CALL|USE)\b"),
    ("read", r"^(SELECT|WITH|FROM|SUMMARIZE|DESCRIBE)\b"),
    ("write", r"^(INSERT|DELETE|UPDATE|COPY)\b"),
    ("temporary table or view", r"^(CREATE|DROP)\b"),
    ("attach or detach", r"^(ATTACH|DETACH)\b"),
)


@contextlib.contextmanager
def synced(owners: int) -> Iterator[tuple[Settings, list[str], dict[str, Any], Path]]:
    """N sandbox households served (their own process) and synced once, not measured: the
    shard's settings, the owners, the sandbox's keys document and the temporary folder."""
    with tempfile.TemporaryDirectory(prefix="centsync-statements-") as tmp:
        folder = Path(tmp)
        proc, doc = serve(owners, folder, rate_limit=True)
        try:
            names = sorted(doc["owners"])
            base = Settings(
                data_home=folder / "data", owners_file=folder / "owners.toml", lake=folder / "lake"
            )
            refresh_shard(base, names, 1, "auto")
            yield base, names, doc, folder
        finally:
            proc.terminate()
            proc.wait()


def census(args: argparse.Namespace) -> None:
    """One daily round with DuckDB's query log on: the statements per owner refresh."""
    with synced(args.owners) as (base, names, doc, folder):
        advance_clocks(doc, 1)
        log = folder / "query-log"
        log.mkdir()
        released = instances.WORKING_SETTINGS
        on = f"CALL enable_logging('QueryLog', storage='file', storage_path='{log}')"
        instances.WORKING_SETTINGS = (*released, on)
        try:
            results = refresh_shard(base, names, 1, "auto")
        finally:
            instances.WORKING_SETTINGS = released
        gc.collect()  # the pool's threads are gone: their instances close and write the log
        with (log / "duckdb_log_entries.csv").open(newline="") as f:
            texts = [re.sub(r"\s+", " ", r["message"]).strip() for r in csv.DictReader(f)]
    texts = [t for t in texts if not t.startswith("CALL enable_logging")]
    n = len(names)
    print(
        f"verdicts {sorted({r.verdict for r in results})}; {len(texts) / n:.1f} statements per owner refresh"
    )
    kinds: collections.Counter[str] = collections.Counter()
    for t in texts:
        kinds[next((k for k, p in KINDS if re.match(p, t, re.IGNORECASE)), "other")] += 1
    for kind, count in kinds.most_common():
        print(f"  {count / n:6.1f}  {kind}")
    print("the most frequent, per owner refresh:")
    for text, count in collections.Counter(t[:90] for t in texts).most_common(args.top):
        print(f"  {count / n:6.1f}  {text}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--owners", type=int, default=25)
    ap.add_argument("--rounds", type=int, default=8, help="daily rounds, alternating")
    ap.add_argument("--switch", choices=sorted(SWITCHES), default="optimiser")
    ap.add_argument("--census", action="store_true", help="count a daily round's statements")
    ap.add_argument("--top", type=int, default=20, help="--census: statement texts shown")
    args = ap.parse_args()
    if args.census:
        census(args)
        return
    module, attribute, kept, undone = SWITCHES[args.switch]
    with synced(args.owners) as (base, names, doc, _):
        figures: dict[str, list[float]] = {"kept": [], "undone": []}
        for n in range(args.rounds):
            setting = "kept" if n % 2 == 0 else "undone"
            setattr(module, attribute, kept if setting == "kept" else undone)
            advance_clocks(doc, 1)
            started, wall = cpu(), time.monotonic()
            results = refresh_shard(base, names, 1, "auto")
            per_owner = (cpu() - started) / len(names)
            verdicts = sorted({r.verdict for r in results})
            errors = [r.error for r in results if r.error]
            figures[setting].append(per_owner)
            print(
                f"  round {n + 1}: {args.switch} {setting:6}  {per_owner:.3f} CPU-s per owner, "
                f"{(time.monotonic() - wall) / len(names):.3f} s wall, verdicts {verdicts}"
                + (f", errors {errors[:2]}" if errors else ""),
                flush=True,
            )
    for setting, values in figures.items():
        print(
            f"{args.switch} {setting:6}: median {statistics.median(values):.3f} "
            f"CPU-s per owner over {len(values)} rounds of {args.owners} (best {min(values):.3f})"
        )


if __name__ == "__main__":
    main()
