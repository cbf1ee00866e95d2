"""A household's small Polars plans on each engine: why they run on "in-memory" (issue 30).

    uv run --frozen python bench/small_plans.py [--reps 40]

One sandbox household (its own server process, rate limits on) is synced, its clock moved a
day and refreshed again, as `bench/owners.py`'s daily round does. That refresh's own inputs to
three parts are kept: the marts (`transform.marts.build`), the spending checks of the
reconciliation (`transform.compare.spending_checks`) and the pandera screen of every frame the
refresh validated (`warehouse.pandera_screen.passes_every_check`). Each part is then run again
on those inputs, the engines interleaved (so the machine's drift falls on both alike), and the
median and best of `--reps` runs are printed, with each engine's results checked equal (a
frame's row order aside).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from owners import advance_clocks, serve

from centsync.pipelines.fleet.shard import _refresh
from centsync.pipelines.settings import Settings
from centsync.transform import compare, marts
from centsync.warehouse import pandera_screen, validation

Call = tuple[tuple[Any, ...], dict[str, Any]]


def capture(folder: Path) -> dict[str, list[Call]]:
    """The calls a household's daily refresh makes to the three parts, with their inputs."""
    kept: dict[str, list[Call]] = {"marts": [], "spending": [], "screen": []}
    originals = (marts.build, compare.spending_checks, pandera_screen.passes_every_check)

    def keeping(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kept[name].append((args, kwargs))
            return fn(*args, **kwargs)

        return wrapper

    marts.build = keeping("marts", originals[0])  # type: ignore[assignment]
    compare.spending_checks = keeping("spending", originals[1])  # type: ignore[assignment]
    screen = keeping("screen", originals[2])
    pandera_screen.passes_every_check = screen  # type: ignore[assignment]
    validation.passes_every_check = screen  # type: ignore[attr-defined]
    proc, doc = serve(1, folder, rate_limit=True)
    try:
        base = Settings(
            data_home=folder / "data",
            owners_file=folder / "owners.toml",
            lake=folder / "lake",
            verify_pages=0,
        )
        first = _refresh(base, "owner-001", "auto")
        advance_clocks(doc, 1)
        for calls in kept.values():
            calls.clear()
        daily = _refresh(base, "owner-001", "auto")
        print(f"  refreshes: first {first.verdict}, daily {daily.verdict}", flush=True)
    finally:
        proc.terminate()
        proc.wait()
        marts.build, compare.spending_checks = originals[0], originals[1]  # type: ignore[assignment]
        pandera_screen.passes_every_check = originals[2]  # type: ignore[assignment]
        validation.passes_every_check = originals[2]  # type: ignore[attr-defined]
    return kept


def _same(a: Any, b: Any) -> bool:
    """Equal results, a frame's row order aside (a group_by's order is Polars' choice on any
    engine: the reconciliation sorts its differences itself)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, pl.DataFrame):
        return a.schema == b.schema and a.sort(a.columns).equals(b.sort(b.columns))
    return bool(a == b)


def timed(variants: dict[str, Callable[[], Any]], reps: int) -> dict[str, tuple[float, float]]:
    """Median and best ms of each variant, interleaved; their results must be equal."""
    results = {name: fn() for name, fn in variants.items()}
    first = next(iter(results.values()))
    for name, got in results.items():
        if not _same(first, got):
            raise SystemExit(f"{name} gave other results than {next(iter(results))}")
    spent: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(reps):
        for name, fn in variants.items():
            started = time.perf_counter()
            fn()
            spent[name].append(time.perf_counter() - started)
    return {n: (statistics.median(s) * 1000, min(s) * 1000) for n, s in spent.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=40)
    args = p.parse_args()
    print(f"  uptime: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="centsync-small-plans-") as tmp:
        kept = capture(Path(tmp))
    (m_args, m_kwargs), (s_args, s_kwargs) = kept["marts"][-1], kept["spending"][-1]
    screens = kept["screen"]

    def build(engine: str) -> Callable[[], Any]:
        return lambda: marts.build(*m_args, **{**m_kwargs, "engine": engine})

    def checks(engine: str) -> Callable[[], Any]:
        return lambda: compare.spending_checks(*s_args, **{**s_kwargs, "engine": engine})

    def screen(small: int) -> Callable[[], Any]:
        def run() -> list[bool]:
            pandera_screen.SMALL_FRAME = small
            return [pandera_screen.passes_every_check(*a, **k) for a, k in screens]

        return run

    parts = {
        "marts (7 marts, validated)": {"auto": build("auto"), "in-memory": build("in-memory")},
        "spending checks": {"auto": checks("auto"), "in-memory": checks("in-memory")},
        f"pandera screen ({len(screens)} frames)": {
            "auto": screen(0),
            "in-memory, unoptimised": screen(pandera_screen.SMALL_FRAME),
        },
    }
    print("| part | engine | median ms | best ms |\n| - | - | -: | -: |")
    for part, variants in parts.items():
        for name, (median, best) in timed(variants, args.reps).items():
            print(f"| {part} | {name} | {median:.1f} | {best:.1f} |")


if __name__ == "__main__":
    main()
